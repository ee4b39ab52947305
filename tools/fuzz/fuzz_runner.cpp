#include "fuzz_runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace llmc::fuzz {

namespace {

volatile sig_atomic_t stopRequested = 0;

extern "C" void requestStop(int) { stopRequested = 1; }

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The child's report, one field a line: "check NAME" lines as the checks
// start, then "ok" or "fail", the check, the signature and the detail (its
// newlines as \x1f; at most 16 KB, so that the pipe never fills).
void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string oneLine(std::string text, size_t limit) {
  if (text.size() > limit) text = text.substr(0, limit) + " [...]";
  for (char& c : text)
    if (c == '\n') c = '\x1f';
  return text;
}

std::optional<Failure> checkedInProcess(const DiagramSpec& spec, const CheckOptions& options,
                                        const std::function<void(const std::string&)>& progress) {
  try {
    return runChecks(spec, options, progress);
  } catch (const std::exception& e) {
    return failureFrom("fuzz", "", e);
  }
}

}  // namespace

Outcome Runner::inProcess(const DiagramSpec& spec, const CheckOptions& options) const {
  const double started = now();
  Outcome o;
  o.failure = checkedInProcess(spec, options, {});
  o.seconds = now() - started;
  return o;
}

pid_t Runner::spawn(const DiagramSpec& spec, const CheckOptions& options, int* readEnd) const {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::close(fds[0]);
    ::alarm(static_cast<unsigned>(timeout_));  // SIGALRM ends a hang
    const auto failure = checkedInProcess(spec, options, [&](const std::string& check) { writeAll(fds[1], "check " + check + "\n"); });
    if (failure)
      writeAll(fds[1], fmt::format("fail\n{}\n{}\n{}\n", failure->check, oneLine(failure->signature, 400),
                                   oneLine(failure->detail, 16000)));
    else
      writeAll(fds[1], "ok\n");
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  *readEnd = fds[0];
  return pid;
}

Outcome Runner::collect(pid_t, int status, int pipe, double started) const {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  ::close(pipe);
  Outcome o;
  o.seconds = now() - started;
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string lastCheck = "front";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("check ", 0) == 0) lastCheck = lines[i].substr(6);
    if (lines[i] == "ok" && WIFEXITED(status) && WEXITSTATUS(status) == 0) return o;
    if (lines[i] == "fail" && i + 2 < lines.size()) {
      std::string detail = i + 3 < lines.size() ? lines[i + 3] : "";
      for (char& c : detail)
        if (c == '\x1f') c = '\n';
      o.failure = Failure{lines[i + 1], lines[i + 2], detail};
      return o;
    }
  }
  // No report: the child died in lastCheck.
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    o.failure = Failure{lastCheck, fmt::format("{}: hang (more than {} s)", lastCheck, timeout_),
                        fmt::format("the checks ran out of time ({} s) in the {} check", timeout_, lastCheck)};
  else if (WIFSIGNALED(status))
    o.failure = Failure{lastCheck, fmt::format("{}: crash ({})", lastCheck, strsignal(WTERMSIG(status))),
                        fmt::format("the process died of signal {} ({}) in the {} check", WTERMSIG(status),
                                    strsignal(WTERMSIG(status)), lastCheck)};
  else
    o.failure = Failure{lastCheck, fmt::format("{}: exit without a report", lastCheck),
                        fmt::format("the process exited with status {} in the {} check", WEXITSTATUS(status), lastCheck)};
  return o;
}

void Runner::start(const DiagramSpec& spec, int tag) {
  if (!fork_) {
    finished_[tag] = inProcess(spec, options_);
    return;
  }
  int pipe = -1;
  const pid_t pid = spawn(spec, options_, &pipe);
  children_[pid] = {tag, pipe, now()};
}

std::pair<int, Outcome> Runner::wait() {
  if (!finished_.empty()) {
    auto it = finished_.begin();
    std::pair<int, Outcome> done = {it->first, it->second};
    finished_.erase(it);
    return done;
  }
  for (;;) {
    if (stopRequested) throw Interrupted();
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) throw std::runtime_error("waitpid: " + std::string(std::strerror(errno)));
    auto it = children_.find(pid);
    if (it == children_.end()) continue;  // not one of ours
    const Child child = it->second;
    children_.erase(it);
    if (stopRequested) {  // a child the same signal ended (Ctrl-C reaches the whole group): unfinished
      ::close(child.pipe);
      finished_[child.tag] = Outcome{};
      throw Interrupted();
    }
    return {child.tag, collect(pid, status, child.pipe, child.started)};
  }
}

void stopOnSignals() {
  struct sigaction action = {};
  action.sa_handler = requestStop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

std::vector<int> Runner::stopAll() {
  std::vector<int> tags;
  for (const auto& [pid, child] : children_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(child.pipe);
    tags.push_back(child.tag);
  }
  for (const auto& [tag, outcome] : finished_) tags.push_back(tag);
  children_.clear();
  finished_.clear();
  std::sort(tags.begin(), tags.end());
  return tags;
}

Outcome Runner::run(const DiagramSpec& spec, const CheckOptions& options) {
  if (!fork_) return inProcess(spec, options);
  int pipe = -1;
  const double started = now();
  const pid_t pid = spawn(spec, options, &pipe);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return collect(pid, status, pipe, started);
}

}  // namespace llmc::fuzz
