// The C API over runtime::Module (runtime/c_api.h). Every entry point catches everything: no
// exception crosses the C boundary.
#include "runtime/c_api.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/module.h"
#include "runtime/thread_pool.h"

struct KilnModule {
  std::unique_ptr<kiln::runtime::Module> module;
  // Per input/output: what KilnTensorInfo points into.
  struct Info {
    std::string name;
    kiln::runtime::DType dtype;
    std::vector<int64_t> shape;
    size_t nbytes;
  };
  std::vector<Info> inputs, outputs;
  bool ran = false;
};

namespace {

using kiln::Error;
using kiln::ErrorKind;

// The calling thread's last message; a plain buffer, so no thread-exit destructor runs.
thread_local char t_lastError[1024];

int fail(int status, const std::string& message) {
  std::snprintf(t_lastError, sizeof t_lastError, "%s", message.c_str());
  return status;
}

/// Runs fn, mapping exceptions to status codes and recording the message.
template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return KILN_OK;
  } catch (const Error& e) {
    return fail(static_cast<int>(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(KILN_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

void require(bool cond, const char* what) {
  if (!cond) throw Error(what, ErrorKind::Usage);
}

const KilnModule::Info& infoAt(const std::vector<KilnModule::Info>& list, int32_t index, const char* kind) {
  if (index < 0 || index >= static_cast<int32_t>(list.size()))
    throw Error(std::string(kind) + " index " + std::to_string(index) + " out of range: the module has " +
                    std::to_string(list.size()) + " " + kind + "(s)",
                ErrorKind::Usage);
  return list[index];
}

void fillInfo(const KilnModule::Info& from, KilnTensorInfo* info) {
  info->name = from.name.c_str();
  info->dtype = static_cast<KilnDType>(from.dtype);
  info->ndim = static_cast<int32_t>(from.shape.size());
  info->shape = from.shape.data();
  info->nbytes = from.nbytes;
}

KilnModule::Info describe(const kiln::runtime::TensorSlot& slot) {
  return {slot.name, slot.dtype, slot.shape,
          static_cast<size_t>(kiln::runtime::numElements(slot.shape)) * kiln::runtime::dtypeSize(slot.dtype)};
}

}  // namespace

extern "C" {

int kiln_module_load(const char* path, KilnModule** module, char* errbuf, size_t errlen) {
  if (module) *module = nullptr;
  if (errbuf && errlen) errbuf[0] = '\0';
  int status = guarded([&] {
    require(path != nullptr && module != nullptr, "kiln_module_load: path and module must not be NULL");
    auto handle = std::make_unique<KilnModule>();
    handle->module = kiln::runtime::Module::load(path);
    const auto& ex = handle->module->executor();
    for (int i = 0; i < ex.numInputs(); ++i) handle->inputs.push_back(describe(ex.inputSlot(i)));
    for (int i = 0; i < ex.numOutputs(); ++i) handle->outputs.push_back(describe(ex.outputSlot(i)));
    *module = handle.release();
  });
  if (status != KILN_OK && errbuf && errlen) {
    std::strncpy(errbuf, t_lastError, errlen - 1);
    errbuf[errlen - 1] = '\0';
  }
  return status;
}

int kiln_module_free(KilnModule* module) {
  return guarded([&] { delete module; });
}

int kiln_module_num_inputs(const KilnModule* module, int32_t* count) {
  return guarded([&] {
    require(module && count, "kiln_module_num_inputs: module and count must not be NULL");
    *count = static_cast<int32_t>(module->inputs.size());
  });
}

int kiln_module_num_outputs(const KilnModule* module, int32_t* count) {
  return guarded([&] {
    require(module && count, "kiln_module_num_outputs: module and count must not be NULL");
    *count = static_cast<int32_t>(module->outputs.size());
  });
}

int kiln_module_input_info(const KilnModule* module, int32_t index, KilnTensorInfo* info) {
  return guarded([&] {
    require(module && info, "kiln_module_input_info: module and info must not be NULL");
    fillInfo(infoAt(module->inputs, index, "input"), info);
  });
}

int kiln_module_output_info(const KilnModule* module, int32_t index, KilnTensorInfo* info) {
  return guarded([&] {
    require(module && info, "kiln_module_output_info: module and info must not be NULL");
    fillInfo(infoAt(module->outputs, index, "output"), info);
  });
}

int kiln_module_set_input(KilnModule* module, int32_t index, const void* data, size_t nbytes) {
  return guarded([&] {
    require(module && (data || nbytes == 0), "kiln_module_set_input: module and data must not be NULL");
    const KilnModule::Info& in = infoAt(module->inputs, index, "input");
    if (nbytes != in.nbytes)
      throw Error("input " + std::to_string(index) + " ('" + in.name + "') takes " + std::to_string(in.nbytes) +
                      " bytes, got " + std::to_string(nbytes),
                  ErrorKind::InvalidInput);
    kiln::runtime::Tensor t = kiln::runtime::Tensor::zeros(in.dtype, in.shape);
    if (nbytes) std::memcpy(t.raw(), data, nbytes);
    module->module->executor().setInput(index, t);
  });
}

int kiln_module_run(KilnModule* module) {
  return guarded([&] {
    require(module != nullptr, "kiln_module_run: module must not be NULL");
    module->module->executor().run();
    module->ran = true;
  });
}

int kiln_module_get_output(const KilnModule* module, int32_t index, void* data, size_t nbytes) {
  return guarded([&] {
    require(module && (data || nbytes == 0), "kiln_module_get_output: module and data must not be NULL");
    const KilnModule::Info& out = infoAt(module->outputs, index, "output");
    if (nbytes != out.nbytes)
      throw Error("output " + std::to_string(index) + " ('" + out.name + "') has " + std::to_string(out.nbytes) +
                      " bytes, got a buffer of " + std::to_string(nbytes),
                  ErrorKind::InvalidInput);
    if (!module->ran) throw Error("kiln_module_get_output: the module has not run yet", ErrorKind::Usage);
    kiln::runtime::Tensor t = module->module->executor().output(index);
    if (nbytes) std::memcpy(data, t.raw(), nbytes);
  });
}

int kiln_set_num_threads(int32_t threads) {
  return guarded([&] {
    require(threads >= 0, "kiln_set_num_threads: threads must be >= 0");
    kiln::runtime::setNumThreads(threads);
  });
}

const char* kiln_last_error(void) { return t_lastError; }

const char* kiln_dtype_name(KilnDType dtype) {
  if (dtype < KILN_FLOAT32 || dtype > KILN_UINT8) return "?";
  return kiln::runtime::dtypeName(static_cast<kiln::runtime::DType>(dtype)).data();
}

int32_t kiln_module_format_version(void) { return kiln::runtime::kModuleFormatVersion; }

}  // extern "C"
