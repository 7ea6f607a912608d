// A test-only reference evaluator: runs a Kiln graph with ATen operators, following the operator
// semantics documented in core/ir/op_registry.h. Comparing it with the TorchScript module's own
// output checks that the importer's mapping (operand order, scaling, attributes) is faithful,
// independently of Kiln's lowering.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <stdexcept>
#include <vector>

#include "core/ir/graph.h"
#include "importer_test_util.h"
#include "importers/torchscript.h"

namespace kiln::importers::testing {

inline at::ScalarType torchDType(runtime::DType t) {
  switch (t) {
    case runtime::DType::Float32: return at::kFloat;
    case runtime::DType::Float64: return at::kDouble;
    case runtime::DType::Int64: return at::kLong;
    case runtime::DType::Int32: return at::kInt;
    case runtime::DType::Bool: return at::kBool;
    case runtime::DType::Int8: return at::kChar;
    case runtime::DType::UInt8: return at::kByte;
  }
  throw std::logic_error("dtype");
}

inline at::Tensor fromKiln(const runtime::Tensor& t) {
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  return at::from_blob(t.raw(), shape, at::TensorOptions().dtype(torchDType(t.dtype()))).clone();
}

inline at::Tensor evalNode(const core::Node& n, const std::vector<at::Tensor>& in) {
  const core::Attrs& a = n.attrs;
  auto ints = [&](const char* name) { return a.getInts(name); };
  auto opt = [&](size_t i) { return in.size() > i ? c10::optional<at::Tensor>(in[i]) : c10::nullopt; };
  const std::string& op = n.op;
  if (op == "conv2d")
    return at::conv2d(in[0], in[1], opt(2), ints("stride"), ints("padding"), ints("dilation"), a.getInt("groups"));
  if (op == "batch_norm")
    return at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.0, a.getFloat("epsilon"), false);
  if (op == "dense") return at::linear(in[0], in[1], opt(2));
  if (op == "matmul") return at::matmul(in[0], in[1]);
  if (op == "relu") return at::relu(in[0]);
  if (op == "sigmoid") return at::sigmoid(in[0]);
  if (op == "tanh") return at::tanh(in[0]);
  if (op == "silu") return at::silu(in[0]);
  if (op == "hardswish") return at::hardswish(in[0]);
  if (op == "hardsigmoid") return at::hardsigmoid(in[0]);
  if (op == "exp") return at::exp(in[0]);
  if (op == "log") return at::log(in[0]);
  if (op == "sqrt") return at::sqrt(in[0]);
  if (op == "rsqrt") return at::rsqrt(in[0]);
  if (op == "neg") return at::neg(in[0]);
  if (op == "abs") return at::abs(in[0]);
  if (op == "erf") return at::erf(in[0]);
  if (op == "gelu") return at::gelu(in[0], a.getString("approximate"));
  if (op == "leaky_relu") return at::leaky_relu(in[0], a.getFloat("alpha"));
  if (op == "clamp") return at::clamp(in[0], a.getFloat("min"), a.getFloat("max"));
  if (op == "add") return at::add(in[0], in[1]);
  if (op == "sub") return at::sub(in[0], in[1]);
  if (op == "mul") return at::mul(in[0], in[1]);
  if (op == "div") return at::div(in[0], in[1]);
  if (op == "maximum") return at::maximum(in[0], in[1]);
  if (op == "minimum") return at::minimum(in[0], in[1]);
  if (op == "pow") return at::pow(in[0], in[1]);
  if (op == "remainder") return at::remainder(in[0], in[1]);
  if (op == "reshape") return in[0].reshape(ints("shape"));
  if (op == "transpose") return in[0].permute(ints("perm")).contiguous();
  if (op == "concat") return at::cat(in, a.getInt("axis"));
  if (op == "copy") return in[0].clone();
  if (op == "max_pool2d")
    return at::max_pool2d(in[0], ints("kernel"), ints("stride"), ints("padding"), ints("dilation"),
                          a.getInt("ceil_mode") != 0);
  if (op == "avg_pool2d") {
    if (a.has("dilation") && ints("dilation") != std::vector<int64_t>{1, 1}) throw std::logic_error("dilated avg_pool2d");
    return at::avg_pool2d(in[0], ints("kernel"), ints("stride"), ints("padding"), a.getInt("ceil_mode") != 0,
                          a.getInt("count_include_pad", 1) != 0);
  }
  if (op == "adaptive_avg_pool2d") return at::adaptive_avg_pool2d(in[0], ints("output_size"));
  if (op == "mean") return at::mean(in[0], ints("axes"), a.getInt("keepdims") != 0);
  if (op == "sum") return at::sum(in[0], ints("axes"), a.getInt("keepdims") != 0);
  if (op == "softmax") return at::softmax(in[0], a.getInt("axis"));
  if (op == "max") return at::amax(in[0], ints("axes"), a.getInt("keepdims") != 0);
  if (op == "min") return at::amin(in[0], ints("axes"), a.getInt("keepdims") != 0);
  if (op == "argmax") return at::argmax(in[0], a.getInt("axis"), a.getInt("keepdims") != 0);
  if (op == "argmin") return at::argmin(in[0], a.getInt("axis"), a.getInt("keepdims") != 0);
  if (op == "strided_slice") {
    at::Tensor y = in[0];
    const auto &begin = ints("begin"), &end = ints("end"), &strides = ints("strides");
    for (size_t d = 0; d < begin.size(); ++d) y = y.slice(static_cast<int64_t>(d), begin[d], end[d], strides[d]);
    return y.contiguous();
  }
  if (op == "take") {
    int64_t axis = a.getInt("axis");
    at::Tensor idx = in[1].to(at::kLong);
    idx = at::where(idx < 0, idx + in[0].size(axis), idx);
    at::Tensor flat = at::index_select(in[0], axis, idx.reshape({-1}));
    std::vector<int64_t> shape(in[0].sizes().begin(), in[0].sizes().begin() + axis);
    shape.insert(shape.end(), idx.sizes().begin(), idx.sizes().end());
    shape.insert(shape.end(), in[0].sizes().begin() + axis + 1, in[0].sizes().end());
    return flat.reshape(shape);
  }
  if (op == "broadcast_to") return in[0].expand(ints("shape")).contiguous();
  if (op == "where") return at::where(in[0], in[1], in[2]);
  if (op == "equal") return at::eq(in[0], in[1]);
  if (op == "not_equal") return at::ne(in[0], in[1]);
  if (op == "less") return at::lt(in[0], in[1]);
  if (op == "less_equal") return at::le(in[0], in[1]);
  if (op == "greater") return at::gt(in[0], in[1]);
  if (op == "greater_equal") return at::ge(in[0], in[1]);
  if (op == "cast") {
    auto dtype = runtime::parseDType(a.getString("dtype"));
    return in[0].to(torchDType(*dtype));
  }
  if (op == "conv_transpose2d")
    return at::conv_transpose2d(in[0], in[1], opt(2), ints("stride"), ints("padding"), ints("output_padding"),
                                a.getInt("groups"), ints("dilation"));
  if (op == "resize2d") {
    const auto& size = ints("size");
    c10::optional<double> sh, sw;
    if (a.has("scale_h")) sh = 1.0 / a.getFloat("scale_h");
    if (a.has("scale_w")) sw = 1.0 / a.getFloat("scale_w");
    if (a.getString("mode") == "nearest") return at::upsample_nearest2d(in[0], size, sh, sw);
    return at::upsample_bilinear2d(in[0], size, a.getInt("align_corners") != 0, sh, sw);
  }
  if (op == "pad") {
    const auto& pads = ints("pads");
    const std::string& mode = a.getString("mode");
    int64_t rank = in[0].dim();
    if (mode == "constant") {
      std::vector<int64_t> list;  // PyTorch's order: the last axis first
      for (int64_t d = rank - 1; d >= 0; --d) list.insert(list.end(), {pads[d], pads[rank + d]});
      return at::constant_pad_nd(in[0], list, a.getFloat("value", 0.0));
    }
    // PyTorch's 1-D kernel of the mode, one axis at a time (the modes are separable): the axis
    // moved last, everything else folded into the batch of a [M, 1, L] tensor.
    at::Tensor y = in[0];
    for (int64_t d = 0; d < rank; ++d) {
      if (pads[d] == 0 && pads[rank + d] == 0) continue;
      at::Tensor moved = y.movedim(d, -1).contiguous();
      std::vector<int64_t> outer(moved.sizes().begin(), moved.sizes().end() - 1);
      at::Tensor padded = at::pad(moved.reshape({-1, 1, moved.size(-1)}), {pads[d], pads[rank + d]}, mode);
      outer.push_back(padded.size(-1));
      y = padded.reshape(outer).movedim(-1, d).contiguous();
    }
    return y;
  }
  throw std::logic_error("reference evaluator: unknown op " + op);
}

