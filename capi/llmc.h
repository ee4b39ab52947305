/* libllmc: llmc's compiler and GPU runtime behind a small C API.
 *
 * A diagram's entry is compiled into a module (front end, back end, NVRTC:
 * no GPU needed; kernels come from and go to the disk cache the llmc tools
 * share, $LLMC_CACHE_DIR or ~/.cache/llmc/kernels). A module lists its inputs
 * and outputs (names, dtypes, shapes) and runs on the caller's device arrays
 * on the caller's CUDA stream, without synchronising the host. With grad, it
 * carries a backward module: the vector-Jacobian product of the forward.
 *
 * Every function returns an llmc_status; where it is not LLMC_OK,
 * llmc_last_error() holds the message (for diagram errors FILE:LINE:COL,
 * the line and a caret). Nothing aborts, throws across this boundary or
 * exits. docs/python.md describes the API and the Python package over it.
 */
#ifndef LLMC_H
#define LLMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLMC_API_VERSION 1

typedef enum llmc_status {
  LLMC_OK = 0,
  LLMC_ERROR_USAGE = 1,        /* a bad argument: an unknown arch, a size no diagram reads, a null pointer */
  LLMC_ERROR_COMPILE = 2,      /* an error in the diagrams: FILE:LINE:COL: error: ... */
  LLMC_ERROR_SHAPE = 3,        /* shapes that do not fit the entry */
  LLMC_ERROR_NEEDS_SHAPES = 4, /* the entry has `..` in an input: give the inputs' shapes */
  LLMC_ERROR_NO_GPU = 5,       /* no CUDA driver or no such GPU (running needs one; compiling does not) */
  LLMC_ERROR_CUDA = 6,         /* a CUDA driver call failed */
  LLMC_ERROR_INTERNAL = 7      /* a bug in llmc (NVRTC refused a kernel llmc emitted, ...) */
} llmc_status;

typedef struct llmc_module llmc_module;

/* One input's shape, for entries whose inputs take their axes from the
 * caller's arrays (`..`) or whose sizes come from them. The dimensions a
 * `..` stands for are named batch0, batch1, ... from the left. */
typedef struct llmc_shape {
  const char* input;
  int rank;
  const int64_t* dims;
} llmc_shape;

typedef struct llmc_compile_options {
  const char* path;    /* the .dg file */
  const char* entry;   /* the diagram; NULL or "": the last one in the file */
  const char* sizes;   /* "B=4,T=64" (as llmc-compile --set); NULL or "": none */
  int grad;            /* nonzero: also compile the backward module */
  const char* storage; /* "bf16" (NULL) or "f32": how float arrays are stored */
  const char* arch;    /* "auto" (NULL), "sm_90a" or "sm_80"; auto without a GPU plans for sm_90a */
  int num_shapes;      /* 0: the entry's own types (its inputs may not have `..`) */
  const llmc_shape* shapes;
} llmc_compile_options;

/* An input or output: contiguous, row-major. dtype is one of f32, bf16, f64,
 * i32, u16, bool (one byte). The pointers live as long as the module. */
typedef struct llmc_value {
  const char* name;
  const char* dtype;
  int rank;
  const int64_t* shape;
  const char* const* axes; /* the axes' names */
  int64_t bytes;
} llmc_value;

/* The message of the last failed call on this thread ("" if none). Valid
 * until the next call of libllmc on the thread. */
const char* llmc_last_error(void);
int llmc_api_version(void);

llmc_status llmc_compile(const llmc_compile_options* options, llmc_module** module);

/* The entry's name and its inputs' names as declared, before anything is
 * compiled ("causal_attention:q,k,v"): to match a caller's arrays to the
 * inputs of an entry whose shapes come from them. Valid until the next call
 * of libllmc on this thread. */
llmc_status llmc_entry_inputs(const char* path, const char* entry, const char** names);
void llmc_module_free(llmc_module* module); /* frees its backward module too */

/* The backward module (owned by `module`), or NULL without grad. Its inputs
 * are the forward's, then one seed per floating-point output of the forward
 * (the gradient flowing into that output, named llmc_seed_OUTPUT, of its
 * shape); its outputs are grad_INPUT for every floating-point input. It
 * computes again from the inputs what it needs of the forward. */
llmc_module* llmc_module_backward(const llmc_module* module);

const char* llmc_module_entry(const llmc_module* module);
const char* llmc_module_arch(const llmc_module* module); /* what it was planned and compiled for */
int llmc_module_num_inputs(const llmc_module* module);
int llmc_module_num_outputs(const llmc_module* module);
llmc_status llmc_module_input(const llmc_module* module, int i, llmc_value* value);
llmc_status llmc_module_output(const llmc_module* module, int i, llmc_value* value);
/* Device memory a run needs besides its inputs and outputs (0: none). */
int64_t llmc_module_workspace_bytes(const llmc_module* module);
int llmc_module_num_launches(const llmc_module* module);
/* The PTX NVRTC made for every launch, as one text. */
llmc_status llmc_module_ptx(const llmc_module* module, const char** ptx);

/* Enqueues the module on `stream` (a CUstream / cudaStream_t; NULL: the
 * legacy default stream) of GPU `device` and returns without waiting.
 * inputs[i] and outputs[i]: device addresses of contiguous arrays, 16-byte
 * aligned, in the order of llmc_module_input/output; outputs must not
 * overlap inputs. workspace: at least llmc_module_workspace_bytes bytes,
 * 256-byte aligned, used only until the run's work on `stream` is done.
 * The kernels are loaded on the GPU at its first run there. The GPU's
 * primary context (the CUDA runtime's) is used; the caller's current
 * context is restored. */
llmc_status llmc_module_run(llmc_module* module, int device, const void* const* inputs, void* const* outputs,
                            void* workspace, size_t workspace_bytes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* LLMC_H */
