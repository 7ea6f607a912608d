// PyTorch baselines through libtorch, for side-by-side comparison with Kiln:
//   Eager     the TorchScript module run with the graph executor's optimizations off
//             (operator by operator, as `model(x)` in eager PyTorch would);
//   Compiled  the module frozen and passed through torch::jit::optimize_for_inference
//             (conv-bn folding, oneDNN/MKLDNN conversions where available).
// libtorch headers stay in the .cpp; tensors cross this boundary as runtime::Tensor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace kiln::profiler {

enum class TorchMode { Eager, Compiled };
const char* torchModeName(TorchMode mode);  // "pytorch-eager", "pytorch-compiled"

class TorchModel {
 public:
  /// Throws kiln::Error (InvalidModel) when the file cannot be loaded.
  TorchModel(const std::string& path, TorchMode mode, int threads);
  ~TorchModel();
  TorchModel(const TorchModel&) = delete;
  TorchModel& operator=(const TorchModel&) = delete;

  /// Runs forward; a returned tuple is flattened in order.
  std::vector<runtime::Tensor> run(const std::vector<runtime::Tensor>& inputs);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// Version string of the linked libtorch ("1.13.1") and the BLAS library it calls.
std::string torchVersion();
std::string torchBlasLibrary();

}  // namespace kiln::profiler
