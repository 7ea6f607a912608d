// ONNX → Kiln graph IR (importers/onnx.h). Values are either graph tensors or import-time
// constants (at::Tensor: initializers, Constant nodes, folded shape arithmetic); each ONNX node is
// folded with ATen when all its inputs are constants and the op is one of the shape-arithmetic
// ones, else mapped onto Kiln's canonical operators.
#include "importers/onnx.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/ir/op_registry.h"
#include "importers/torchscript/context.h"

namespace kiln::importers {
namespace {

using core::Attrs;
using core::ValueId;
using runtime::DType;
using runtime::Shape;

at::ScalarType torchType(int32_t onnxType) {
  switch (onnxType) {
    case onnx::TensorProto_DataType_FLOAT: return at::kFloat;
    case onnx::TensorProto_DataType_DOUBLE: return at::kDouble;
    case onnx::TensorProto_DataType_INT64: return at::kLong;
    case onnx::TensorProto_DataType_INT32: return at::kInt;
    case onnx::TensorProto_DataType_BOOL: return at::kBool;
    case onnx::TensorProto_DataType_INT8: return at::kChar;
    case onnx::TensorProto_DataType_UINT8: return at::kByte;
    default: break;
  }
  throw Error("ONNX tensors of data type " + std::to_string(onnxType) + " are not supported", ErrorKind::Unsupported);
}

std::vector<int64_t> toLongs(const at::Tensor& t) {
  at::Tensor l = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
}

at::Tensor tensorFrom(const onnx::TensorProto& t) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  at::ScalarType type = torchType(t.data_type());
  auto opts = at::TensorOptions().dtype(type);
  if (t.has_data_location() && t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    throw Error("tensor '" + t.name() + "' uses external data, which is not supported", ErrorKind::Unsupported);
  if (!t.raw_data().empty()) {
    at::Tensor out = at::empty(dims, opts);
    if (static_cast<size_t>(out.nbytes()) != t.raw_data().size())
      throw Error("tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) + " bytes of data for shape " +
                      runtime::shapeString(dims), ErrorKind::InvalidModel);
    std::memcpy(out.data_ptr(), t.raw_data().data(), out.nbytes());
    return out;
  }
  at::Tensor values;
  switch (t.data_type()) {
    case onnx::TensorProto_DataType_FLOAT:
      values = at::tensor(std::vector<float>(t.float_data().begin(), t.float_data().end()), opts);
      break;
    case onnx::TensorProto_DataType_DOUBLE:
      values = at::tensor(std::vector<double>(t.double_data().begin(), t.double_data().end()), opts);
      break;
    case onnx::TensorProto_DataType_INT64:
      values = at::tensor(std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end()), opts);
      break;
    default:  // int32, bool, int8, uint8 are stored in int32_data
      values = at::tensor(std::vector<int32_t>(t.int32_data().begin(), t.int32_data().end()), at::kInt).to(type);
  }
  return values.reshape(dims).clone();
}

/// The ai.onnx opsets whose operator semantics the handlers follow (opset 7 brought numpy-style
/// broadcasting; the newest are those of Debian's ONNX release and the exporters it meets).
constexpr int64_t kMinOpset = 7, kMaxOpset = 21;

int64_t opsetOf(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") return op.version();
  }
  return 13;
}

/// Moves the bytes of every initializer stored as external data (the `location` file beside the
/// model, from `offset`, `length` bytes; what torch.onnx.export's dynamo exporter writes for the
/// weights) into its raw_data, so the rest of the importer sees ordinary tensors. A location must
/// name a file inside the model's folder.
void loadExternalData(const std::string& path, onnx::ModelProto& model) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::absolute(fs::path(path)).parent_path();
  std::map<std::string, std::string> files;  // location -> contents, each read once
  auto fileBytes = [&](const std::string& location, const std::string& tensor) -> const std::string& {
    auto it = files.find(location);
    if (it != files.end()) return it->second;
    fs::path rel(location);
    if (location.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; }))
      throw Error(path + ": tensor '" + tensor + "' names external data '" + location +
                      "' outside the model's folder", ErrorKind::InvalidModel);
    fs::path file = folder / rel;
    std::ifstream in(file, std::ios::binary);
    if (!in)
      throw Error(path + ": tensor '" + tensor + "' is stored in '" + location + "', which cannot be read",
                  ErrorKind::Io);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return files.emplace(location, std::move(bytes)).first->second;
  };
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (!t.has_data_location() || t.data_location() != onnx::TensorProto_DataLocation_EXTERNAL) continue;
    std::string location;
    uint64_t offset = 0, length = 0;
    bool hasLength = false;
    try {
      for (const auto& entry : t.external_data()) {
        if (entry.key() == "location") location = entry.value();
        if (entry.key() == "offset") offset = std::stoull(entry.value());
        if (entry.key() == "length") length = std::stoull(entry.value()), hasLength = true;
      }
    } catch (const std::exception&) {
      throw Error(path + ": tensor '" + t.name() + "' has a malformed external-data offset or length",
                  ErrorKind::InvalidModel);
    }
    const std::string& bytes = fileBytes(location, t.name());
    if (!hasLength) length = bytes.size() >= offset ? bytes.size() - offset : 0;
    if (offset > bytes.size() || length > bytes.size() - offset)
      throw Error(path + ": tensor '" + t.name() + "' reaches past the end of its external data '" + location + "'",
                  ErrorKind::InvalidModel);
    t.set_raw_data(bytes.substr(offset, length));
    t.clear_external_data();
    t.clear_data_location();
  }
}

