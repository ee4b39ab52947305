// Where the tools find their data files (common/data_folder.h): the variable,
// then share/llmc beside the executable's folder, then the source tree, then
// a repository above the executable. The installed copy run from elsewhere is
// tested end to end by tests/install/install_test.sh (ctest install).
#include "data_folder.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "data_test_support.h"

namespace fs = std::filesystem;
using llmc::DataFolder;
using llmc::dataFolderCandidates;
using llmc::executableDirectory;
using llmc::findDataFolder;
using llmc::testing::DataTempDir;
using Catch::Matchers::Contains;

namespace {

constexpr const char* kVariable = "LLMC_DATA_FOLDER_TEST";

// A folder name of this test's own, so that nothing else's folders are found.
std::string uniqueName() { return fmt::format("llmc-data-folder-test-{}", ::getpid()); }

}  // namespace

TEST_CASE("data folder: installed beside the executable, then the source tree, then above the executable",
          "[files]") {
  const fs::path exe = executableDirectory();
  REQUIRE(fs::exists(exe / "llmc_files_tests"));
  const DataFolder folder{kVariable, "targets", "/src/compiler/targets", "compiler/targets"};
  const std::vector<fs::path> candidates = dataFolderCandidates(folder);
  REQUIRE(candidates.size() >= 4);
  CHECK(candidates[0] == (exe.parent_path() / "share/llmc/targets"));
  CHECK(candidates[1] == fs::path("/src/compiler/targets"));
  CHECK(candidates[2] == exe / "compiler/targets");
  CHECK(candidates[3] == exe.parent_path() / "compiler/targets");
  CHECK(candidates.back() == fs::path("/compiler/targets"));
}

TEST_CASE("data folder: the installed copy wins over the source tree; the variable over both", "[files]") {
  unsetenv(kVariable);
  DataTempDir source("data_folder_source");
  const std::string name = uniqueName();
  const DataFolder folder{kVariable, name, source.path, name};
  CHECK(findDataFolder(folder) == source.path);

  // share/llmc/NAME beside the folder of the executable, as `cmake --install` lays it out.
  const fs::path share = executableDirectory().parent_path() / "share";
  const bool shareExisted = fs::exists(share);
  const fs::path installed = share / "llmc" / name;
  fs::create_directories(installed);
  const bool found = findDataFolder(folder) == installed;
  DataTempDir given("data_folder_given");
  setenv(kVariable, given.path.c_str(), 1);
  const fs::path overridden = findDataFolder(folder);
  unsetenv(kVariable);
  fs::remove_all(shareExisted ? installed : share);
  CHECK(found);
  CHECK(overridden == given.path);
  CHECK(findDataFolder(folder) == source.path);
}

TEST_CASE("data folder: a repository above the executable when the source tree is gone", "[files]") {
  unsetenv(kVariable);
  // The executable's own folder, found as <a folder above it>/<its name>.
  const fs::path exe = executableDirectory();
  const DataFolder folder{kVariable, uniqueName(), "/nonexistent/llmc/source", exe.filename().string()};
  CHECK(findDataFolder(folder) == exe);
}

TEST_CASE("data folder: none found, or a variable naming no folder, says where it looked", "[files]") {
  const DataFolder folder{kVariable, uniqueName(), "/nonexistent/llmc/source", uniqueName() + "/missing"};
  unsetenv(kVariable);
  try {
    findDataFolder(folder);
    FAIL("found a folder that does not exist");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Contains(std::string("set ") + kVariable));
    CHECK_THAT(e.what(), Contains("/nonexistent/llmc/source"));
    CHECK_THAT(e.what(), Contains((executableDirectory().parent_path() / "share/llmc" / uniqueName()).string()));
  }
  setenv(kVariable, "/nonexistent/llmc/given", 1);
  CHECK_THROWS_WITH(findDataFolder(folder), Contains(std::string(kVariable) + "=/nonexistent/llmc/given is not a folder"));
  unsetenv(kVariable);
}
