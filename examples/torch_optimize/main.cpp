// kiln::torch::optimize from a libtorch program: load a TorchScript model, optimize it, run it,
// print the plan report, the largest difference from libtorch and a timing of both.
//
//   kiln_torch_optimize MODEL.pt [--batch N] [--threads N] [--repeat N] [-O N]
//                       [--min-subgraph-ops N] [--records FILE]
//
// Input shapes come from the file's kiln.json (written by resources/models/export_models.py).
// make_partial_model.py writes resnet18 with an unsupported operator in the middle, to see a
// partitioned run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "app/torch/optimize.h"
#include "importers/torchscript.h"
#include "runtime/error.h"

namespace {

int usage() {
  std::cerr << "usage: kiln_torch_optimize MODEL.pt [--batch N] [--threads N] [--repeat N] [-O N]\n"
               "                           [--min-subgraph-ops N] [--records FILE]\n";
  return 2;
}

template <typename Fn>
double medianMs(int repeat, Fn&& fn) {
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double maxAbsDiff(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) return (a.toTensor() - b.toTensor()).abs().max().item<double>();
  if (a.isTuple() && b.isTuple()) {
    double d = 0;
    const auto& x = a.toTupleRef().elements();
    const auto& y = b.toTupleRef().elements();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) d = std::max(d, maxAbsDiff(x[i], y[i]));
    return d;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string path = argv[1];
  int64_t batch = 0;
  int threads = 2, repeat = 20;
  kiln::torch::OptimizeOptions options;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    std::string v = argv[++i];
    if (a == "--batch") batch = std::stoll(v);
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--repeat") repeat = std::max(1, std::stoi(v));
    else if (a == "-O") options.optLevel = std::stoi(v);
    else if (a == "--min-subgraph-ops") options.minSubgraphOps = std::stoi(v);
    else if (a == "--records") options.records = v;
    else return usage();
  }
  options.threads = threads;
  at::set_num_threads(threads);  // the same thread count for libtorch and Kiln

  try {
    torch::jit::Module module = torch::jit::load(path);
    module.eval();
    std::vector<c10::IValue> inputs;
    at::manual_seed(0);
    for (kiln::importers::InputSpec spec : kiln::importers::readInputSpecs(path)) {
      if (batch > 0 && !spec.shape.empty()) spec.shape[0] = batch;
      bool isFloat = spec.dtype == kiln::runtime::DType::Float32;
      inputs.emplace_back(isFloat ? at::randn(spec.shape) : at::zeros(spec.shape, at::kLong));
    }
    if (inputs.empty()) {
      std::cerr << path << ": no input shapes (no kiln.json in the file)\n";
      return 1;
    }
    at::NoGradGuard noGrad;

    auto start = std::chrono::steady_clock::now();
    kiln::torch::OptimizedModule fast = kiln::torch::optimize(module, options);
    c10::IValue got = fast.forward(inputs);  // plans and compiles
    double firstCallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    c10::IValue want = module.forward(inputs);

    for (int i = 0; i < 3; ++i) module.forward(inputs), fast.forward(inputs);  // warm-up
    double torchMs = medianMs(repeat, [&] { module.forward(inputs); });
    double kilnMs = medianMs(repeat, [&] { fast.forward(inputs); });

    std::cout << fast.report().text();
    std::printf("first call (optimize + compile + run): %.2f s\n", firstCallS);
    std::printf("max |kiln - libtorch|: %.3g\n", maxAbsDiff(got, want));
    std::printf("median of %d (threads %d): libtorch %.3f ms, kiln::torch %.3f ms (%.2fx)\n", repeat, threads,
                torchMs, kilnMs, torchMs / kilnMs);
    return 0;
  } catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return static_cast<int>(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