/// Reads and sanity-checks the ModelProto: everything that makes the file "not an ONNX model"
/// (InvalidModel) or of an opset Kiln does not import (Unsupported) is found here, before any node.
onnx::ModelProto loadProto(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": no such file", ErrorKind::Io);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the file", ErrorKind::Io);
  if (std::filesystem::file_size(path, ec) == 0 && !ec)
    throw Error(path + ": not an ONNX model: empty file", ErrorKind::InvalidModel);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    throw Error(path + ": not an ONNX model: the file is not a ModelProto protobuf (random bytes, or truncated)",
                ErrorKind::InvalidModel);
  // Protobuf parses many byte strings as a message with unknown fields: a model has a graph.
  if (!model.has_graph())
    throw Error(path + ": not an ONNX model: the protobuf has no graph (ModelProto field 7)", ErrorKind::InvalidModel);
  if (model.graph().output_size() == 0)
    throw Error(path + ": not an ONNX model: the graph has no outputs", ErrorKind::InvalidModel);
  loadExternalData(path, model);
  int64_t opset = opsetOf(model);
  if (opset < kMinOpset || opset > kMaxOpset)
    throw Error(path + ": ONNX opset " + std::to_string(opset) + " is not supported (Kiln imports opsets " +
                    std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")",
                ErrorKind::Unsupported);
  return model;
}

/// An ONNX value: a graph tensor or an import-time constant.
struct Val {
  ValueId id = -1;
  std::optional<at::Tensor> constant;
};

class OnnxImporter {
 public:
  OnnxImporter(const std::string& path, const onnx::ModelProto& model) : m_path(path), m_model(model) {}

  ImportedModel run(const ImportOptions& options);
  /// Maps (or folds) every node of the graph, in order.
  void importNodes();

 public:
  using Node = onnx::NodeProto;
  using Handler = std::function<void(OnnxImporter&, const Node&)>;
  static const std::map<std::string, Handler>& handlers();

 private:
  static std::optional<at::Tensor> fold(const Node& n, const std::vector<at::Tensor>& in, int64_t opset);

  [[noreturn]] void fail(const Node& n, const std::string& why, ErrorKind kind = ErrorKind::Unsupported) const {
    throw Error("onnx::" + n.op_type() + ": " + why + " (node \"" + n.name() + "\")", kind);
  }
  /// Kiln node locations: "onnx:<op type>:<node name>".
  std::string where(const Node& n) const { return "onnx:" + n.op_type() + ":" + n.name(); }

  // --- inputs ---
  bool has(const Node& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }
  const Val& val(const Node& n, int i) const {
    auto it = m_values.find(n.input(i));
    if (it == m_values.end()) fail(n, "input '" + n.input(i) + "' is not defined", ErrorKind::InvalidModel);
    return it->second;
  }
  ValueId tensor(const Node& n, int i);
  const at::Tensor& constant(const Node& n, int i) const {
    const Val& v = val(n, i);
    if (!v.constant) fail(n, "input " + std::to_string(i) + " must be a constant (computed at import time)");
    return *v.constant;
  }
  std::vector<int64_t> ints(const Node& n, int i) const { return toLongs(constant(n, i)); }
  core::TensorType type(ValueId id) const { return m_graph.type(id); }
  Shape shapeOf(const Node& n, int i) const {
    const Val& v = val(n, i);
    if (v.constant) return Shape(v.constant->sizes().begin(), v.constant->sizes().end());
    return type(v.id).shape;
  }

