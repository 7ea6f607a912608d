/* run_model: runs a module exported by `kiln compile MODEL -o DIR` through Kiln's C API.
 *
 *   run_model DIR [--threads N] [--input IN.raw]... [--output OUT.raw]...
 *
 * Inputs come from raw files (the tensor's bytes, C order, host byte order) in forward-argument
 * order; inputs without a file get a deterministic pattern. Prints every input's and output's
 * name, dtype and shape, then the first values, sum and argmax of each float output; --output
 * writes outputs as raw bytes. Exits with 0, or with the KilnStatus of the failing call.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/c_api.h"

#define MAX_FILES 16

static void print_info(const char* kind, int index, const KilnTensorInfo* info) {
  printf("%s %d: %s %s [", kind, index, info->name, kiln_dtype_name(info->dtype));
  for (int d = 0; d < info->ndim; ++d) printf(d ? ",%lld" : "%lld", (long long)info->shape[d]);
  printf("]\n");
}

/* The pattern `kiln`'s tests use: ((i * 37) % 101 - 50) / 25 for floats, i % 7 for integers. */
static void fill_pattern(const KilnTensorInfo* info, void* data) {
  size_t count = 1;
  for (int d = 0; d < info->ndim; ++d) count *= (size_t)info->shape[d];
  for (size_t i = 0; i < count; ++i) {
    float f = (float)((long long)(i * 37 % 101) - 50) / 25.0f;
    switch (info->dtype) {
      case KILN_FLOAT32: ((float*)data)[i] = f; break;
      case KILN_FLOAT64: ((double*)data)[i] = f; break;
      case KILN_INT64: ((int64_t*)data)[i] = (int64_t)(i % 7); break;
      case KILN_INT32: ((int32_t*)data)[i] = (int32_t)(i % 7); break;
      default: ((uint8_t*)data)[i] = (uint8_t)(i % 2); break;
    }
  }
}

static int read_file(const char* path, void* data, size_t nbytes) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "error: %s: cannot open file\n", path);
    return 0;
  }
  size_t got = fread(data, 1, nbytes, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (got != nbytes || extra) {
    fprintf(stderr, "error: %s: expected exactly %zu bytes\n", path, nbytes);
    return 0;
  }
  return 1;
}

static int write_file(const char* path, const void* data, size_t nbytes) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(data, 1, nbytes, f) != nbytes) {
    fprintf(stderr, "error: %s: cannot write file\n", path);
    if (f) fclose(f);
    return 0;
  }
  return fclose(f) == 0;
}

static void summarize(const KilnTensorInfo* info, const void* data) {
  if (info->dtype != KILN_FLOAT32) return;
  const float* v = (const float*)data;
  size_t count = info->nbytes / sizeof(float);
  double sum = 0;
  size_t best = 0;
  for (size_t i = 0; i < count; ++i) {
    sum += v[i];
    if (v[i] > v[best]) best = i;
  }
  printf("  first:");
  for (size_t i = 0; i < count && i < 8; ++i) printf(" %.6f", v[i]);
  printf("\n  sum: %.6f  argmax: %zu\n", sum, best);
}

static int check(int status) {
  if (status != KILN_OK) fprintf(stderr, "error: %s\n", kiln_last_error());
  return status;
}

int main(int argc, char** argv) {
  const char* dir = NULL;
  const char* inputs[MAX_FILES];
  const char* outputs[MAX_FILES];
  int num_in_files = 0, num_out_files = 0, threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--input") == 0 && i + 1 < argc && num_in_files < MAX_FILES) {
      inputs[num_in_files++] = argv[++i];
    } else if (strcmp(argv[i], "--output") == 0 && i + 1 < argc && num_out_files < MAX_FILES) {
      outputs[num_out_files++] = argv[++i];
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!dir && argv[i][0] != '-') {
      dir = argv[i];
    } else {
      dir = NULL;
      break;
    }
  }
  if (!dir) {
    fprintf(stderr, "usage: %s DIR [--threads N] [--input IN.raw]... [--output OUT.raw]...\n", argv[0]);
    return KILN_ERROR_USAGE;
  }

  char err[1024];
  KilnModule* module = NULL;
  int status = kiln_module_load(dir, &module, err, sizeof err);
  if (status != KILN_OK) {
    fprintf(stderr, "error: %s\n", err);
    return status;
  }
  status = check(kiln_set_num_threads(threads));
  int32_t num_inputs = 0, num_outputs = 0;
  if (!status) status = check(kiln_module_num_inputs(module, &num_inputs));
  if (!status) status = check(kiln_module_num_outputs(module, &num_outputs));
  if (!status && num_in_files > num_inputs) {
    fprintf(stderr, "error: the module takes %d input(s), got %d --input file(s)\n", num_inputs, num_in_files);
    status = KILN_ERROR_USAGE;
  }

  for (int32_t i = 0; i < num_inputs && !status; ++i) {
    KilnTensorInfo info;
    if ((status = check(kiln_module_input_info(module, i, &info)))) break;
    print_info("input", i, &info);
    void* data = malloc(info.nbytes ? info.nbytes : 1);
    if (i < num_in_files) {
      if (!read_file(inputs[i], data, info.nbytes)) status = KILN_ERROR_IO;
    } else {
      fill_pattern(&info, data);
    }
    if (!status) status = check(kiln_module_set_input(module, i, data, info.nbytes));
    free(data);
  }
  if (!status) status = check(kiln_module_run(module));

  for (int32_t i = 0; i < num_outputs && !status; ++i) {
    KilnTensorInfo info;
    if ((status = check(kiln_module_output_info(module, i, &info)))) break;
    print_info("output", i, &info);
    void* data = malloc(info.nbytes ? info.nbytes : 1);
    status = check(kiln_module_get_output(module, i, data, info.nbytes));
    if (!status) summarize(&info, data);
    if (!status && i < num_out_files && !write_file(outputs[i], data, info.nbytes)) status = KILN_ERROR_IO;
    free(data);
  }
  kiln_module_free(module);
  return status;
}
