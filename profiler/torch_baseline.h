// A TorchScript model run by Debian's libtorch (1.13), the library Kiln's importer reads models with:
//   Eager      the module with the graph executor's optimizations off (operator by operator): the
//              reference the end-to-end tests check Kiln against;
//   Optimized  the module frozen and passed through torch::jit::optimize_for_inference (conv-bn
//              folding, oneDNN/MKLDNN conversions where available): the `torchscript-optimized`
//              row of compare and sweep, served by `kiln measure-worker`.
// Today's PyTorch (eager nn.Module, torch.compile) runs in Python workers (profiler/python_worker.h).
// libtorch headers stay in the .cpp; tensors cross this boundary as runtime::Tensor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace kiln::profiler {

enum class TorchMode { Eager, Optimized };

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
