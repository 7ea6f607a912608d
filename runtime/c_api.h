/* Kiln's C API: load a module exported by `kiln compile MODEL -o DIR` and run it, with the
 * runtime library alone (libkiln_runtime_shared.so; no compiler, LLVM or libtorch).
 *
 *   KilnModule* m = NULL;
 *   char err[512];
 *   if (kiln_module_load("resnet18_kiln", &m, err, sizeof err) != KILN_OK) { puts(err); return 1; }
 *   kiln_module_set_input(m, 0, pixels, nbytes);
 *   kiln_module_run(m);
 *   kiln_module_get_output(m, 0, logits, sizeof logits);
 *   kiln_module_free(m);
 *
 * Every function returns a KilnStatus (KILN_OK = 0) and never lets a C++ exception escape. The
 * message of the last failure on the calling thread is kiln_last_error(). A module may be used by
 * one thread at a time; separate modules are independent (the thread pool is shared). Tensors are
 * dense, row-major (C order), in the host's byte order.
 */
#ifndef KILN_RUNTIME_C_API_H
#define KILN_RUNTIME_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes; the non-zero ones equal the `kiln` command line's exit codes. */
typedef enum KilnStatus {
  KILN_OK = 0,
  KILN_ERROR_USAGE = 2,         /* bad arguments: null pointers, an index out of range */
  KILN_ERROR_INVALID_MODEL = 3, /* not a module directory, missing or corrupted files */
  KILN_ERROR_UNSUPPORTED = 4,   /* a construct the runtime cannot run */
  KILN_ERROR_INVALID_INPUT = 5, /* wrong byte count, an input not set */
  KILN_ERROR_IO = 6,            /* a file cannot be read */
  KILN_ERROR_KERNEL_FAULT = 7,  /* (the compiler's isolated measurements only) */
  KILN_ERROR_UNKNOWN_TARGET = 8, /* (the compiler only) */
  KILN_ERROR_INCOMPATIBLE_MODULE = 9, /* another format version (recompile it), architecture or CPU */
  KILN_ERROR_STORE = 10,        /* (the compiler's session store only) */
  KILN_ERROR_INTERNAL = 70
} KilnStatus;

/* Element types, as in runtime/tensor.h. */
typedef enum KilnDType {
  KILN_FLOAT32 = 0,
  KILN_FLOAT64 = 1,
  KILN_INT64 = 2,
  KILN_INT32 = 3,
  KILN_BOOL = 4,
  KILN_INT8 = 5,
  KILN_UINT8 = 6
} KilnDType;

typedef struct KilnModule KilnModule;

/* An input or output; the pointers stay valid until kiln_module_free. */
typedef struct KilnTensorInfo {
  const char* name;
  KilnDType dtype;
  int32_t ndim;
  const int64_t* shape; /* ndim entries */
  size_t nbytes;        /* elements × element size */
} KilnTensorInfo;

/* Loads the module directory at `path`. On failure *module is NULL and, when errbuf is not
 * NULL, the message is copied into it (truncated to errlen - 1 bytes, always terminated). */
int kiln_module_load(const char* path, KilnModule** module, char* errbuf, size_t errlen);
/* Frees the module and unloads its kernels; NULL is accepted. */
int kiln_module_free(KilnModule* module);

int kiln_module_num_inputs(const KilnModule* module, int32_t* count);
int kiln_module_num_outputs(const KilnModule* module, int32_t* count);
int kiln_module_input_info(const KilnModule* module, int32_t index, KilnTensorInfo* info);
int kiln_module_output_info(const KilnModule* module, int32_t index, KilnTensorInfo* info);

/* Copies `nbytes` (which must equal the input's nbytes) into input `index`. */
int kiln_module_set_input(KilnModule* module, int32_t index, const void* data, size_t nbytes);
/* Runs one inference; every input must have been set (values persist across runs). */
int kiln_module_run(KilnModule* module);
/* Copies output `index` of the last run into `data`; `nbytes` must equal the output's nbytes. */
int kiln_module_get_output(const KilnModule* module, int32_t index, void* data, size_t nbytes);

/* Worker threads for every module's parallel loops (0: KILN_NUM_THREADS or all cores). */
int kiln_set_num_threads(int32_t threads);

/* The message of the calling thread's last failed call ("" when none). */
const char* kiln_last_error(void);
/* "f32", "i64", ...; "?" for an unknown value. */
const char* kiln_dtype_name(KilnDType dtype);
/* The newest module format version this runtime reads (it reads versions 1 to this one). */
int32_t kiln_module_format_version(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_C_API_H */
