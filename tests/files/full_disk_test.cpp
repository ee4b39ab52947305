// A real full disk: a 64 KiB tmpfs, mounted in a mount namespace of this
// process's own (so that nothing outlives it), takes a training state, a
// checkpoint and a shard too large for it. Each must fail naming the file and
// leave no temporary behind, so the disk is not kept full: a small file still
// fits afterwards. Needs root (mount); exits 77 (skipped) where it cannot mount.
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt2_checkpoint.h"
#include "gpt2_weights.h"
#include "shard.h"
#include "train_state.h"

namespace fs = std::filesystem;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  failures += !ok;
}

// `write` must throw a message that starts with `path` and says the disk is full.
void expectFull(const fs::path& dir, const std::string& path, const std::function<void()>& write) {
  std::string message;
  try {
    write();
  } catch (const std::exception& e) {
    message = e.what();
  }
  check(message.starts_with(path + ": ") && message.find("No space left on device") != std::string::npos,
        path + " too large for the disk fails naming it: " + message);
  check(fs::is_empty(dir), "nothing left behind in " + dir.string());
}

llmc::TrainState stateOf(size_t parameters) {
  llmc::TrainState state;
  state.optimizer.step = 1;
  state.optimizer.m.assign(parameters, 0.5);
  state.optimizer.v.assign(parameters, 0.25);
  state.loaderState.assign(24, 0);
  return state;
}

void runChecks(const fs::path& dir) {
  const std::string state = (dir / "state_00000001.bin").string();
  expectFull(dir, state, [&] { llmc::writeTrainState(state, stateOf(20000)); });  // 160 KB

  llmc::Gpt2Config config;
  config.L = 2, config.C = 32, config.H = 4, config.T = 16, config.V = 100, config.Vp = 128;  // ~120 KB in fp32
  const std::string model = (dir / "model_00000001.bin").string();
  expectFull(dir, model, [&] { llmc::writeCheckpoint(model, llmc::randomGpt2Weights(config, 1), false); });

  const std::string shard = (dir / "corpus_train_000000.bin").string();
  expectFull(dir, shard, [&] { llmc::writeShard(shard, std::vector<uint16_t>(40000, 7)); });  // 80 KB

  // The disk was not left full: a state that fits is written and reads back.
  llmc::writeTrainState(state, stateOf(1000));
  check(llmc::readTrainState(state).optimizer.m.size() == 1000, "a state that fits is written afterwards");
}

}  // namespace

int main() {
  if (::geteuid() != 0) {
    std::puts("skipped: mounting a tmpfs needs root");
    return 77;
  }
  // A mount namespace of our own, private, where the system allows one.
  if (::unshare(CLONE_NEWNS) == 0) ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
  char name[] = "/tmp/llmc_full_disk_XXXXXX";
  if (!::mkdtemp(name)) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path dir = name;
  if (::mount("tmpfs", name, "tmpfs", 0, "size=64k") != 0) {
    std::perror("skipped: cannot mount a tmpfs");
    fs::remove(dir);
    return 77;
  }
  try {
    runChecks(dir);
  } catch (const std::exception& e) {
    check(false, std::string("unexpected error: ") + e.what());
  }
  ::umount(name);
  fs::remove_all(dir);
  std::printf("%s\n", failures ? "full disk checks FAILED" : "all full disk checks passed");
  return failures ? 1 : 0;
}
