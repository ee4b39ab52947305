#include "import_tree.h"

#include <filesystem>

#include "fixtures.h"

namespace llmc::fuzz {

namespace fs = std::filesystem;

std::string makeImportTree(const std::string& root, const std::string& sourceDir) {
  const fs::path top(root), source(sourceDir);
  const fs::path lit = top / "tests" / "lit", dir = lit / "fuzz";
  fs::create_directories(dir);
  fs::create_directory_symlink(source / "diagrams", top / "diagrams");
  fs::create_directory_symlink(source / "diagrams" / "lib", lit / "lib");
  fs::create_directory_symlink(source / "tests" / "lit" / "errors" / "Inputs", dir / "Inputs");
  for (const char* folder : {"lib", "gpt2", "examples"}) {
    for (const auto& entry : fs::directory_iterator(source / "diagrams" / folder)) {
      if (entry.path().extension() != ".dg") continue;
      std::error_code ec;  // a name in two folders: the first one's file
      fs::create_symlink(entry.path(), dir / entry.path().filename(), ec);
    }
  }
  makeFixtures(dir.string());
  return (dir / "input.dg").string();
}

}  // namespace llmc::fuzz