  // --- attributes ---
  const onnx::AttributeProto* attr(const Node& n, const std::string& name) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t attrInt(const Node& n, const std::string& name, int64_t fallback) const {
    const auto* a = attr(n, name);
    return a ? a->i() : fallback;
  }
  double attrFloat(const Node& n, const std::string& name, double fallback) const {
    const auto* a = attr(n, name);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> attrInts(const Node& n, const std::string& name, std::vector<int64_t> fallback = {}) const {
    const auto* a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }
  std::string attrString(const Node& n, const std::string& name, const std::string& fallback) const {
    const auto* a = attr(n, name);
    return a ? a->s() : fallback;
  }
  /// An axes list from the attribute (older opsets) or input `i` (newer ones).
  std::vector<int64_t> axesOf(const Node& n, int i) const {
    if (has(n, i)) return ints(n, i);
    return attrInts(n, "axes");
  }

  // --- building ---
  ValueId emit(const Node& n, const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {}) {
    std::string stem = n.output_size() > 0 && !n.output(0).empty() ? n.output(0) : op;
    try {
      return m_graph.addNode(op, std::move(inputs), std::move(attrs), where(n), stem).at(0);
    } catch (const InternalError&) {
      throw;
    } catch (const Error& e) {
      throw Error("onnx::" + n.op_type() + ": " + e.what(), e.kind());
    }
  }
  void setOut(const Node& n, ValueId id, int i = 0) { m_values[n.output(i)] = Val{id, std::nullopt}; }
  void setConst(const Node& n, at::Tensor t, int i = 0) { m_values[n.output(i)] = Val{-1, std::move(t)}; }
  ValueId reshape(const Node& n, ValueId x, const Shape& shape) {
    if (type(x).shape == shape) return x;
    return emit(n, "reshape", {x}, {{"shape", shape}});
  }
  ValueId scalar(double v, DType dtype) {
    at::Tensor t = at::scalar_tensor(v, at::TensorOptions().dtype(ts::toTorchDType(dtype)));
    return m_graph.addConstant("scalar", ts::toKilnTensor(t));
  }
  ValueId slice(const Node& n, ValueId x, int64_t axis, int64_t begin, int64_t end, int64_t step);

  // --- handlers ---
  void unary(const Node& n, const std::string& op) { setOut(n, emit(n, op, {tensor(n, 0)})); }
  void binary(const Node& n, const std::string& op);
  void conv(const Node& n);
  void pool(const Node& n, bool isMax);
  void padOp(const Node& n);
  void gemm(const Node& n);
  void gather(const Node& n);
  void sliceOp(const Node& n);
  void reduce(const Node& n, const std::string& op);
  void clip(const Node& n);
  void split(const Node& n);

  std::string m_path;
  const onnx::ModelProto& m_model;
  int64_t m_opset = 13;
  core::Graph m_graph;
  std::unordered_map<std::string, Val> m_values;
  std::unordered_map<std::string, ValueId> m_materialized;
};

ValueId OnnxImporter::tensor(const Node& n, int i) {
  const Val& v = val(n, i);
  if (!v.constant) return v.id;
  auto it = m_materialized.find(n.input(i));
  if (it != m_materialized.end()) return it->second;
  ValueId id = m_graph.addConstant(n.input(i), ts::toKilnTensor(*v.constant));
  m_materialized.emplace(n.input(i), id);
  return id;
}

ValueId OnnxImporter::slice(const Node& n, ValueId x, int64_t axis, int64_t begin, int64_t end, int64_t step) {
  const Shape s = type(x).shape;
  std::vector<int64_t> b(s.size(), 0), e = s, st(s.size(), 1);
  b[axis] = begin;
  e[axis] = end;
  st[axis] = step;
  if (begin == 0 && end == s[axis] && step == 1) return x;
  return emit(n, "strided_slice", {x}, {{"begin", b}, {"end", e}, {"strides", st}});
}

/// Broadcasting binary op; a constant operand takes the other operand's dtype.
void OnnxImporter::binary(const Node& n, const std::string& op) {
  ValueId a = tensor(n, 0), b = tensor(n, 1);
  if (type(a).dtype != type(b).dtype) {
    bool aConst = val(n, 0).constant.has_value();
    ValueId& c = aConst ? a : b;
    DType target = type(aConst ? b : a).dtype;
    c = m_graph.addConstant("const", ts::toKilnTensor(constant(n, aConst ? 0 : 1).to(ts::toTorchDType(target))));
  }
  setOut(n, emit(n, op, {a, b}));
}

/// Conv's padding: explicit `pads` [h_begin, w_begin, h_end, w_end] or auto_pad (SAME_UPPER puts
/// the odd pad at the end, SAME_LOWER at the beginning). conv2d takes the symmetric part; what is
/// left over on one side becomes a pad node in front of it.
void OnnxImporter::conv(const Node& n) {
  ValueId x = tensor(n, 0), w = tensor(n, 1);
  if (type(x).rank() != 4) fail(n, "only 2-D convolution is supported, got input " + type(x).str());
  std::vector<int64_t> strides = attrInts(n, "strides", {1, 1}), dilations = attrInts(n, "dilations", {1, 1});
  std::vector<int64_t> pads = attrInts(n, "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    fail(n, "strides, dilations and pads must describe 2 spatial axes", ErrorKind::InvalidModel);
  std::string autoPad = attrString(n, "auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int d = 0; d < 2; ++d) {
      int64_t in = type(x).shape[2 + d], k = type(w).shape[2 + d], s = strides[d];
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>((out - 1) * s + (k - 1) * dilations[d] + 1 - in, 0);
      int64_t small = total / 2, large = total - small;
      pads[d] = autoPad == "SAME_UPPER" ? small : large;
      pads[2 + d] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    fail(n, "auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", ErrorKind::InvalidModel);
  }
  std::vector<int64_t> symmetric = {std::min(pads[0], pads[2]), std::min(pads[1], pads[3])};
  std::vector<int64_t> extra = {0, 0, pads[0] - symmetric[0], pads[1] - symmetric[1],
                                0, 0, pads[2] - symmetric[0], pads[3] - symmetric[1]};
  if (std::any_of(extra.begin(), extra.end(), [](int64_t p) { return p != 0; }))
    x = emit(n, "pad", {x}, {{"pads", extra}, {"mode", std::string("constant")}, {"value", 0.0}});
  Attrs attrs{{"stride", strides}, {"padding", symmetric}, {"dilation", dilations}, {"groups", attrInt(n, "group", 1)}};
  std::vector<ValueId> inputs{x, w};
  if (has(n, 2)) inputs.push_back(tensor(n, 2));
  setOut(n, emit(n, "conv2d", inputs, attrs));
}

/// Pad: pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (attributes before opset 11, then
/// inputs: pads, constant_value, and from opset 18 the axes they apply to). Modes constant,
/// reflect, edge (replicate) and wrap (circular, opset 19).
void OnnxImporter::padOp(const Node& n) {
  ValueId x = tensor(n, 0);
  const core::TensorType xt = type(x);
  int64_t rank = xt.rank();
  std::string mode = attrString(n, "mode", "constant");
  std::vector<int64_t> given;
  double value = 0.0;
  if (m_opset < 11) {
    given = attrInts(n, "pads");
    value = attrFloat(n, "value", 0.0);
  } else {
    if (!has(n, 1)) fail(n, "the pads input is missing", ErrorKind::InvalidModel);
    given = ints(n, 1);
    if (has(n, 2)) {
      const at::Tensor& v = constant(n, 2);
      if (v.numel() != 1) fail(n, "constant_value must hold one value", ErrorKind::InvalidModel);
      value = v.to(at::kDouble).item<double>();
    }
  }
  std::vector<int64_t> axes;
  if (has(n, 3)) {
    axes = ints(n, 3);
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (given.size() != 2 * axes.size())
    fail(n, "pads has " + std::to_string(given.size()) + " values, expected " + std::to_string(2 * axes.size()) +
                " for " + xt.str(), ErrorKind::InvalidModel);
  const std::map<std::string, std::string> modes = {
      {"constant", "constant"}, {"reflect", "reflect"}, {"edge", "replicate"}, {"wrap", "circular"}};
  auto it = modes.find(mode);
  if (it == modes.end()) fail(n, "mode '" + mode + "' is not supported (constant, reflect, edge, wrap)");
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank) fail(n, "axis " + std::to_string(axes[i]) + " is out of range for " + xt.str(), ErrorKind::InvalidModel);
    int64_t before = given[i], after = given[axes.size() + i];
    if (mode == "reflect" && (before >= xt.shape[axis] || after >= xt.shape[axis]))
      fail(n, "reflect padding (" + std::to_string(before) + ", " + std::to_string(after) + ") of axis " +
                  std::to_string(axis) + " must be less than its size " + std::to_string(xt.shape[axis]) + " in " +
                  xt.str(), ErrorKind::InvalidModel);
    pads[axis] = before;
    pads[rank + axis] = after;
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return setOut(n, x);
  Attrs attrs{{"pads", pads}, {"mode", it->second}};
  if (it->second == "constant") attrs.set("value", value);
  setOut(n, emit(n, "pad", {x}, attrs));
}

void OnnxImporter::pool(const Node& n, bool isMax) {
  ValueId x = tensor(n, 0);
  if (attrString(n, "auto_pad", "NOTSET") != "NOTSET") fail(n, "auto_pad is not supported");
  std::vector<int64_t> kernel = attrInts(n, "kernel_shape");
  std::vector<int64_t> pads = attrInts(n, "pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])
    fail(n, "only 2-D pooling with symmetric padding is supported");
  Attrs attrs{{"kernel", kernel}, {"stride", attrInts(n, "strides", {1, 1})},
              {"padding", std::vector<int64_t>{pads[0], pads[1]}}, {"dilation", attrInts(n, "dilations", {1, 1})},
              {"ceil_mode", attrInt(n, "ceil_mode", 0)}};
  if (!isMax) attrs.set("count_include_pad", attrInt(n, "count_include_pad", 0));
  setOut(n, emit(n, isMax ? "max_pool2d" : "avg_pool2d", {x}, attrs));
}

/// Y = alpha · A' · B' + beta · C: dense when B is a constant matrix and C a vector.
void OnnxImporter::gemm(const Node& n) {
  double alpha = attrFloat(n, "alpha", 1.0), beta = attrFloat(n, "beta", 1.0);
  bool transA = attrInt(n, "transA", 0) != 0, transB = attrInt(n, "transB", 0) != 0;
  ValueId a = tensor(n, 0);
  if (transA) a = emit(n, "transpose", {a}, {{"perm", std::vector<int64_t>{1, 0}}});
  const Val& bv = val(n, 1);
  ValueId y;
  if (bv.constant && alpha == 1.0) {
    at::Tensor w = transB ? *bv.constant : bv.constant->t().contiguous();  // dense wants [N, K]
    std::vector<ValueId> inputs{a, m_graph.addConstant(n.input(1) + "_nk", ts::toKilnTensor(w))};
    if (has(n, 2) && beta == 1.0 && shapeOf(n, 2).size() == 1) {
      inputs.push_back(tensor(n, 2));
      return setOut(n, emit(n, "dense", inputs));
    }
    y = emit(n, "dense", inputs);
  } else {
    ValueId b = tensor(n, 1);
    if (transB) b = emit(n, "transpose", {b}, {{"perm", std::vector<int64_t>{1, 0}}});
    y = emit(n, "matmul", {a, b});
    if (alpha != 1.0) y = emit(n, "mul", {y, scalar(alpha, type(y).dtype)});
  }
  if (has(n, 2) && beta != 0.0) {
    ValueId c = tensor(n, 2);
    if (beta != 1.0) c = emit(n, "mul", {c, scalar(beta, type(c).dtype)});
    y = emit(n, "add", {y, c});
  }
  setOut(n, y);
}

void OnnxImporter::gather(const Node& n) {
  ValueId data = tensor(n, 0);
  int64_t rank = type(data).rank();
  int64_t axis = attrInt(n, "axis", 0);
  if (axis < 0) axis += rank;
  const Val& idx = val(n, 1);
  if (idx.constant && idx.constant->dim() == 0) {  // x[..., i, ...]: a slice with the axis dropped
    int64_t i = idx.constant->item<int64_t>();
    if (i < 0) i += type(data).shape[axis];
    Shape s = type(data).shape;
    ValueId y = slice(n, data, axis, i, i + 1, 1);
    s.erase(s.begin() + axis);
    return setOut(n, reshape(n, y, s));
  }
  setOut(n, emit(n, "take", {data, tensor(n, 1)}, {{"axis", axis}}));
}

void OnnxImporter::sliceOp(const Node& n) {
  ValueId x = tensor(n, 0);
  std::vector<int64_t> starts = ints(n, 1), ends = ints(n, 2);
  std::vector<int64_t> axes = has(n, 3) ? ints(n, 3) : std::vector<int64_t>{};
  std::vector<int64_t> steps = has(n, 4) ? ints(n, 4) : std::vector<int64_t>(starts.size(), 1);
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t rank = type(x).rank(), axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    int64_t dim = type(x).shape[axis];
    if (steps[i] <= 0) fail(n, "negative slice steps are not supported");
    auto clampIndex = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
    int64_t b = clampIndex(starts[i]), e = std::max(b, clampIndex(ends[i]));
    x = slice(n, x, axis, b, e, steps[i]);
  }
  setOut(n, x);
}

void OnnxImporter::reduce(const Node& n, const std::string& op) {
  ValueId x = tensor(n, 0);
  // ReduceSum takes axes as an input from opset 13, the others from opset 18.
  std::vector<int64_t> axes = axesOf(n, 1);
  if (axes.empty()) {
    if (attrInt(n, "noop_with_empty_axes", 0)) return setOut(n, x);
    for (int64_t d = 0; d < type(x).rank(); ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = a < 0 ? a + type(x).rank() : a;
  setOut(n, emit(n, op, {x}, {{"axes", axes}, {"keepdims", attrInt(n, "keepdims", 1)}}));
}

void OnnxImporter::clip(const Node& n) {
  double lo = -3.4028234663852886e38, hi = 3.4028234663852886e38;
  if (m_opset < 11) {
    lo = attrFloat(n, "min", lo);
    hi = attrFloat(n, "max", hi);
  } else {
    if (has(n, 1)) lo = constant(n, 1).item<double>();
    if (has(n, 2)) hi = constant(n, 2).item<double>();
  }
  setOut(n, emit(n, "clamp", {tensor(n, 0)}, {{"min", lo}, {"max", hi}}));
}

void OnnxImporter::split(const Node& n) {
  ValueId x = tensor(n, 0);
  int64_t axis = attrInt(n, "axis", 0);
  if (axis < 0) axis += type(x).rank();
  int64_t dim = type(x).shape[axis];
  std::vector<int64_t> sizes = has(n, 1) ? ints(n, 1) : attrInts(n, "split");
  if (sizes.empty()) sizes.assign(n.output_size(), dim / std::max(1, n.output_size()));
  int64_t offset = 0;
  for (int i = 0; i < n.output_size(); ++i) {
    setOut(n, slice(n, x, axis, offset, offset + sizes[i], 1), i);
    offset += sizes[i];
  }
}

/// ATen evaluation of shape arithmetic on constants; nullopt when the op is not foldable here.
std::optional<at::Tensor> OnnxImporter::fold(const Node& n, const std::vector<at::Tensor>& in, int64_t opset) {
  const std::string& op = n.op_type();
  auto attrI = [&](const char* name, int64_t fallback) {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return a.i();
    }
    return fallback;
  };
  auto axesFrom = [&](size_t i) {
    std::vector<int64_t> axes;
    if (in.size() > i) axes = toLongs(in[i]);
    for (const auto& a : n.attribute()) {
      if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
    }
    return axes;
  };
  if (op == "Identity") return in[0];
  if (op == "Shape") return at::tensor(in[0].sizes().vec(), at::kLong);
  if (op == "Gather") {
    int64_t axis = attrI("axis", 0);
    axis = axis < 0 ? axis + in[0].dim() : axis;
    at::Tensor idx = in[1].to(at::kLong);
    idx = at::where(idx < 0, idx + in[0].size(axis), idx);
    return at::index_select(in[0], axis, idx.reshape({-1})).reshape([&] {
    std::vector<int64_t> s(in[0].sizes().begin(), in[0].sizes().begin() + axis);
    for (int64_t d : in[1].sizes()) s.push_back(d);
    s.insert(s.end(), in[0].sizes().begin() + axis + 1, in[0].sizes().end());
    return s;
  }());
  }
  if (op == "Unsqueeze") {
    at::Tensor t = in[0];
    std::vector<int64_t> axes = axesFrom(1);
    int64_t rank = t.dim() + static_cast<int64_t>(axes.size());
    for (int64_t& a : axes) a = a < 0 ? a + rank : a;
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) t = t.unsqueeze(a);
    return t;
  }
  if (op == "Squeeze") {
    std::vector<int64_t> axes = axesFrom(1);
    if (axes.empty()) return in[0].squeeze();
    at::Tensor t = in[0];
    for (int64_t& a : axes) a = a < 0 ? a + t.dim() : a;
    std::sort(axes.rbegin(), axes.rend());
    for (int64_t a : axes) t = t.squeeze(a);
    return t;
  }
  if (op == "Concat") return at::cat(in, attrI("axis", 0));
  if (op == "Cast") return in[0].to(torchType(static_cast<int32_t>(attrI("to", 1))));
  if (op == "Add") return at::add(in[0], in[1]);
  if (op == "Sub") return at::sub(in[0], in[1]);
  if (op == "Mul") return at::mul(in[0], in[1]);
  if (op == "Div") {
    if (at::isIntegralType(in[0].scalar_type(), true)) return at::div(in[0], in[1], "trunc");
    return at::div(in[0], in[1]);
  }
  if (op == "Equal") return at::eq(in[0], in[1]);
  if (op == "Where") return at::where(in[0], in[1], in[2]);
  if (op == "Sqrt") return at::sqrt(in[0]);
  if (op == "Neg") return at::neg(in[0]);
  if (op == "Range") return at::arange(in[0].item(), in[1].item(), in[2].item(), in[0].options());
  if (op == "ConstantOfShape") {
    at::Tensor value = at::zeros({1}, at::kFloat);
    for (const auto& a : n.attribute()) {
      if (a.name() == "value") value = tensorFrom(a.t());
    }
    return at::full(toLongs(in[0]), value.reshape({}).item(), value.options());
  }
  if (op == "Reshape") {
    std::vector<int64_t> shape = toLongs(in[1]);
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && attrI("allowzero", 0) == 0) shape[i] = in[0].size(static_cast<int64_t>(i));
    }
    return in[0].reshape(shape);
  }
  if (op == "Expand") return in[0].expand(at::infer_size(in[0].sizes(), toLongs(in[1]))).contiguous();
  if (op == "Slice" && opset >= 10) {
    at::Tensor t = in[0];
    auto v = [&](size_t i) { return toLongs(in[i]); };
    std::vector<int64_t> starts = v(1), ends = v(2);
    std::vector<int64_t> axes = in.size() > 3 ? v(3) : std::vector<int64_t>{};
    std::vector<int64_t> steps = in.size() > 4 ? v(4) : std::vector<int64_t>(starts.size(), 1);
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
      if (steps[i] <= 0) return std::nullopt;
      int64_t dim = t.size(axis);
      auto clampIndex = [dim](int64_t x) { return std::clamp<int64_t>(x < 0 ? x + dim : x, 0, dim); };
      t = t.slice(axis, clampIndex(starts[i]), std::max(clampIndex(starts[i]), clampIndex(ends[i])), steps[i]);
    }
    return t.contiguous();
  }
  return std::nullopt;
}

