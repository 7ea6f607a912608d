// kiln._runtime: the Python extension of the `kiln` package. It binds runtime/ alone (exported
// modules: graph.txt, params.bin, kernels.so), so it loads into a process that already holds any
// torch: no libtorch, LLVM or compiler is linked. The package (python/kiln/) compiles a model with
// the `kiln` command in a subprocess and runs the exported module through this.
//
// Data passes through the buffer protocol, not numpy's C API (whose ABI differs between numpy
// releases): an input is any C-contiguous buffer of the input's format and shape (a numpy array,
// a torch tensor's .numpy()); it is copied into a staging runtime tensor, which the executor's
// setInput copies into its planned slot. An output is a `Buffer` owning the runtime tensor the
// executor returned; numpy.asarray(buffer) views it without a copy.
//
// kiln::Error becomes kiln.errors.KilnError(message, kind, code) (kinds and codes of
// runtime/error.h). Runs release the GIL; one process-wide lock serializes runs and thread-count
// changes, as the runtime's thread pool is shared by every module.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/module.h"
#include "runtime/tensor.h"
#include "runtime/thread_pool.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using runtime::DType;
using runtime::Tensor;

/// Runs and thread-count changes of every module in this process.
std::mutex& runtimeLock() {
  static std::mutex lock;
  return lock;
}

/// The buffer-protocol format of a dtype (struct module codes, native byte order).
const char* bufferFormat(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "f";
    case DType::Float64: return "d";
    case DType::Int64: return "q";
    case DType::Int32: return "i";
    case DType::Bool: return "?";
    case DType::Int8: return "b";
    case DType::UInt8: return "B";
  }
  return "?";
}

/// The dtype a buffer's format and item size denote, or nothing ("l" is int64 on LP64 Linux,
/// which numpy reports for int64 arrays).
std::optional<DType> dtypeOfBuffer(std::string format, py::ssize_t itemsize) {
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) format.erase(0, 1);
  if (format.size() != 1) return std::nullopt;
  switch (format[0]) {
    case 'f': return itemsize == 4 ? std::optional(DType::Float32) : std::nullopt;
    case 'd': return itemsize == 8 ? std::optional(DType::Float64) : std::nullopt;
    case 'q':
    case 'l': return itemsize == 8 ? std::optional(DType::Int64) : std::nullopt;
    case 'i': return itemsize == 4 ? std::optional(DType::Int32) : std::nullopt;
    case '?': return itemsize == 1 ? std::optional(DType::Bool) : std::nullopt;
    case 'b': return itemsize == 1 ? std::optional(DType::Int8) : std::nullopt;
    case 'B': return itemsize == 1 ? std::optional(DType::UInt8) : std::nullopt;
    default: return std::nullopt;
  }
}

bool isCContiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expected) return false;
    expected *= info.shape[d];
  }
  return true;
}

/// A tensor the runtime returned, exposed through the buffer protocol (numpy.asarray views it).
class Buffer {
 public:
  explicit Buffer(Tensor tensor) : m_tensor(std::move(tensor)) {}
  const Tensor& tensor() const { return m_tensor; }

  py::buffer_info info() const {
    const size_t item = runtime::dtypeSize(m_tensor.dtype());
    std::vector<py::ssize_t> shape(m_tensor.shape().begin(), m_tensor.shape().end());
    std::vector<py::ssize_t> strides(shape.size());
    py::ssize_t stride = static_cast<py::ssize_t>(item);
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= shape[d];
    }
    return py::buffer_info(m_tensor.raw(), static_cast<py::ssize_t>(item), bufferFormat(m_tensor.dtype()),
                           static_cast<py::ssize_t>(shape.size()), shape, strides);
  }

 private:
  Tensor m_tensor;
};

py::dict describeSlot(const runtime::TensorSlot& slot) {
  py::dict d;
  d["name"] = slot.name;
  d["dtype"] = std::string(runtime::dtypeName(slot.dtype));
  d["shape"] = py::tuple(py::cast(slot.shape));
  return d;
}

/// An exported module loaded for running.
class Module {
 public:
  explicit Module(const std::string& dir) : m_module(runtime::Module::load(dir)) {
    const runtime::GraphExecutor& ex = m_module->executor();
    for (int i = 0; i < ex.numInputs(); ++i)
      m_staging.push_back(Tensor::zeros(ex.inputSlot(i).dtype, ex.inputSlot(i).shape));
  }

  std::string path() const { return m_module->path(); }
  std::string target() const { return m_module->info().target; }

  py::list inputs() const {
    py::list out;
    for (int i = 0; i < m_module->executor().numInputs(); ++i) out.append(describeSlot(m_module->executor().inputSlot(i)));
    return out;
  }

  py::list outputs() const {
    py::list out;
    for (int i = 0; i < m_module->executor().numOutputs(); ++i)
      out.append(describeSlot(m_module->executor().outputSlot(i)));
    return out;
  }

