#include "runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "driver/pipeline.h"
#include "frontend/source.h"
#include "planning/fusion.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace llmc::fuzz {

namespace fs = std::filesystem;

namespace {

// The child's exit statuses (anything else, or a signal, is a crash: a
// sanitizer's report exits 1, or aborts).
constexpr int kAccepted = 10, kDiagnostic = 11, kInternal = 12, kOutOfMemory = 13;

// Elements of the largest array: planning (autodiff, the recompute pass, the
// partition search) runs only on inputs this small.
constexpr int64_t kPlanElements = int64_t{1} << 16;

bool small(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.type.elementCount() > kPlanElements) return false;
  return true;
}

void writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The child: the front end on input.dg, then (small inputs, --plan) the
// backward pass and the kernel plan for sm_90a.
[[noreturn]] void child(const Input& input, const RunOptions& options, const Target* target) {
  const int err = ::open((fs::path(options.scratch) / "child.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (err >= 0) ::dup2(err, 2);
  const int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) ::dup2(null, 0), ::dup2(null, 1);
#if !defined(__SANITIZE_ADDRESS__)
  // Without AddressSanitizer (whose shadow memory needs the address space),
  // an allocation past the bound fails here too, not only in the parent's watch.
  const rlim_t bytes = static_cast<rlim_t>(options.memoryMiB + 512) << 20;
  const rlimit limit{bytes, bytes};
  ::setrlimit(RLIMIT_AS, &limit);
#endif
  int status = kAccepted;
  try {
    PipelineOptions p;
    p.path = (fs::path(options.scratch) / "input.dg").string();
    p.sizes = parseSizeBindings(input.sizes);
    Graph graph = compileToIR(p);
    if (options.plan && target && small(graph)) {
      p.grad = input.grad;
      p.target = target;
      graph = compileToIR(p);
      formKernels(graph);
      planKernels(graph, *target, p.cost);
    }
  } catch (const CompileError& e) {
    status = kDiagnostic;
  } catch (const std::invalid_argument& e) {  // --set refused, as llmc-compile's command line
    status = kDiagnostic;
  } catch (const std::bad_alloc&) {
    status = kOutOfMemory;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    status = kInternal;
  }
  std::fflush(stderr);
  ::_exit(status);
}

// Resident memory of process `pid`, in MiB (0 once it is gone).
long residentMiB(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

std::string readTail(const fs::path& path, size_t most = 8000) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > most ? text.substr(text.size() - most) : text;
}

Outcome fromStatus(int status) {
  if (!WIFEXITED(status)) return Outcome::Crash;
  switch (WEXITSTATUS(status)) {
    case kAccepted: return Outcome::Accepted;
    case kDiagnostic: return Outcome::Diagnostic;
    case kInternal: return Outcome::Internal;
    case kOutOfMemory: return Outcome::Memory;
    default: return Outcome::Crash;
  }
}

const Target* planTarget() {
  static const Target target = loadTarget("sm_90a");
  return &target;
}

}  // namespace

const char* outcomeName(Outcome o) {
  switch (o) {
    case Outcome::Accepted: return "accepted";
    case Outcome::Diagnostic: return "diagnostic";
    case Outcome::Internal: return "internal-error";
    case Outcome::Crash: return "crash";
    case Outcome::Timeout: return "timeout";
    case Outcome::Memory: return "memory";
  }
  return "?";
}

bool isFailure(Outcome o) { return o != Outcome::Accepted && o != Outcome::Diagnostic; }

Result runInput(const Input& input, const RunOptions& options) {
  writeFile(fs::path(options.scratch) / "input.dg", input.text);
  const Target* target = options.plan ? planTarget() : nullptr;
  const auto start = std::chrono::steady_clock::now();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) child(input, options, target);

  Result result;
  auto sleep = std::chrono::microseconds(50);
  for (int polls = 0;; ++polls) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (done == pid) {
      result.outcome = fromStatus(status);
      if (!WIFEXITED(status)) result.detail = std::string("signal ") + strsignal(WTERMSIG(status)) + "\n";
      break;
    }
    const bool late = result.seconds > options.seconds;
    const bool big = polls % 16 == 0 && residentMiB(pid) > options.memoryMiB;
    if (late || big) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.outcome = late ? Outcome::Timeout : Outcome::Memory;
      break;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(2000));
  }
  if (isFailure(result.outcome)) result.detail += readTail(fs::path(options.scratch) / "child.err");
  return result;
}

}  // namespace llmc::fuzz