/// Operators with several outputs.
inline std::vector<at::Tensor> evalNodeOutputs(const core::Node& n, const std::vector<at::Tensor>& in) {
  if (n.op == "topk") {
    auto [values, indices] = at::topk(in[0], n.attrs.getInt("k"), n.attrs.getInt("axis"), n.attrs.getInt("largest") != 0);
    return {values, indices};
  }
  return {evalNode(n, in)};
}

inline std::vector<at::Tensor> evalWithTorch(const core::Graph& graph, const std::vector<at::Tensor>& inputs);

/// if/loop nodes: their sub-graphs evaluated in turn (core/ir/graph.h's semantics).
inline std::vector<at::Tensor> evalControlFlow(const core::Node& n, const std::vector<at::Tensor>& in) {
  if (n.op == "if") {
    std::vector<at::Tensor> operands(in.begin() + 1, in.end());
    return evalWithTorch(*n.regions[in[0].item<double>() != 0 ? 0 : 1], operands);
  }
  const int64_t carried = n.attrs.getInt("carried");
  const int64_t trip = in[0].item<int64_t>();
  bool cond = in[1].item<double>() != 0;
  std::vector<at::Tensor> state(in.begin() + 2, in.begin() + 2 + carried);
  for (int64_t i = 0; i < trip && cond; ++i) {
    std::vector<at::Tensor> args{at::scalar_tensor(i, at::kLong)};
    args.insert(args.end(), state.begin(), state.end());
    args.insert(args.end(), in.begin() + 2 + carried, in.end());
    std::vector<at::Tensor> out = evalWithTorch(*n.regions[0], args);
    cond = out[0].item<double>() != 0;
    state.assign(out.begin() + 1, out.end());
  }
  return state;
}

