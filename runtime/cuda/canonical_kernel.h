// A kernel source's canonical form: what is left of it once the names the code
// generator numbers or names per kernel are renamed by order of first
// appearance and comments and layout are gone. The launches of a model's
// layers are the same kernels but for such names (`g_qkv_200` in one layer,
// `g_qkv_272` in the next, the function `k3_qkv` against `k15_qkv`), so the
// JIT compiles one source per canonical form (kernel_classes.h) and the
// kernel cache keys its entries on it.
//
// The promise: two sources whose canonical forms are equal are the same
// program up to a bijective renaming of identifiers that the sources declare
// themselves, the entry point (`name`) mapped to the entry point. Where the
// tokenizer cannot keep that promise it gives no canonical form, and the
// source is a class of its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace llmc::cuda {

// `source`'s canonical form, `name` being its __global__ entry point; nothing
// where the source is outside what the tokenizer is sure about: non-ASCII or
// control characters, line splices (backslash-newline), raw string literals,
// an unterminated literal or comment, or the preprocessor's # or ## operators
// (which make text out of names). The form is for comparing and hashing, not
// for compiling.
//
// Renamed, each to a placeholder numbered by first appearance:
//   - `name` itself;
//   - identifiers the source declares (after a type or other name, not a
//     keyword: `float x_1`, `llmc_bf16* __restrict__ g_x_2`, `float* p_3`,
//     `#define N_4`, `struct s_5 {`, `using c_6 =`) that end in
//     `_<digits>` and whose stem has a lower-case letter (`g_qkv_200`,
//     `tm_q_202`; not `M_PI_2` or `NV_PROVIDES_SM_90`, a header's macros);
//   - identifiers the source declares that start with `name` and `_`
//     (`k3_qkv_config` of kernel `k3_qkv`): the placeholder of `name`, then the
//     rest.
// Kept: every other token, string and character literals byte for byte.
// Comments become a space (a block comment across lines a marker that keeps
// its line count); runs of blanks one space, newlines kept, so every token
// stays on its line (__LINE__, assert and -lineinfo see the same lines).
std::optional<std::string> canonicalKernelSource(std::string_view source, std::string_view name);

}  // namespace llmc::cuda
