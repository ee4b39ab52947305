// llmc-libfuzz-frontend: the front end as an in-process libFuzzer target
// (issue 20). Built with -DLLMC_LIBFUZZER=ON (Clang; tests/fuzz/frontend/
// README.md says how to run it). Each input is a diagram file: written into a
// fixed folder (import_tree.h) and compiled as llmc-compile would, with the
// sizes, entry and --grad its own '# RUN:' lines give (run_line.h). The IR is
// printed (llmc-compile's default output); an input whose arrays are small is
// then compiled again with its backward pass and planned for sm_90a, as
// llmc-fuzz-frontend --plan does.
//
// A diagnostic (CompileError) is a pass: bad input refused as it should be.
// Any other exception is what llmc-compile reports as an internal error (exit
// 3): it is printed and the process aborts, so that libFuzzer records the
// input. Crashes, sanitizer reports, -timeout and -rss_limit_mb are
// libFuzzer's own.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "driver/backend.h"
#include "driver/pipeline.h"
#include "frontend/source.h"
#include "import_tree.h"
#include "ir/print.h"
#include "planning/target.h"
#include "run_line.h"
#include "stack_thread.h"

namespace {

namespace fs = std::filesystem;
using namespace llmc;

// Elements of the largest array: only inputs this small are planned (autodiff,
// the recompute pass, the partition search), as in llmc-fuzz-frontend.
constexpr int64_t kPlanElements = int64_t{1} << 16;
// The stack llmc-compile compiles on (tools/llmc_compile.cpp, main): the
// passes recurse along the graph, the CUDA writer once per node of a chain.
constexpr size_t kCompileStack = size_t{1} << 30;

struct State {
  fs::path root;          // this process's folder (removed at exit)
  std::string inputPath;  // where each input is written
  Target target;          // sm_90a, loaded once
  fuzz::StackThread compiler{kCompileStack};  // every input is compiled on it
};
State* state = nullptr;

bool small(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.type.elementCount() > kPlanElements) return false;
  return true;
}

// Folders of earlier runs that crashed (libFuzzer exits without running
// atexit handlers then): llmc-libfuzz-<pid> with no such process left.
void removeStaleFolders(const fs::path& tmp) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("llmc-libfuzz-", 0) != 0) continue;
    const std::string pid = name.substr(13);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!fs::exists("/proc/" + pid)) fs::remove_all(entry.path(), ec);
  }
}

// The input through the front end; small ones on through autodiff and the
// back end's planning.
void compileInput(const std::string& text) {
  const fuzz::RunLineOptions run = fuzz::readRunLines(text);
  PipelineOptions p;
  p.path = state->inputPath;
  p.entry = run.entry;
  if (!run.sizes.empty()) {
    try {
      p.sizes = parseSizeBindings(run.sizes);
    } catch (const std::invalid_argument&) {
      return;  // llmc-compile refuses this --set on its command line (exit 2)
    }
  }
  Graph graph = compileToIR(p);
  const std::string printed = printGraph(graph);
  if (printed.empty()) std::abort();  // never: keeps the printing from being optimised away
  if (!small(graph)) return;
  p.grad = run.grad;
  p.loss = run.loss;
  p.wrt = run.wrt;
  p.target = &state->target;
  graph = compileToIR(p);
  BackendOptions backend;
  backend.until = "partition";
  compileBackend(graph, state->target, backend);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const fs::path tmp = fs::temp_directory_path();
  removeStaleFolders(tmp);
  const fs::path root = tmp / ("llmc-libfuzz-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(root, ec);
  state = new State{root, fuzz::makeImportTree(root.string(), LLMC_SOURCE_DIR), loadTarget("sm_90a")};
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(state->root, ignored);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream out(state->inputPath, std::ios::binary | std::ios::trunc);
    out << text;
  }
  // On llmc-compile's stack (stack_thread.h): on the main thread's 8 MiB, the
  // chain of 100,000 nodes that the loop limit allows (fewer under ASan,
  // whose frames are larger) would be a stack overflow llmc-compile has not.
  state->compiler.run([&] {
    try {
      compileInput(text);
    } catch (const CompileError&) {
      // A diagnostic: the input is refused with an error, as it should be.
    } catch (const std::exception& e) {
      std::fprintf(stderr, "llmc-libfuzz-frontend: internal error (llmc-compile would exit 3): %s\n", e.what());
      std::abort();
    }
  });
  return 0;
}