const std::map<std::string, OnnxImporter::Handler>& OnnxImporter::handlers() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, Handler>();
    auto& h = *t;
    for (const auto& [onnxOp, kilnOp] : std::vector<std::pair<const char*, const char*>>{
             {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}, {"Exp", "exp"}, {"Log", "log"},
             {"Sqrt", "sqrt"}, {"Erf", "erf"}, {"Neg", "neg"}, {"Abs", "abs"}, {"HardSwish", "hardswish"}}) {
      std::string k = kilnOp;
      h[onnxOp] = [k](OnnxImporter& im, const Node& n) { im.unary(n, k); };
    }
    for (const auto& [onnxOp, kilnOp] : std::vector<std::pair<const char*, const char*>>{
             {"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}, {"Pow", "pow"}, {"Max", "maximum"},
             {"Min", "minimum"}, {"Equal", "equal"}, {"Less", "less"}, {"Greater", "greater"},
             {"LessOrEqual", "less_equal"}, {"GreaterOrEqual", "greater_equal"}}) {
      std::string k = kilnOp;
      h[onnxOp] = [k](OnnxImporter& im, const Node& n) { im.binary(n, k); };
    }
    h["Identity"] = [](OnnxImporter& im, const Node& n) { im.m_values[n.output(0)] = im.val(n, 0); };
    h["Dropout"] = h["Identity"];
    h["Constant"] = [](OnnxImporter& im, const Node& n) {
      const onnx::AttributeProto* a = im.attr(n, "value");
      if (!a) im.fail(n, "only the 'value' form is supported");
      im.setConst(n, tensorFrom(a->t()));
    };
    h["Shape"] = [](OnnxImporter& im, const Node& n) { im.setConst(n, at::tensor(im.shapeOf(n, 0), at::kLong)); };
    h["Conv"] = [](OnnxImporter& im, const Node& n) { im.conv(n); };
    h["MaxPool"] = [](OnnxImporter& im, const Node& n) { im.pool(n, true); };
    h["AveragePool"] = [](OnnxImporter& im, const Node& n) { im.pool(n, false); };
    h["GlobalAveragePool"] = [](OnnxImporter& im, const Node& n) {
      im.setOut(n, im.emit(n, "adaptive_avg_pool2d", {im.tensor(n, 0)}, {{"output_size", std::vector<int64_t>{1, 1}}}));
    };
    h["BatchNormalization"] = [](OnnxImporter& im, const Node& n) {
      im.setOut(n, im.emit(n, "batch_norm", {im.tensor(n, 0), im.tensor(n, 1), im.tensor(n, 2), im.tensor(n, 3), im.tensor(n, 4)},
                           {{"epsilon", im.attrFloat(n, "epsilon", 1e-5)}}));
    };
    h["Gemm"] = [](OnnxImporter& im, const Node& n) { im.gemm(n); };
    h["MatMul"] = [](OnnxImporter& im, const Node& n) { im.setOut(n, im.emit(n, "matmul", {im.tensor(n, 0), im.tensor(n, 1)})); };
    h["Clip"] = [](OnnxImporter& im, const Node& n) { im.clip(n); };
    h["LeakyRelu"] = [](OnnxImporter& im, const Node& n) {
      im.setOut(n, im.emit(n, "leaky_relu", {im.tensor(n, 0)}, {{"alpha", im.attrFloat(n, "alpha", 0.01)}}));
    };
    h["Gelu"] = [](OnnxImporter& im, const Node& n) {  // opset 20
      std::string approximate = im.attrString(n, "approximate", "none");
      if (approximate != "none" && approximate != "tanh") im.fail(n, "unknown approximation '" + approximate + "'");
      im.setOut(n, im.emit(n, "gelu", {im.tensor(n, 0)}, {{"approximate", approximate}}));
    };
    h["HardSigmoid"] = [](OnnxImporter& im, const Node& n) {
      if (std::abs(im.attrFloat(n, "alpha", 0.2) - 1.0 / 6) > 1e-6 || std::abs(im.attrFloat(n, "beta", 0.5) - 0.5) > 1e-6)
        im.fail(n, "only alpha = 1/6, beta = 1/2 (PyTorch's hardsigmoid) is supported");
      im.unary(n, "hardsigmoid");
    };
    h["LayerNormalization"] = [](OnnxImporter& im, const Node& n) {  // opset 17
      // Y = (X − mean) · rsqrt(var + ε) · Scale + B over the axes from `axis` on, as the TorchScript
      // importer writes layer_norm; Mean and InvStdDev (keepdims) when the model reads them.
      ValueId x = im.tensor(n, 0);
      const core::TensorType xt = im.type(x);
      if (xt.dtype != DType::Float32 && xt.dtype != DType::Float64) im.fail(n, "expects a float input, got " + xt.str());
      int64_t axis = im.attrInt(n, "axis", -1);
      if (axis < 0) axis += xt.rank();
      if (axis < 0 || axis >= xt.rank()) im.fail(n, "axis out of range for " + xt.str(), ErrorKind::InvalidModel);
      std::vector<int64_t> axes;
      for (int64_t d = axis; d < xt.rank(); ++d) axes.push_back(d);
      Attrs reduce{{"axes", axes}, {"keepdims", int64_t{1}}};
      ValueId mean = im.emit(n, "mean", {x}, reduce);
      ValueId centered = im.emit(n, "sub", {x, mean});
      ValueId var = im.emit(n, "mean", {im.emit(n, "mul", {centered, centered})}, reduce);
      ValueId rstd = im.emit(n, "rsqrt", {im.emit(n, "add", {var, im.scalar(im.attrFloat(n, "epsilon", 1e-5), xt.dtype)})});
      ValueId y = im.emit(n, "mul", {centered, rstd});
      y = im.emit(n, "mul", {y, im.tensor(n, 1)});
      if (im.has(n, 2)) y = im.emit(n, "add", {y, im.tensor(n, 2)});
      im.setOut(n, y);
      if (n.output_size() > 1 && !n.output(1).empty()) im.setOut(n, mean, 1);
      if (n.output_size() > 2 && !n.output(2).empty()) im.setOut(n, rstd, 2);
    };
    h["Softmax"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      int64_t rank = im.type(x).rank(), axis = im.attrInt(n, "axis", im.m_opset >= 13 ? -1 : 1);
      axis = axis < 0 ? axis + rank : axis;
      if (im.m_opset < 13 && axis != rank - 1) im.fail(n, "opset < 13 softmax over several axes is not supported");
      im.setOut(n, im.emit(n, "softmax", {x}, {{"axis", axis}}));
    };
    h["Flatten"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      Shape s = im.type(x).shape;
      int64_t axis = im.attrInt(n, "axis", 1);
      axis = axis < 0 ? axis + static_cast<int64_t>(s.size()) : axis;
      int64_t outer = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= s[d];
      im.setOut(n, im.reshape(n, x, {outer, im.type(x).numel() / std::max<int64_t>(outer, 1)}));
    };
    h["Reshape"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      Shape shape = im.ints(n, 1), in = im.type(x).shape;
      int64_t known = 1, inferAt = -1;
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0 && im.attrInt(n, "allowzero", 0) == 0) shape[i] = in[i];
        if (shape[i] == -1) inferAt = static_cast<int64_t>(i);
        else known *= shape[i];
      }
      if (inferAt >= 0) shape[inferAt] = im.type(x).numel() / std::max<int64_t>(known, 1);
      im.setOut(n, im.reshape(n, x, shape));
    };
    h["Transpose"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      std::vector<int64_t> perm = im.attrInts(n, "perm");
      if (perm.empty()) {
        for (int64_t d = im.type(x).rank() - 1; d >= 0; --d) perm.push_back(d);
      }
      im.setOut(n, im.emit(n, "transpose", {x}, {{"perm", perm}}));
    };
    h["Concat"] = [](OnnxImporter& im, const Node& n) {
      std::vector<ValueId> xs;
      for (int i = 0; i < n.input_size(); ++i) xs.push_back(im.tensor(n, i));
      int64_t axis = im.attrInt(n, "axis", 0);
      if (axis < 0) axis += im.type(xs[0]).rank();
      im.setOut(n, xs.size() == 1 ? xs[0] : im.emit(n, "concat", xs, {{"axis", axis}}));
    };
    h["Unsqueeze"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      Shape s = im.type(x).shape;
      std::vector<int64_t> axes = im.axesOf(n, 1);
      int64_t rank = static_cast<int64_t>(s.size() + axes.size());
      for (int64_t& a : axes) a = a < 0 ? a + rank : a;
      std::sort(axes.begin(), axes.end());
      for (int64_t a : axes) s.insert(s.begin() + a, 1);
      im.setOut(n, im.reshape(n, x, s));
    };
    h["Squeeze"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      Shape s = im.type(x).shape, out;
      std::vector<int64_t> axes = im.axesOf(n, 1);
      for (int64_t& a : axes) a = a < 0 ? a + static_cast<int64_t>(s.size()) : a;
      for (size_t d = 0; d < s.size(); ++d) {
        bool drop = axes.empty() ? s[d] == 1 : std::count(axes.begin(), axes.end(), static_cast<int64_t>(d)) > 0;
        if (!drop) out.push_back(s[d]);
      }
      im.setOut(n, im.reshape(n, x, out));
    };
    h["Gather"] = [](OnnxImporter& im, const Node& n) { im.gather(n); };
    h["Slice"] = [](OnnxImporter& im, const Node& n) { im.sliceOp(n); };
    h["Pad"] = [](OnnxImporter& im, const Node& n) { im.padOp(n); };
    h["Split"] = [](OnnxImporter& im, const Node& n) { im.split(n); };
    h["ReduceMean"] = [](OnnxImporter& im, const Node& n) { im.reduce(n, "mean"); };
    h["ReduceSum"] = [](OnnxImporter& im, const Node& n) { im.reduce(n, "sum"); };
    h["ReduceMax"] = [](OnnxImporter& im, const Node& n) { im.reduce(n, "max"); };
    h["ReduceMin"] = [](OnnxImporter& im, const Node& n) { im.reduce(n, "min"); };
    h["Cast"] = [](OnnxImporter& im, const Node& n) {
      DType to = ts::toKilnDType(torchType(static_cast<int32_t>(im.attrInt(n, "to", 1))));
      ValueId x = im.tensor(n, 0);
      im.setOut(n, im.type(x).dtype == to ? x
                                          : im.emit(n, "cast", {x}, {{"dtype", std::string(runtime::dtypeName(to))}}));
    };
    h["Where"] = [](OnnxImporter& im, const Node& n) {
      im.setOut(n, im.emit(n, "where", {im.tensor(n, 0), im.tensor(n, 1), im.tensor(n, 2)}));
    };
    h["Expand"] = [](OnnxImporter& im, const Node& n) {
      ValueId x = im.tensor(n, 0);
      Shape target = core::broadcastShapes(im.type(x).shape, im.ints(n, 1));
      im.setOut(n, target == im.type(x).shape ? x : im.emit(n, "broadcast_to", {x}, {{"shape", target}}));
    };
    return t;
  }();
  return *table;
}

