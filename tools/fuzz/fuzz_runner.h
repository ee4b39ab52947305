// Runs the checks of diagrams in child processes, several at once: a crash
// (SIGSEGV in the compiler, an abort) or a hang in one diagram is that
// diagram's failure, not the end of the run.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

#include "checks.h"

namespace llmc::fuzz {

struct Outcome {
  std::optional<Failure> failure;
  double seconds = 0;
};

class Runner {
 public:
  // fork: each diagram in a child process (else in this process, as a
  // sanitizer or a debugger wants it); timeout: seconds a diagram may take.
  Runner(CheckOptions options, bool fork, double timeout) : options_(std::move(options)), fork_(fork), timeout_(timeout) {}
  const CheckOptions& options() const { return options_; }

  // Starts the checks of `spec`; `tag` comes back with its outcome.
  void start(const DiagramSpec& spec, int tag);
  // Waits for one started diagram to finish.
  std::pair<int, Outcome> wait();
  size_t running() const { return children_.size() + finished_.size(); }
  // start and wait, for one diagram (the shrinker's candidates).
  Outcome run(const DiagramSpec& spec, const CheckOptions& options);

 private:
  struct Child {
    int tag;
    int pipe;
    double started;
  };
  Outcome inProcess(const DiagramSpec& spec, const CheckOptions& options) const;
  pid_t spawn(const DiagramSpec& spec, const CheckOptions& options, int* readEnd) const;
  Outcome collect(pid_t pid, int status, int pipe, double started) const;

  CheckOptions options_;
  bool fork_;
  double timeout_;
  std::map<pid_t, Child> children_;
  std::map<int, Outcome> finished_;  // run in process, by tag
};

}  // namespace llmc::fuzz
