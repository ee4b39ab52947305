// .npy files (runtime/npy_file.h) and a graph's inputs made from them or at
// random (runtime/graph_inputs.h): the files are written byte by byte here as
// numpy.save writes them.
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "graph_inputs.h"
#include "npy_file.h"

using namespace llmc;

namespace {

// A .npy file of `descr` and `shapeText` ("(2, 3)") holding `data`'s bytes,
// format `major`.0; its path, removed with the object.
struct NpyFile {
  std::string path;
  NpyFile(const std::string& name, const std::string& descr, const std::string& shapeText, const std::string& data,
          int major = 1) {
    path = (std::filesystem::temp_directory_path() / ("llmc_npy_test_" + std::to_string(getpid()) + "_" + name)).string();
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shapeText + ", }";
    const size_t prefix = major == 1 ? 10 : 12;
    header += std::string((64 - (prefix + header.size() + 1) % 64) % 64, ' ') + "\n";
    std::string bytes = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
    for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::ofstream(path, std::ios::binary) << bytes << header << data;
  }
  ~NpyFile() { std::filesystem::remove(path); }
};

template <typename T>
std::string bytesOf(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string messageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("npy: float32, float64, int32 and int64 arrays are read in C order", "[npy]") {
  const NpyFile f32("f32.npy", "<f4", "(2, 3)", bytesOf(std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
  const NpyArray a = readNpy(f32.path);
  CHECK(a.dtype == "float32");
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(a.shapeText() == "(2, 3)");
  CHECK(a.values == std::vector<double>{1, 2, 3, 4, 5, 6.5});

  const NpyFile f64("f64.npy", "<f8", "(3,)", bytesOf(std::vector<double>{0.1, -2, 1e300}), 2);
  const NpyArray b = readNpy(f64.path);
  CHECK(b.dtype == "float64");
  CHECK(b.shapeText() == "(3,)");
  CHECK(b.values == std::vector<double>{0.1, -2, 1e300});

  const NpyFile i32("i32.npy", "<i4", "(2,)", bytesOf(std::vector<int32_t>{-7, 2147483647}));
  CHECK(readNpy(i32.path).values == std::vector<double>{-7, 2147483647});
  const NpyFile i64("i64.npy", "<i8", "()", bytesOf(std::vector<int64_t>{-5}));
  const NpyArray d = readNpy(i64.path);
  CHECK(d.isInteger());
  CHECK(d.shape.empty());
  CHECK(d.shapeText() == "()");
  CHECK(d.values == std::vector<double>{-5});
}

TEST_CASE("npy: files llmc does not take are refused naming the file", "[npy]") {
  const NpyFile half("half.npy", "<f2", "(2,)", std::string(4, '\0'));
  CHECK(messageOf([&] { readNpy(half.path); }).find(half.path + ": element type '<f2' is not taken") == 0);
  const NpyFile cut("cut.npy", "<f4", "(2, 3)", std::string(23, '\0'));
  CHECK(messageOf([&] { readNpy(cut.path); }) ==
        cut.path + ": shape (2, 3) of float32 needs 24 bytes of data, the file has 23 after its header (cut short)");
  const NpyFile huge("huge.npy", "<f4", "(4611686018427387904, 4)", "");
  CHECK(messageOf([&] { readNpy(huge.path); }) == huge.path + ": shape (4611686018427387904, 4) holds too many elements");
  const NpyFile noShape("noshape.npy", "<f4", "'x'", "");
  CHECK(messageOf([&] { readNpy(noShape.path); }).find("'shape' is not a tuple") != std::string::npos);
  CHECK(messageOf([] { readNpy("/nonexistent/a.npy"); }) == "/nonexistent/a.npy: cannot open the file: No such file or directory");
}

TEST_CASE("graph inputs: from .npy by declared axis order, index bounds, random and rounded", "[npy]") {
  const std::string dg = (std::filesystem::temp_directory_path() / ("llmc_npy_test_" + std::to_string(getpid()) + ".dg")).string();
  std::ofstream(dg) << "diagram looked_up(x: f32[n:N c:C], ids: i32[n], table: f32[v:V c]) -> y: f32[n c]\n"
                       "  y = x + gather(table, ids, v)\nend\n";
  PipelineOptions options;
  options.path = dg;
  options.sizes = {{"N", 2}, {"C", 3}, {"V", 4}};
  const Graph g = compileToIR(options);
  std::filesystem::remove(dg);
  const NodeId x = g.findInput("x")->id, ids = g.findInput("ids")->id;
  NpyArray array{"float64", {2, 3}, {1, 2, 3, 4, 5, 6}};
  const HostTensor t = inputFromNpy(g, x, array, "x.npy");
  CHECK(t.at({{"n", 1}, {"c", 0}}) == 4);
  array.shape = {3, 2};
  CHECK(messageOf([&] { inputFromNpy(g, x, array, "x.npy"); }).find("x.npy: shape (3, 2) does not fit input x") == 0);

  CHECK(indexBound(g, ids) == 4);
  const NpyArray index{"int32", {2}, {3, 4}};
  CHECK(messageOf([&] { inputFromNpy(g, ids, index, "ids.npy"); }) .find("element [1] is 4, out of range") !=
        std::string::npos);

  const HostTensor r = randomInput(g, ids, 9);
  CHECK(r.data == randomInput(g, ids, 9).data);
  for (double v : r.data) CHECK((v >= 0 && v < 4 && v == static_cast<int64_t>(v)));

  HostTensor f = randomInput(g, x, 3);
  roundAsStored(f, true);
  for (double v : f.data) CHECK(static_cast<double>(static_cast<float>(v)) == v);
  for (double v : f.data) CHECK((std::bit_cast<uint64_t>(v) & ((uint64_t{1} << 45) - 1)) == 0);  // 8 significant bits
}