  /// One inference on buffers in forward-argument order; returns one Buffer per output.
  std::vector<Buffer> run(const py::sequence& args, int threads) {
    runtime::GraphExecutor& ex = m_module->executor();
    if (static_cast<int>(args.size()) != ex.numInputs())
      throw Error("the module takes " + std::to_string(ex.numInputs()) + " input(s), got " +
                      std::to_string(args.size()),
                  ErrorKind::InvalidInput);
    // Requested (and checked) with the GIL held; released after the run, with the GIL again.
    std::vector<py::buffer_info> views;
    for (int i = 0; i < ex.numInputs(); ++i) views.push_back(checkedInput(args[i], i));

    std::vector<Tensor> results;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> guard(runtimeLock());
      if (threads > 0 && threads != runtime::numThreads()) runtime::setNumThreads(threads);
      for (int i = 0; i < ex.numInputs(); ++i) {
        // setInput copies from a runtime::Tensor (which owns its storage) into the planned slot;
        // the staging tensor is that one copy's source, reused across calls.
        Tensor& staged = m_staging[i];
        if (staged.nbytes()) std::memcpy(staged.raw(), views[i].ptr, staged.nbytes());
        ex.setInput(i, staged);
      }
      ex.run();
      for (int i = 0; i < ex.numOutputs(); ++i) results.push_back(ex.output(i));
    }
    std::vector<Buffer> outputs;
    for (Tensor& t : results) outputs.emplace_back(std::move(t));
    return outputs;
  }

 private:
  std::unique_ptr<runtime::Module> m_module;
  std::vector<Tensor> m_staging;

  py::buffer_info checkedInput(const py::handle& arg, int index) const {
    const runtime::TensorSlot& slot = m_module->executor().inputSlot(index);
    const std::string what = "input " + std::to_string(index) + " ('" + slot.name + "')";
    if (!PyObject_CheckBuffer(arg.ptr()))
      throw Error(what + " is a " + std::string(py::str(py::type::handle_of(arg).attr("__name__"))) +
                      ", not an array",
                  ErrorKind::InvalidInput);
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(arg).request();
    std::optional<DType> dtype = dtypeOfBuffer(info.format, info.itemsize);
    if (!dtype || *dtype != slot.dtype)
      throw Error(what + " has dtype " + (dtype ? std::string(runtime::dtypeName(*dtype)) : "'" + info.format + "'") +
                      ", expected " + std::string(runtime::dtypeName(slot.dtype)),
                  ErrorKind::InvalidInput);
    runtime::Shape shape(info.shape.begin(), info.shape.end());
    if (shape != slot.shape)
      throw Error(what + " has shape " + runtime::shapeString(shape) + ", expected " + runtime::shapeString(slot.shape),
                  ErrorKind::InvalidInput);
    if (!isCContiguous(info)) throw Error(what + " is not C-contiguous", ErrorKind::InvalidInput);
    return info;
  }
};

void translateErrors(std::exception_ptr pending) {
  try {
    if (pending) std::rethrow_exception(pending);
  } catch (const Error& e) {
    py::object cls = py::module_::import("kiln.errors").attr("KilnError");
    py::object exc = cls(std::string(e.what()), std::string(errorKindName(e.kind())), static_cast<int>(e.kind()));
    PyErr_SetObject(cls.ptr(), exc.ptr());
  }
}

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_runtime, m) {
  using namespace kiln::python;
  m.doc() = "Kiln's runtime: loads and runs modules exported by `kiln compile` (no compiler, no libtorch)";
  py::register_exception_translator(&translateErrors);

  py::class_<Buffer>(m, "Buffer", py::buffer_protocol(),
                     "an output tensor of a run; numpy.asarray(buffer) views it without a copy")
      .def_buffer(&Buffer::info)
      .def_property_readonly("dtype", [](const Buffer& b) { return std::string(kiln::runtime::dtypeName(b.tensor().dtype())); })
      .def_property_readonly("shape", [](const Buffer& b) { return py::tuple(py::cast(b.tensor().shape())); });

  py::class_<Module>(m, "Module", "an exported module directory (graph.txt, params.bin, kernels.so), loaded")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", &Module::path)
      .def_property_readonly("target", &Module::target)
      .def_property_readonly("inputs", &Module::inputs, "[{'name', 'dtype', 'shape'}] in forward-argument order")
      .def_property_readonly("outputs", &Module::outputs, "[{'name', 'dtype', 'shape'}] in output order")
      .def("run", &Module::run, py::arg("inputs"), py::arg("threads") = 0,
           "runs once on C-contiguous buffers; threads > 0 sets the runtime's thread count first when it differs");

  m.def("set_num_threads", [](int threads) {
    if (threads < 0) throw kiln::Error("threads must be >= 0, got " + std::to_string(threads), kiln::ErrorKind::Usage);
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> guard(runtimeLock());
    kiln::runtime::setNumThreads(threads);
  }, py::arg("threads"), "the runtime thread pool's size for every module (0: KILN_NUM_THREADS or all cores)");
  m.def("num_threads", [] { return kiln::runtime::numThreads(); });
  m.def("format_version", [] { return kiln::runtime::kModuleFormatVersion; });
}
