// Runs the checks of diagrams in child processes, several at once: a crash
// (SIGSEGV in the compiler, an abort) or a hang in one diagram is that
// diagram's failure, not the end of the run.
#pragma once

#include <sys/types.h>

#include <map>
#include <stdexcept>
#include <optional>
#include <string>

#include "checks.h"

namespace llmc::fuzz {

struct Outcome {
  std::optional<Failure> failure;
  double seconds = 0;
};

// Thrown by Runner::wait once SIGTERM or SIGINT has come (stopOnSignals):
// the diagrams still running are unfinished, neither passed nor failed.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

// From now on SIGTERM and SIGINT end the wait for diagrams (Interrupted)
// instead of the process, so that a run cut short (by `timeout`, by Ctrl-C)
// still says what it checked and which diagrams it left unfinished.
void stopOnSignals();

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
  // Ends the diagrams still running (SIGKILL); returns their tags.
  std::vector<int> stopAll();
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
