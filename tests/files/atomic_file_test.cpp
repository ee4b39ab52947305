// Files written atomically (common/atomic_file.h): a fresh temporary beside
// the destination, never a fixed name and never through a symlink, removed on
// every failure; devices written into or refused, never replaced.
#include "atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>

#include "data_test_support.h"

namespace fs = std::filesystem;
using llmc::AtomicFile;
using llmc::AtomicWriteOptions;
using llmc::FileWriteError;
using llmc::NonRegularDestination;
using llmc::writeFileAtomically;
using llmc::testing::DataTempDir;
using llmc::testing::readFileBytes;
using llmc::testing::writeFile;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

size_t entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// Turns the injected write failure off however the test ends.
struct InjectedFailure {
  InjectedFailure(uint64_t bytes, int error) { llmc::testing::failWritesAfter(bytes, error); }
  ~InjectedFailure() { llmc::testing::failWritesAfter(std::nullopt, 0); }
};

}  // namespace

TEST_CASE("atomic file: written whole, nothing else left in the folder", "[files]") {
  DataTempDir dir("atomic_whole");
  const fs::path path = dir.path / "out.txt";
  writeFileAtomically(path, "first");
  CHECK(readFileBytes(path) == "first");
  writeFileAtomically(path, "second, longer");
  CHECK(readFileBytes(path) == "second, longer");
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("atomic file: the temporary is fresh, hidden, beside the destination", "[files]") {
  DataTempDir dir("atomic_temporary");
  const fs::path path = dir.path / "model.bin";
  AtomicFile a(path), b(path);
  CHECK(a.temporary().parent_path() == dir.path);
  CHECK_THAT(a.temporary().filename().string(), StartsWith(".model.bin."));
  CHECK(a.temporary() != b.temporary());
  CHECK(fs::exists(a.temporary()));
  a.write("a");
  b.write("b");
  a.commit();
  b.commit();  // the last rename wins
  CHECK(readFileBytes(path) == "b");
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("atomic file: a planted symlink at the old fixed name is not followed", "[files]") {
  DataTempDir dir("atomic_symlink");
  const fs::path victim = dir.path / "victim";
  writeFile(victim, "precious");
  // What `-o out` used to write through: out.tmp, a link to the victim.
  fs::create_symlink(victim, dir.path / "out.tmp");
  writeFileAtomically(dir.path / "out", "output");
  CHECK(readFileBytes(victim) == "precious");
  CHECK(readFileBytes(dir.path / "out") == "output");
  CHECK(fs::is_symlink(dir.path / "out.tmp"));
}

TEST_CASE("atomic file: the user's own symlink is followed, another user's replaced", "[files]") {
  DataTempDir dir("atomic_own_symlink");
  const fs::path real = dir.path / "real", link = dir.path / "link";
  writeFile(real, "old");
  fs::permissions(real, static_cast<fs::perms>(0640));
  fs::create_symlink("real", link);  // relative, as ln -s makes them
  AtomicFile file(link);
  CHECK(file.target() == real);
  CHECK(file.temporary().parent_path() == dir.path);
  file.write("new");
  file.commit();
  CHECK(fs::is_symlink(link));
  CHECK(readFileBytes(real) == "new");
  CHECK((fs::status(real).permissions() & fs::perms::all) == static_cast<fs::perms>(0640));
  // A link to a device or FIFO is written into through it, or refused.
  fs::create_symlink("/dev/null", dir.path / "null");
  writeFileAtomically(dir.path / "null", "x", {.nonRegular = NonRegularDestination::WriteInto});
  CHECK_THROWS_WITH(writeFileAtomically(dir.path / "null", "x"), Contains("is not a regular file"));
  CHECK(fs::is_symlink(dir.path / "null"));
  // Unless told not to: then the link itself is replaced.
  writeFileAtomically(link, "replaced", {.followOwnLinks = false});
  CHECK_FALSE(fs::is_symlink(link));
  CHECK(readFileBytes(real) == "new");
  // Only root can make a link another user owns.
  fs::create_symlink(real, dir.path / "planted");
  if (::geteuid() != 0 || ::lchown((dir.path / "planted").c_str(), 4242, 4242) != 0) {
    WARN("not root: cannot make a link of another user here");
    return;
  }
  writeFileAtomically(dir.path / "planted", "not through the link");
  CHECK_FALSE(fs::is_symlink(dir.path / "planted"));
  CHECK(readFileBytes(dir.path / "planted") == "not through the link");
  CHECK(readFileBytes(real) == "new");
}

TEST_CASE("atomic file: a full disk removes the temporary and names the file", "[files]") {
  DataTempDir dir("atomic_full");
  const fs::path path = dir.path / "state.bin";
  writeFile(path, "old state");
  {
    InjectedFailure full(1000, ENOSPC);
    AtomicFile file(path);
    const fs::path temporary = file.temporary();
    file.write(std::string(600, 'x'));
    CHECK_THROWS_WITH(file.write(std::string(600, 'y')),
                      StartsWith(path.string() + ": write failed: No space left on device") &&
                          Contains("its temporary " + temporary.string() + " was removed"));
    CHECK_FALSE(fs::exists(temporary));
    CHECK_THROWS_AS(file.commit(), FileWriteError);
  }
  CHECK(readFileBytes(path) == "old state");  // the old file stands
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("atomic file: abandoned before commit, it leaves nothing", "[files]") {
  DataTempDir dir("atomic_abandoned");
  try {
    AtomicFile file(dir.path / "x.bin");
    file.write("half");
    throw std::runtime_error("the caller failed");
  } catch (const std::runtime_error&) {
  }
  CHECK(entries(dir.path) == 0);
}

TEST_CASE("atomic file: a missing folder names the destination", "[files]") {
  DataTempDir dir("atomic_missing");
  const fs::path path = dir.path / "no/such/x.bin";
  CHECK_THROWS_WITH(writeFileAtomically(path, "x"),
                    path.string() + ": cannot create a temporary file beside it: No such file or directory");
}

TEST_CASE("atomic file: a device is written into or refused, never replaced", "[files]") {
  CHECK_THROWS_WITH(writeFileAtomically("/dev/null", "x"), Contains("/dev/null: is not a regular file"));
  const AtomicWriteOptions into{.nonRegular = NonRegularDestination::WriteInto};
  writeFileAtomically("/dev/null", "into the device", into);
  CHECK_THROWS_WITH(writeFileAtomically("/dev/full", "x", into), "/dev/full: write failed: No space left on device");
  struct stat s;
  REQUIRE(::stat("/dev/full", &s) == 0);
  CHECK(S_ISCHR(s.st_mode));
  DataTempDir dir("atomic_folder");
  CHECK_THROWS_WITH(writeFileAtomically(dir.path, "x", into), dir.path.string() + ": is a folder");
  fs::create_directory_symlink(dir.path, dir.path / "folder_link");
  CHECK_THROWS_WITH(writeFileAtomically(dir.path / "folder_link", "x", into), Contains(": is a folder"));
  // A block device is never written, even into.
  if (fs::is_block_file("/dev/loop0"))
    CHECK_THROWS_WITH(writeFileAtomically("/dev/loop0", "x", into), "/dev/loop0: is a block device; not written");
}

TEST_CASE("atomic file: permissions of the file replaced, else the umask's", "[files]") {
  DataTempDir dir("atomic_mode");
  const fs::path path = dir.path / "f";
  const mode_t mask = ::umask(022);
  writeFileAtomically(path, "a");
  CHECK((fs::status(path).permissions() & fs::perms::all) == static_cast<fs::perms>(0644));
  fs::permissions(path, static_cast<fs::perms>(0640));
  writeFileAtomically(path, "b");
  CHECK((fs::status(path).permissions() & fs::perms::all) == static_cast<fs::perms>(0640));
  writeFileAtomically(dir.path / "g", "c", {.mode = 0600});
  CHECK((fs::status(dir.path / "g").permissions() & fs::perms::all) == static_cast<fs::perms>(0600));
  ::umask(mask);
}