/// Evaluates `graph` on `inputs` (graph-input order); returns the outputs.
inline std::vector<at::Tensor> evalWithTorch(const core::Graph& graph, const std::vector<at::Tensor>& inputs) {
  torch::NoGradGuard noGrad;
  std::map<core::ValueId, at::Tensor> env;
  for (size_t i = 0; i < graph.inputs().size(); ++i) env[graph.inputs()[i]] = inputs.at(i);
  for (size_t id = 0; id < graph.values().size(); ++id) {
    const core::Value& v = graph.values()[id];
    if (v.isConstant()) env[static_cast<core::ValueId>(id)] = fromKiln(*v.constant);
  }
  for (const core::Node& n : graph.nodes()) {
    std::vector<at::Tensor> in;
    for (core::ValueId v : n.inputs) in.push_back(env.at(v));
    std::vector<at::Tensor> outs = n.regions.empty() ? evalNodeOutputs(n, in) : evalControlFlow(n, in);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (std::vector<int64_t>(outs[i].sizes().begin(), outs[i].sizes().end()) != graph.type(n.outputs[i]).shape)
        throw std::logic_error(n.op + ": Kiln's inferred shape differs from ATen's");
      if (outs[i].scalar_type() != torchDType(graph.type(n.outputs[i]).dtype))
        throw std::logic_error(n.op + ": Kiln's inferred dtype differs from ATen's");
      env[n.outputs[i]] = outs[i];
    }
  }
  std::vector<at::Tensor> outs;
  for (core::ValueId v : graph.outputs()) outs.push_back(env.at(v));
  return outs;
}

/// Runs the TorchScript file with libtorch and the imported graph with the reference evaluator on
/// the same random inputs; expects equal output shapes, dtypes and values.
inline void expectMatchesLibtorchOn(const std::string& path, const ImportedModel& model,
                                    const std::vector<at::Tensor>& inputs, double rtol = 1e-4, double atol = 1e-4) {
  std::vector<at::Tensor> expected = runWithLibtorch(path, inputs);
  std::vector<at::Tensor> actual;
  try {
    actual = evalWithTorch(model.graph, inputs);
  } catch (const std::exception& e) {
    FAIL() << "reference evaluation failed: " << e.what();
  }
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].sizes(), expected[i].sizes()) << "output " << i;
    ASSERT_EQ(actual[i].scalar_type(), expected[i].scalar_type()) << "output " << i;
    double maxDiff = (actual[i].to(at::kDouble) - expected[i].to(at::kDouble)).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(actual[i], expected[i], rtol, atol)) << "output " << i << ": max |diff| " << maxDiff;
  }
}

inline void expectMatchesLibtorch(const std::string& path, const ImportedModel& model, double rtol = 1e-4,
                                  double atol = 1e-4) {
  expectMatchesLibtorchOn(path, model, randomInputs(model.inputs), rtol, atol);
}

}  // namespace kiln::importers::testing
