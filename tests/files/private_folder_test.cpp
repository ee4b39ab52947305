// Private folders (common/private_folder.h): what a cache may trust.
#include "private_folder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "data_test_support.h"

namespace fs = std::filesystem;
using llmc::createPrivateFolder;
using llmc::readRegularFile;
using llmc::whyNotPrivate;
using llmc::testing::DataTempDir;
using llmc::testing::writeFile;
using Catch::Matchers::Contains;

TEST_CASE("private folder: made 0700, trusted; group or other write bits are not", "[files]") {
  DataTempDir dir("private_folder");
  fs::permissions(dir.path, static_cast<fs::perms>(0700));
  const fs::path cache = dir.path / "a/b/cache";
  const mode_t mask = ::umask(0);  // a umask that would leave a folder writable by all
  createPrivateFolder(cache);
  ::umask(mask);
  CHECK((fs::status(cache).permissions() & fs::perms::all) == static_cast<fs::perms>(0700));
  CHECK((fs::status(dir.path / "a").permissions() & fs::perms::all) == static_cast<fs::perms>(0700));
  CHECK(whyNotPrivate(cache) == std::nullopt);

  fs::permissions(cache, static_cast<fs::perms>(0770));
  CHECK_THAT(*whyNotPrivate(cache), Contains("is writable by its group or by others (mode 0770"));
  fs::permissions(cache, static_cast<fs::perms>(0702));
  CHECK_THAT(*whyNotPrivate(cache), Contains("is writable by its group or by others"));
  fs::permissions(cache, static_cast<fs::perms>(0755));
  CHECK(whyNotPrivate(cache) == std::nullopt);
  // A folder above that others can write into (and is not sticky) lets them swap the cache.
  fs::permissions(dir.path / "a", static_cast<fs::perms>(0777));
  CHECK_THAT(*whyNotPrivate(cache), Contains("lies in " + (dir.path / "a").string() + ", writable by"));
  fs::permissions(dir.path / "a", static_cast<fs::perms>(01777));  // sticky, as /tmp
  CHECK(whyNotPrivate(cache) == std::nullopt);
  CHECK_THAT(*whyNotPrivate(dir.path / "missing"), Contains("cannot be resolved"));
}

TEST_CASE("private folder: one owned by another user is not trusted", "[files]") {
  DataTempDir dir("private_folder_owner");
  fs::permissions(dir.path, static_cast<fs::perms>(0700));
  const fs::path cache = dir.path / "cache";
  createPrivateFolder(cache);
  // Only root can give a folder away; elsewhere the check is the one above.
  if (::geteuid() != 0 || ::chown(cache.c_str(), 12345, 12345) != 0) {
    WARN("not root: cannot make a folder of another user here");
    return;
  }
  CHECK_THAT(*whyNotPrivate(cache), Contains("is owned by user 12345, not by this user (0)"));
}

TEST_CASE("reading a regular file: not through a symlink, not a device, bounded", "[files]") {
  DataTempDir dir("read_regular");
  writeFile(dir.path / "entry", "bytes");
  CHECK(readRegularFile(dir.path / "entry", 100) == std::optional<std::string>("bytes"));
  CHECK(readRegularFile(dir.path / "missing", 100) == std::nullopt);
  fs::create_symlink(dir.path / "entry", dir.path / "link");
  CHECK_THROWS_WITH(readRegularFile(dir.path / "link", 100), "a symbolic link, not a file");
  CHECK_THROWS_WITH(readRegularFile("/dev/zero", 100), "not a regular file");
  CHECK_THROWS_WITH(readRegularFile(dir.path / "entry", 3), "5 bytes, more than the 3 allowed");
}
