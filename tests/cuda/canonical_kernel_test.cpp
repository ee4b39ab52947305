// A kernel source's canonical form (canonical_kernel.h) and the classes the JIT
// compiles once (kernel_classes.h): sources that differ only in numbered
// names, the entry point's name, comments and blanks meet; any other
// difference keeps them apart. No NVRTC, no GPU.
#include "canonical_kernel.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kernel_classes.h"

using llmc::cuda::canonicalKernelSource;
using llmc::cuda::classifyKernels;
using llmc::cuda::KernelSource;

namespace {

// One layer's copy of a kernel as the emitter writes it: the node ids in the
// names and comments, the kernel's name in a config type, `scale` the constant.
std::string layerKernel(const std::string& name, int node, const std::string& scale = "0.5f",
                        const std::string& op = "*") {
  return fmt::format(
      "#include <llmc/gemm_sm90.cuh>\n"
      "// node {1}: y = x {3} {2}\n"
      "struct {0}_config {{ static constexpr int kThreads = 256; }};\n"
      "extern \"C\" __global__ void __launch_bounds__({0}_config::kThreads) {0}(float* __restrict__ g_y_{1},\n"
      "    const float* __restrict__ g_x_{4}, int n) {{\n"
      "  /* the x of node {4} */ const int i_{1} = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  _Pragma(\"unroll 4\")\n"
      "  for (int k = 0; k < 1; ++k) if (i_{1} < n) g_y_{1}[i_{1}] = g_x_{4}[i_{1}] {3} {2};\n"
      "}}\n",
      name, node, scale, op, node + 2);
}

std::string canonical(const std::string& source, const std::string& name) {
  const auto form = canonicalKernelSource(source, name);
  REQUIRE(form);
  return *form;
}

}  // namespace

TEST_CASE("copies of a kernel that differ in numbered names and comments have one canonical form", "[canonical]") {
  CHECK(canonical(layerKernel("k3_y", 200), "k3_y") == canonical(layerKernel("k15_y", 272), "k15_y"));
  // Blanks within a line and the text of comments do not count; lines do.
  const std::string source = layerKernel("k3_y", 200);
  std::string spaced = source;
  spaced.replace(spaced.find("int n)"), 6, "int    n )");
  CHECK(canonical(spaced, "k3_y") != canonical(source, "k3_y"));  // "n )" has a blank "n)" has not
  std::string respaced = source;
  respaced.replace(respaced.find("int n"), 5, "int \t n");
  CHECK(canonical(respaced, "k3_y") == canonical(source, "k3_y"));
  CHECK(canonical(source + "\n", "k3_y") != canonical(source, "k3_y"));
}

TEST_CASE("a different constant, operator or unnumbered name is a different form", "[canonical]") {
  const std::string base = canonical(layerKernel("k3_y", 200), "k3_y");
  CHECK(canonical(layerKernel("k15_y", 272, "0.25f"), "k15_y") != base);
  CHECK(canonical(layerKernel("k15_y", 272, "0.5f", "+"), "k15_y") != base);
  std::string otherName = layerKernel("k3_y", 200);
  otherName.replace(otherName.find("int n)"), 6, "int m)");
  CHECK(canonical(otherName, "k3_y") != base);
  // The names are renamed consistently: swapping which is which is a different program.
  const std::string a = "__global__ void f(float* a_1, float* b_2) { a_1[0] = b_2[0]; }";
  const std::string b = "__global__ void f(float* a_1, float* b_2) { b_2[0] = a_1[0]; }";
  CHECK(canonical(a, "f") != canonical(b, "f"));
  CHECK(canonical(a, "f") == canonical("__global__ void f(float* x_7, float* y_9) { x_7[0] = y_9[0]; }", "f"));
}

TEST_CASE("string literals and names the source does not declare are kept as they are", "[canonical]") {
  // _Pragma's text, an asm string, a header's function and macro.
  const std::string a = "__global__ void f(float* p_1) { _Pragma(\"unroll 4\") p_1[0] = cp_async_16(M_PI_2); }";
  const std::string b = "__global__ void f(float* p_1) { _Pragma(\"unroll 8\") p_1[0] = cp_async_16(M_PI_2); }";
  CHECK(canonical(a, "f") != canonical(b, "f"));
  CHECK(canonical(a, "f").find("\"unroll 4\"") != std::string::npos);
  CHECK(canonical(a, "f").find("cp_async_16") != std::string::npos);
  const std::string c = "__global__ void f(float* p_1) { _Pragma(\"unroll 4\") p_1[0] = cp_async_8(M_PI_2); }";
  CHECK(canonical(a, "f") != canonical(c, "f"));
  // "// not a comment" inside a string stays; a comment inside it is no comment.
  const std::string s1 = "__device__ const char* t_1 = \"x // y\";";
  const std::string s2 = "__device__ const char* t_1 = \"x // z\";";
  CHECK(canonical(s1, "f") != canonical(s2, "f"));
  // A member reached with . keeps its name everywhere, declared or not.
  const std::string m1 = "struct P { float x_1; float y_2; }; __device__ float f(P p) { return p.x_1; }";
  const std::string m2 = "struct P { float y_2; float x_1; }; __device__ float f(P p) { return p.x_1; }";
  CHECK(canonical(m1, "f") != canonical(m2, "f"));
}

TEST_CASE("what the tokenizer is unsure about has no canonical form", "[canonical]") {
  CHECK_FALSE(canonicalKernelSource("#define S(x) #x\n", "f"));                 // stringizing
  CHECK_FALSE(canonicalKernelSource("#define C(a, b) a##b\n", "f"));            // pasting
  CHECK_FALSE(canonicalKernelSource("int a_1; // a splice \\\nint b_2;", "f"));  // a comment's splice
  CHECK_FALSE(canonicalKernelSource("const char* r_1 = R\"(x)\";", "f"));       // a raw string
  CHECK_FALSE(canonicalKernelSource("const char* s_1 = \"open;\n", "f"));       // unterminated
  CHECK_FALSE(canonicalKernelSource("int a_1; /* open", "f"));
  CHECK_FALSE(canonicalKernelSource("int a$1;", "f"));
  CHECK_FALSE(canonicalKernelSource("int caf\xc3\xa9_1;", "f"));
  CHECK(canonicalKernelSource("#include <llmc/gemm_sm90.cuh>\n#pragma unroll\n", "f"));
}

TEST_CASE("kernels of one class: the same form, arch, options and launch signature", "[canonical]") {
  auto kernel = [](const std::string& name, int node) {
    return KernelSource{.name = name, .source = layerKernel(name, node), .arch = "sm_90a", .launchSignature = "float w; float r;"};
  };
  std::vector<KernelSource> kernels = {kernel("k3_y", 200), kernel("k15_y", 272), kernel("k27_y", 344),
                                       kernel("k39_y", 416), kernel("k51_y", 488), kernel("k63_y", 560)};
  kernels[2].arch = "sm_80";
  kernels[3].options = {"-lineinfo"};
  kernels[4].launchSignature = "float w; float w;";
  kernels[5].source = layerKernel("k63_y", 560, "2.0f");
  const auto classes = classifyKernels(kernels);
  CHECK(classes.count == 5);
  CHECK(classes.representative == std::vector<size_t>{0, 0, 2, 3, 4, 5});
  // Without a canonical form a source is its own class, by its text.
  kernels = {{.name = "a", .source = "#define S(x) #x\n"}, {.name = "b", .source = "#define S(x) #x\n"}};
  CHECK(classifyKernels(kernels).count == 2);
}