void OnnxImporter::importNodes() {
  for (const onnx::NodeProto& n : m_model.graph().node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      throw Error("onnx::" + n.op_type() + " of domain '" + n.domain() + "' is not supported (node \"" + n.name() + "\")",
                  ErrorKind::Unsupported);
    std::vector<at::Tensor> constants;
    bool allConstant = n.input_size() > 0;
    for (int i = 0; i < n.input_size() && allConstant; ++i) {
      if (n.input(i).empty()) continue;
      const Val& v = val(n, i);
      if (v.constant) constants.push_back(*v.constant);
      else allConstant = false;
    }
    if (allConstant && n.output_size() == 1) {
      std::optional<at::Tensor> folded;
      try {
        folded = fold(n, constants, m_opset);
      } catch (const Error&) {
        throw;
      } catch (const c10::Error& e) {
        std::string what = e.what_without_backtrace();
        fail(n, "cannot evaluate at import time: " + what.substr(0, what.find('\n')), ErrorKind::InvalidModel);
      }
      if (folded) {
        setConst(n, *folded);
        continue;
      }
    }
    auto it = handlers().find(n.op_type());
    if (it == handlers().end())
      throw Error("onnx::" + n.op_type() + " is not supported (node \"" + n.name() + "\")", ErrorKind::Unsupported);
    it->second(*this, n);
  }
}

