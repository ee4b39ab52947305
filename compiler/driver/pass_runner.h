// Runs one pass or stage of the pipeline: times it (--time-passes) and dumps
// what it made (--dump-after), for the front end's passes (pipeline.cpp) and
// the back end's stages (backend.cpp) alike.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <string>

namespace llmc {

struct PassReporting {
  std::string dumpAfter;  // the pass or stage to dump after (empty: none)
  bool timePasses = false;
  std::function<void(const std::string&)> dump;  // where dumps and timings go
};

class PassRunner {
 public:
  // `kind` names what runs in the timing lines: "pass" or "stage".
  PassRunner(const PassReporting& reporting, const char* kind) : reporting_(reporting), kind_(kind) {}

  template <class F>
  auto run(const std::string& name, F&& pass) {
    auto start = std::chrono::steady_clock::now();
    auto result = pass();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (reporting_.timePasses && reporting_.dump)
      reporting_.dump(fmt::format("# {} {:<{}} {:9.3f} ms\n", kind_, name, 23 - kind_.size(), ms));
    return result;
  }

  // Whether `name` is the one to dump after. The dump is made only then.
  bool dumps(const std::string& name) const { return reporting_.dumpAfter == name && reporting_.dump; }
  void dump(const std::string& text) const { reporting_.dump(text); }

 private:
  const PassReporting& reporting_;
  std::string kind_;
};

}  // namespace llmc
