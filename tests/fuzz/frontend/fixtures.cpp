#include "fixtures.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace llmc::fuzz {

namespace fs = std::filesystem;

namespace {

void writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace

void makeFixtures(const std::string& scratch) {
  const fs::path dir(scratch);
  fs::create_directories(dir);
  std::error_code ec;
  fs::remove(dir / "fifo.dg", ec);
  ::mkfifo((dir / "fifo.dg").c_str(), 0600);
  fs::remove(dir / "zero.dg", ec);
  fs::create_symlink("/dev/zero", dir / "zero.dg", ec);
  writeFile(dir / "big.dg", std::string((17 << 20), '#'));
  // chain0.dg imports chain1.dg ... chain99.dg: deeper than the import limit.
  for (int i = 0; i < 100; ++i)
    writeFile(dir / ("chain" + std::to_string(i) + ".dg"),
              (i + 1 < 100 ? "import \"chain" + std::to_string(i + 1) + ".dg\"\n" : std::string()) + "diagram c" +
                  std::to_string(i) + "(x: f32[a:2]) -> y: f32[a]\n  y = x\nend\n");
}

}  // namespace llmc::fuzz