ImportedModel OnnxImporter::run(const ImportOptions& options) {
  const onnx::GraphProto& g = m_model.graph();
  m_opset = opsetOf(m_model);
  for (const onnx::TensorProto& init : g.initializer()) m_values[init.name()] = Val{-1, tensorFrom(init)};
  std::vector<InputSpec> specs;
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (m_values.count(in.name())) continue;  // an initializer listed as input
    InputSpec spec;
    spec.name = in.name();
    const auto& tt = in.type().tensor_type();
    spec.dtype = ts::toKilnDType(torchType(tt.elem_type()));
    for (const auto& d : tt.shape().dim()) spec.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    specs.push_back(spec);
  }
  const std::vector<InputSpec> declared = specs;
  if (!options.inputs.empty()) {
    if (options.inputs.size() != specs.size())
      throw Error(m_path + ": the model takes " + std::to_string(specs.size()) + " input(s), got " +
                      std::to_string(options.inputs.size()), ErrorKind::InvalidInput);
    for (size_t i = 0; i < specs.size(); ++i) {
      const InputSpec& given = options.inputs[i];
      // The element type and rank of a graph input are fixed by the model; only its dimensions
      // (the batch, a sequence length) may differ from what it declares.
      if (given.dtype != specs[i].dtype || given.shape.size() != specs[i].shape.size())
        throw Error(m_path + ": input '" + specs[i].name + "' is " + std::string(runtime::dtypeName(given.dtype)) +
                        runtime::shapeString(given.shape) + ", the model expects " +
                        std::string(runtime::dtypeName(specs[i].dtype)) + runtime::shapeString(specs[i].shape),
                    ErrorKind::InvalidInput);
      specs[i].shape = given.shape;
      specs[i].dtype = given.dtype;
    }
  }
  for (const InputSpec& spec : specs) {
    if (std::any_of(spec.shape.begin(), spec.shape.end(), [](int64_t d) { return d < 0; }))
      throw Error(m_path + ": input '" + spec.name + "' has symbolic dimensions; pass the input shapes explicitly",
                  ErrorKind::InvalidInput);
    m_values[spec.name] = Val{m_graph.addInput(spec.name, core::TensorType{spec.dtype, spec.shape}), std::nullopt};
  }
  try {
    importNodes();
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    // Other dimensions than the model declares are the likely culprit of a shape error: say so.
    if (e.kind() != ErrorKind::InvalidInput && e.kind() != ErrorKind::InvalidModel) throw;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].shape == declared[i].shape) continue;
      throw Error(m_path + ": input '" + specs[i].name + "' has shape " + runtime::shapeString(specs[i].shape) +
                      ", the model declares " + runtime::shapeString(declared[i].shape) +
                      " and does not import for it: " + e.what(),
                  ErrorKind::InvalidInput);
    }
    throw;
  }
  std::vector<ValueId> outputs;
  std::set<ValueId> seen;
  for (const onnx::ValueInfoProto& out : g.output()) {
    auto found = m_values.find(out.name());
    if (found == m_values.end()) throw Error(m_path + ": output '" + out.name() + "' is never computed", ErrorKind::InvalidModel);
    ValueId id = found->second.constant ? m_graph.addConstant(out.name(), ts::toKilnTensor(*found->second.constant))
                                        : found->second.id;
    if (m_graph.value(id).producer < 0 || !seen.insert(id).second)
      id = m_graph.addNode("copy", {id}, {}, {}, out.name() + "_copy")[0];
    seen.insert(id);
    outputs.push_back(id);
  }
  m_graph.setOutputs(std::move(outputs));
  ImportedModel result;
  result.graph = std::move(m_graph);
  result.inputs = std::move(specs);
  result.description = "onnx " + m_model.producer_name() + " " + m_model.producer_version() + ", opset " +
                       std::to_string(m_opset);
  return result;
}

}  // namespace

bool isOnnxFile(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".onnx";
}

ImportedModel importOnnx(const std::string& path, const ImportOptions& options) {
  onnx::ModelProto model = loadProto(path);
  try {
    return OnnxImporter(path, model).run(options);
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw Error(what.substr(0, what.find('\n')), ErrorKind::InvalidModel);
  }
}

std::vector<InputSpec> readOnnxInputSpecs(const std::string& path) {
  onnx::ModelProto model = loadProto(path);
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<InputSpec> specs;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name())) continue;
    InputSpec spec;
    spec.name = in.name();
    spec.dtype = ts::toKilnDType(torchType(in.type().tensor_type().elem_type()));
    for (const auto& d : in.type().tensor_type().shape().dim()) spec.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    specs.push_back(spec);
  }
  return specs;
}

std::vector<std::string> supportedOnnxOps() {
  std::vector<std::string> ops;
  for (const auto& [name, handler] : OnnxImporter::handlers()) ops.push_back(name);
  return ops;  // std::map: sorted
}

}  // namespace kiln::importers
