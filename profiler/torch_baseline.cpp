#include "profiler/torch_baseline.h"

#include <torch/script.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/version.h>
#include <ATen/Parallel.h>
#include <ATen/Context.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace kiln::profiler {
namespace {

using runtime::DType;

at::ScalarType toTorch(DType dtype) {
  switch (dtype) {
    case DType::Float32: return at::kFloat;
    case DType::Float64: return at::kDouble;
    case DType::Int64: return at::kLong;
    case DType::Int32: return at::kInt;
    case DType::Bool: return at::kBool;
    case DType::Int8: return at::kChar;
    case DType::UInt8: return at::kByte;
  }
  return at::kFloat;
}

DType fromTorch(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kDouble: return DType::Float64;
    case at::kLong: return DType::Int64;
    case at::kInt: return DType::Int32;
    case at::kBool: return DType::Bool;
    case at::kChar: return DType::Int8;
    case at::kByte: return DType::UInt8;
    default: throw Error(std::string("unsupported output dtype ") + c10::toString(t));
  }
}

at::Tensor toTorchTensor(const runtime::Tensor& t) {
  std::vector<int64_t> sizes(t.shape().begin(), t.shape().end());
  return torch::from_blob(t.raw(), sizes, torch::TensorOptions().dtype(toTorch(t.dtype()))).clone();
}

runtime::Tensor fromTorchTensor(const at::Tensor& src) {
  at::Tensor c = src.contiguous();
  runtime::Shape shape(c.sizes().begin(), c.sizes().end());
  runtime::Tensor t = runtime::Tensor::zeros(fromTorch(c.scalar_type()), shape);
  if (t.nbytes()) std::memcpy(t.raw(), c.data_ptr(), t.nbytes());
  return t;
}

void flatten(const c10::IValue& v, std::vector<runtime::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(fromTorchTensor(v.toTensor()));
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) flatten(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) flatten(e, out);
  } else {
    throw Error("model returned a " + v.tagKind() + ", expected tensors");
  }
}

/// Quantized models run on the engine they were quantized for: kiln.json's
/// "quantization": {"qengine": "onednn"} (resources/models/export_models.py). The engine must be
/// set before loading, since packed weights are re-packed for the current engine on load.
/// Models without the entry keep libtorch's default engine.
void selectQuantizedEngine(const std::string& path) {
  torch::jit::ExtraFilesMap extra{{"kiln.json", ""}};
  try {
    torch::jit::load(path, c10::nullopt, extra);
  } catch (const c10::Error&) {
    return;  // the real load reports it
  }
  nlohmann::json meta = nlohmann::json::parse(extra["kiln.json"], nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || !meta.contains("quantization") || !meta["quantization"].is_object()) return;
  std::string name = meta["quantization"].value("qengine", std::string());
  if (name.empty()) return;
  static const std::pair<const char*, at::QEngine> kEngines[] = {
      {"fbgemm", at::QEngine::FBGEMM}, {"x86", at::QEngine::X86}, {"onednn", at::QEngine::ONEDNN},
      {"qnnpack", at::QEngine::QNNPACK}};
  for (const auto& [engineName, engine] : kEngines) {
    if (name != engineName) continue;
    const auto& supported = at::globalContext().supportedQEngines();
    if (std::find(supported.begin(), supported.end(), engine) == supported.end())
      throw Error(path + ": the quantized engine '" + name + "' is not available in this libtorch",
                  ErrorKind::Unsupported);
    at::globalContext().setQEngine(engine);
    return;
  }
  throw Error(path + ": unknown quantized engine '" + name + "'", ErrorKind::InvalidModel);
}

}  // namespace

struct TorchModel::Impl {
  torch::jit::Module module;
  TorchMode mode;
  int threads;
};

TorchModel::TorchModel(const std::string& path, TorchMode mode, int threads)
    : m_impl(std::make_unique<Impl>()) {
  m_impl->mode = mode;
  m_impl->threads = threads;
  selectQuantizedEngine(path);
  try {
    torch::jit::Module m = torch::jit::load(path);
    m.eval();
    if (mode == TorchMode::Optimized) {
      torch::jit::Module frozen = torch::jit::freeze(m);
      m = torch::jit::optimize_for_inference(frozen);
    }
    m_impl->module = std::move(m);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw Error(path + ": " + msg.substr(0, msg.find('\n')), ErrorKind::InvalidModel);
  }
}

TorchModel::~TorchModel() = default;

std::vector<runtime::Tensor> TorchModel::run(const std::vector<runtime::Tensor>& inputs) {
  // at::set_num_threads is not free: calling it before every forward made PyTorch 2.5-7x slower
  // at 2 threads here (it re-sizes the OpenMP and BLAS pools each time). Set it only if it differs.
  if (m_impl->threads > 0 && at::get_num_threads() != m_impl->threads) at::set_num_threads(m_impl->threads);
  torch::NoGradGuard noGrad;
  torch::jit::GraphOptimizerEnabledGuard optimize(m_impl->mode == TorchMode::Optimized);
  std::vector<c10::IValue> args;
  for (const auto& t : inputs) args.emplace_back(toTorchTensor(t));
  std::vector<runtime::Tensor> out;
  try {
    flatten(m_impl->module.forward(args), out);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw Error("pytorch: " + msg.substr(0, msg.find('\n')), ErrorKind::InvalidInput);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // TorchScript interpreter errors (JITException) carry a traceback; keep its last line.
    std::string msg = e.what();
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw Error("pytorch: " + msg.substr(msg.rfind('\n') + 1), ErrorKind::InvalidInput);
  }
  return out;
}

std::string torchVersion() { return TORCH_VERSION; }

std::string torchBlasLibrary() {
  // The BLAS that libtorch's libblas.so.3 dependency resolved to in this process.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.find("blas") != std::string::npos) {
      char resolved[PATH_MAX];
      if (realpath(path.c_str(), resolved)) return resolved;
      return path;
    }
  }
  return "unknown";
}

}  // namespace kiln::profiler
