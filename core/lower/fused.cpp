// Lowering of fused groups (core/lower/lower.h, "fused groups"): one PrimFunc per group.
//
// Every member of a group except the anchor is an element op: its value at an output index is
// an expression of its operands' values at (remapped) indices. GroupEvaluator builds that
// expression for the group's root, recursively: a value computed outside the group is a Load
// from its parameter buffer (broadcast operands read through index 0 along size-1 axes), a value
// computed inside is its op's per-element expression (ops_elementwise.cpp; comparisons, cast
// and where from ops_indexing.cpp, a bool as its stored byte; shared with the standalone
// lowerings) over its operands. Injective ops remap the index: transpose permutes axes, reshape
// goes through the flat (row-major) index, layout_transform recovers the channel from its
// (blocked) output index and splits it again for its (blocked) input, take reads the row at that
// index from its indices (a load inside the index).
//
// Four shapes of kernel:
// - Anchored (conv2d, dense, matmul, pooling first): the anchor's own lowering runs with
//   OpContext::epilogue evaluating the group's root given the anchor's value at an output index,
//   so the whole chain happens in registers before the single store. The index may end in a
//   Ramp when the anchor stores vectors: loads along that axis become vector loads (a Ramp
//   offset), loads constant along it become a scalar Load broadcast to the lanes. Should an
//   anchor lowering not call the epilogue, a second loop nest applies it in place (correct,
//   one extra pass over the output).
// - Element chain: one loop nest over the root's output, built serial and scalar and scheduled by
//   its sketch (nest_search.h: vectors, unrolling, the parallel loop; a record of its tuning key
//   chooses the annotation; nests of every dtype have one). When nothing in the group needs
//   per-axis indices (no broadcasting, transposes, gathers or per-channel ops) the nest is one
//   flat loop. An element op outside any group, of any dtype, is lowered the same way, as a
//   group of one (lowerAsGroupOfOne).
// - Concat root: one loop nest per concat input, each evaluating that input's expression, built
//   serial and scalar; the element nest's sketch schedules each of them alike, under the group's
//   "nest:" key (nest_search.h applyConcatNestSketch). A concat outside any group is a group of one.
// - Reduction root (mean, sum): the reduction's own lowering runs with OpContext::prologue
//   evaluating its input at each position it reads (per axis, or flat when canUseFlat holds for
//   the ops before the root), so e.g. mean(relu(add(x, y))) reads x and y once and writes only
//   the means. Reductions along rows are row nests (nest_search.h) with a tuning key made from
//   the group's workload.
// A reduction or softmax outside any group is lowered as a group of one too (lowerAsGroupOfOne):
// a reduction as the root of its group, softmax by its own lowering over the group's parameters;
// both get a row nest's key.
#include <algorithm>
#include <map>
#include <set>

#include "core/ir/op_registry.h"
#include "core/ir/printer.h"
#include "core/lower/conv_search.h"
#include "core/lower/lower.h"
#include "core/lower/lower_internal.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "core/tir/schedule.h"
#include "core/tir/simplify.h"
#include "core/tir/vectorize.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Where a value is read: one index Expr per axis of `shape` (the innermost may be a Ramp of
/// `lanes` lanes). `nest`/`fromNest`, when set, say that axis d is the loop nest's axis
/// fromNest[d] (-1: index 0), which lets loads use the nest's cheaper offsets.
struct Index {
  Shape shape;
  std::vector<Expr> axes;
  int lanes = 1;
  const LoopNest* nest = nullptr;
  std::vector<int> fromNest;
  bool flat = false;  // shape/axes are the flat view [numel] of every value (see canUseFlat)
  /// When defined, the flat row-major position of this index in a value of `shape` itself (a
  /// row reduction's input, GroupLowering::rowwise): loads of that shape read there, whatever
  /// `axes` holds for the reduced axes.
  Expr offset{};
};

/// Σ axes[d]·strides[d], where an axis may be a Ramp: a scalar, or a Ramp when the sum varies
/// across lanes.
Expr affineOffset(const std::vector<Expr>& axes, const std::vector<int64_t>& strides) {
  Expr base = i64(0), laneStride = i64(0);
  int lanes = 1;
  for (size_t d = 0; d < axes.size(); ++d) {
    if (strides[d] == 0) continue;
    if (const auto* ramp = axes[d].as<Ramp>()) {
      base = base + ramp->base * strides[d];
      laneStride = laneStride + ramp->stride * strides[d];
      lanes = ramp->lanes;
      continue;
    }
    KILN_ASSERT(!axes[d].type().isVector(), "fused epilogue: an index axis is a vector but not a Ramp");
    base = base + axes[d] * strides[d];
  }
  base = simplify(base);
  laneStride = simplify(laneStride);
  const int64_t* s = asConstInt(laneStride);
  if (lanes == 1 || (s && *s == 0)) return base;
  return Ramp::make(base, laneStride, lanes);
}

class GroupEvaluator {
 public:
  GroupEvaluator(const Graph& graph, const FusedGroup& group, const std::map<ValueId, Buffer>& params)
      : m_graph(graph), m_group(group), m_params(params) {}

  /// `value` stands for `v` at the index of the next evaluation (the anchor's result).
  void seed(ValueId v, Expr value) { m_memo[v] = std::move(value); }
  void clearMemo() { m_memo.clear(); }

  /// The value of `v` at `idx` (an index into v's shape), with idx.lanes lanes. Values at the
  /// evaluation's primary index (no remapping yet) are computed once and reused.
  Expr valueAt(ValueId v, const Index& idx, bool primary = true) {
    if (primary) {
      auto it = m_memo.find(v);
      if (it != m_memo.end()) return it->second;
    }
    Expr e = compute(v, idx, primary);
    if (primary) m_memo[v] = e;
    return e;
  }

 private:
  bool inGroup(NodeId n) const { return n >= m_group.first && n < m_group.end; }

  Expr compute(ValueId v, const Index& idx, bool primary) {
    NodeId p = m_graph.value(v).producer;
    if (p < 0 || !inGroup(p)) return load(m_params.at(v), m_graph.type(v).shape, idx);
    const Node& node = m_graph.node(p);
    OpContext ctx = nodeContext(m_graph, p);
    const std::string& op = node.op;
    if (op == "copy") return valueAt(node.inputs[0], idx, primary);
    if (isUnaryElementwise(op)) return unaryExpr(ctx, valueAt(node.inputs[0], idx, primary));
    if (isBinaryElementwise(op)) {
      Expr a = valueAt(node.inputs[0], broadcastTo(idx, m_graph.type(node.inputs[0]).shape), primary);
      Expr b = valueAt(node.inputs[1], broadcastTo(idx, m_graph.type(node.inputs[1]).shape), primary);
      return binaryExpr(op, a, b);
    }
    if (isComparison(op)) {
      Expr a = valueAt(node.inputs[0], broadcastTo(idx, m_graph.type(node.inputs[0]).shape), primary);
      Expr b = valueAt(node.inputs[1], broadcastTo(idx, m_graph.type(node.inputs[1]).shape), primary);
      return compareExpr(op, a, b);
    }
    if (op == "cast")
      return castExpr(m_graph.type(node.outputs[0]).dtype, valueAt(node.inputs[0], idx, primary));
    if (op == "where") {
      Expr operand[3];
      for (int i = 0; i < 3; ++i)
        operand[i] = valueAt(node.inputs[i], broadcastTo(idx, m_graph.type(node.inputs[i]).shape), primary);
      return select(boolCondition(operand[0]), operand[1], operand[2]);
    }
    if (op == "broadcast_to")
      return valueAt(node.inputs[0], broadcastTo(idx, m_graph.type(node.inputs[0]).shape), primary);
    if (op == "take") return valueAt(node.inputs[0], taken(idx, node), false);
    if (op == "qnn.dequantize") return qnnDequantizeExpr(node.attrs, valueAt(node.inputs[0], idx, primary));
    if (op == "qnn.add")
      return qnnAddExpr(node.attrs, valueAt(node.inputs[0], idx, primary),
                        valueAt(node.inputs[1], idx, primary));
    if (op == "qnn.quantize") {
      const Shape& in = m_graph.type(node.inputs[0]).shape;
      if (static_cast<int64_t>(in.size()) == m_graph.type(node.outputs[0]).rank())
        return qnnQuantizeExpr(node.attrs, valueAt(node.inputs[0], idx, primary));
      KILN_ASSERT(!idx.flat && idx.lanes == 1, "fused packing qnn.quantize of a flat or vector index");
      return qnnQuantizePacked(node.attrs, in, idx.shape[4], idx.axes, [&](const std::vector<Expr>& at) {
        return valueAt(node.inputs[0], Index{in, at, 1, nullptr, {}, false}, false);
      });
    }
    if (op == "batch_norm") return batchNorm(node, idx, primary);
    if (op == "reshape")
      return valueAt(node.inputs[0], reshaped(idx, m_graph.type(node.inputs[0]).shape), false);
    if (op == "transpose") return valueAt(node.inputs[0], transposed(idx, node), false);
    if (op == "layout_transform")
      return valueAt(node.inputs[0], relayouted(idx, node, m_graph.type(node.inputs[0]).shape), false);
    if (op == "strided_slice")
      return valueAt(node.inputs[0], sliced(idx, node, m_graph.type(node.inputs[0]).shape), false);
    KILN_ASSERT(false, "fused group @" + m_group.name + ": no per-element lowering of '" + op + "'");
    return Expr();
  }

  Expr load(const Buffer& buffer, const Shape& shape, const Index& idx) {
    Expr offset;
    if (idx.flat) {
      offset = idx.axes[0];
    } else if (idx.offset.defined() && shape == idx.shape) {
      offset = idx.offset;
    } else if (idx.nest && !idx.fromNest.empty()) {
      std::vector<int64_t> nestStrides(idx.nest->rank(), 0);
      std::vector<int64_t> strides = contiguousStrides(shape);
      for (size_t d = 0; d < shape.size(); ++d)
        if (idx.fromNest[d] >= 0) nestStrides[idx.fromNest[d]] += strides[d];
      offset = idx.nest->offset(nestStrides);
    } else {
      offset = affineOffset(idx.axes, contiguousStrides(shape));
    }
    Expr value = Load::make(buffer, offset);
    if (idx.lanes > 1 && !value.type().isVector()) value = Broadcast::make(value, idx.lanes);
    return value;
  }

  /// `idx` (an output index) read by an operand of shape `in` under numpy broadcasting. A single
  /// element is read at 0 from a flat index too (canUseFlat).
  static Index broadcastTo(const Index& idx, const Shape& in) {
    if (idx.flat && runtime::numElements(in) == 1)
      return Index{in, std::vector<Expr>(in.size(), i64(0)), idx.lanes, nullptr, {}, false};
    if (idx.flat || in == idx.shape) {
      Index same = idx;
      if (!idx.flat) same.shape = in;
      return same;
    }
    Index r{in, {}, idx.lanes, idx.nest, {}, false};
    size_t lead = idx.shape.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d) {
      bool broadcast = in[d] == 1;
      r.axes.push_back(broadcast ? i64(0) : idx.axes[d + lead]);
      if (!idx.fromNest.empty()) r.fromNest.push_back(broadcast ? -1 : idx.fromNest[d + lead]);
    }
    return r;
  }

  /// Input index of transpose(perm): in[perm[d]] = out[d].
  static Index transposed(const Index& idx, const Node& node) {
    const auto& perm = node.attrs.getInts("perm");
    int64_t rank = static_cast<int64_t>(perm.size());
    Index r{Shape(rank), std::vector<Expr>(rank), idx.lanes, idx.nest, {}, false};
    if (!idx.fromNest.empty()) r.fromNest.assign(rank, -1);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t p = normalizeAxis(perm[d], rank);
      r.shape[p] = idx.shape[d];
      r.axes[p] = idx.axes[d];
      if (!idx.fromNest.empty()) r.fromNest[p] = idx.fromNest[d];
    }
    return r;
  }

  /// Input index of a reshape: the same flat position, split over the input's shape.
  static Index reshaped(const Index& idx, const Shape& in) {
    if (idx.flat) return idx;
    KILN_ASSERT(idx.lanes == 1, "fused reshape of a vector index");
    Expr flat = affineOffset(idx.axes, contiguousStrides(idx.shape));
    std::vector<int64_t> strides = contiguousStrides(in);
    Index r{in, {}, 1, nullptr, {}, false};
    for (size_t d = 0; d < in.size(); ++d) {
      Expr e = strides[d] == 1 ? flat : flat / i64(strides[d]);
      if (d > 0) e = e % i64(in[d]);
      r.axes.push_back(in[d] == 1 ? i64(0) : e);
    }
    return r;
  }

  /// Input index of strided_slice{begin, end, strides}: in[d] = begin[d] + out[d]·strides[d]
  /// (a Ramp stays a Ramp).
  static Index sliced(const Index& idx, const Node& node, const Shape& in) {
    KILN_ASSERT(!idx.flat, "fused strided_slice of a flat index");
    const auto &begin = node.attrs.getInts("begin"), &strides = node.attrs.getInts("strides");
    Index r{in, {}, idx.lanes, nullptr, {}, false};
    for (size_t d = 0; d < in.size(); ++d) {
      const Expr& axis = idx.axes[d];
      if (begin[d] == 0 && strides[d] == 1) {
        r.axes.push_back(axis);
      } else if (const auto* ramp = axis.as<Ramp>()) {
        Expr base = ramp->base * strides[d] + begin[d];
        r.axes.push_back(Ramp::make(base, ramp->stride * strides[d], ramp->lanes));
      } else {
        r.axes.push_back(axis * strides[d] + begin[d]);
      }
    }
    return r;
  }

  /// Input index of take{axis} into its data: the output's axes before `axis`, the row the
  /// indices hold at the output's next rank(indices) axes (takeIndex: wrapped and clamped), then
  /// the output's remaining axes.
  Index taken(const Index& idx, const Node& node) {
    KILN_ASSERT(!idx.flat && idx.lanes == 1, "fused take of a flat or vector index");
    const Shape &data = m_graph.type(node.inputs[0]).shape, &indices = m_graph.type(node.inputs[1]).shape;
    const auto rank = static_cast<int64_t>(data.size()), rankIdx = static_cast<int64_t>(indices.size());
    const int64_t axis = normalizeAxis(node.attrs.getInt("axis", 0), rank);
    Index at{indices, {}, 1, nullptr, {}, false};
    for (int64_t d = 0; d < rankIdx; ++d) at.axes.push_back(idx.axes[axis + d]);
    Index r{data, {}, 1, nullptr, {}, false};
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis)
        r.axes.push_back(idx.axes[d]);
      else if (d == axis)
        r.axes.push_back(takeIndex(valueAt(node.inputs[1], at, false), data[axis]));
      else
        r.axes.push_back(idx.axes[d - 1 + rankIdx]);
    }
    return r;
  }

  /// Channel block of a layout attribute: "NCHW" → 0, "NCHW16c" → 16.
  static int64_t layoutBlock(const std::string& layout) {
    return layout == "NCHW" ? 0 : std::stoll(layout.substr(4, layout.size() - 5));
  }

  /// Input index of layout_transform{src, dst}: the channel c is recovered from the output
  /// index (c = cb·b + ci when dst is blocked) and split again for a blocked src.
  static Index relayouted(const Index& idx, const Node& node, const Shape& in) {
    KILN_ASSERT(idx.lanes == 1, "fused layout_transform of a vector index");
    int64_t src = layoutBlock(node.attrs.getString("src")), dst = layoutBlock(node.attrs.getString("dst"));
    Expr channel = dst ? idx.axes[1] * dst + idx.axes[4] : idx.axes[1];
    Index r{in, {idx.axes[0], channel, idx.axes[2], idx.axes[3]}, 1, nullptr, {}, false};
    if (src) {
      r.axes[1] = channel / i64(src);
      r.axes.push_back(channel % i64(src));
    }
    return r;
  }

  // (x - mean[c]) · gamma[c] / sqrt(var[c] + eps) + beta[c], c the index along axis 1.
  Expr batchNorm(const Node& node, const Index& idx, bool primary) {
    Expr x = valueAt(node.inputs[0], idx, primary);
    Index channel{{idx.shape.at(1)}, {idx.axes.at(1)}, idx.lanes, idx.nest, {}, false};
    if (!idx.fromNest.empty()) channel.fromNest = {idx.fromNest[1]};
    Expr params[4];
    for (int i = 0; i < 4; ++i) params[i] = valueAt(node.inputs[i + 1], channel, false);
    return batchNormExpr(x, params[0], params[1], params[2], params[3], node.attrs.getFloat("epsilon", 1e-5));
  }

  const Graph& m_graph;
  const FusedGroup& m_group;
  const std::map<ValueId, Buffer>& m_params;
  std::map<ValueId, Expr> m_memo;
};

/// A nest index over `nest` for a value of the nest's own shape.
Index nestIndex(const LoopNest& nest, const Shape& shape) {
  Index idx{shape, {}, 1, &nest, {}, false};
  for (size_t d = 0; d < nest.rank(); ++d) {
    idx.axes.push_back(nest[d]);
    idx.fromNest.push_back(static_cast<int>(d));
  }
  return idx;
}

/// True when every value of the group's nodes before `end` (its end by default), `skip` aside (the
/// anchor, whose epilogue is asked about), can be addressed by one flat index: only elementwise
/// ops, casts, reshapes, quantizing without packing, and binary ops, comparisons and where whose
/// operands are of their output's size or single elements from outside the group (read at 0).
bool canUseFlat(const Graph& graph, const FusedGroup& group, NodeId end = -1, NodeId skip = -1) {
  for (NodeId n = group.first; n < (end < 0 ? group.end : end); ++n) {
    if (n == skip) continue;
    const Node& node = graph.node(n);
    int64_t numel = graph.type(node.outputs[0]).numel();
    if (node.op == "copy" || node.op == "reshape" || node.op == "cast" || node.op == "qnn.dequantize" ||
        isUnaryElementwise(node.op))
      continue;
    const bool packing =
        node.op == "qnn.quantize" && graph.type(node.inputs[0]).rank() != graph.type(node.outputs[0]).rank();
    if (!isBinaryElementwise(node.op) && !isComparison(node.op) && node.op != "where" &&
        node.op != "qnn.add" && (node.op != "qnn.quantize" || packing))
      return false;
    for (ValueId v : node.inputs) {
      const NodeId p = graph.value(v).producer;
      const bool scalarParameter = graph.type(v).numel() == 1 && (p < group.first || p >= group.end);
      if (graph.type(v).numel() != numel && (node.op == "qnn.add" || !scalarParameter)) return false;
    }
  }
  return true;
}

class GroupLowering {
 public:
  GroupLowering(const Graph& graph, const FusedGroup& group, const LowerOptions& options)
      : m_graph(graph), m_group(group), m_options(options) {
    const Node& root = graph.node(m_group.root());
    KILN_ASSERT(root.outputs.size() == 1, "fused group @" + m_group.name + ": the root must have one output");
    m_out = root.outputs[0];
    // A group of one (lowerAsGroupOfOne) names its value, as the op's own lowering would.
    m_where = m_group.end - m_group.first == 1
                  ? nodeContext(graph, m_group.first).where
                  : " (@" + m_group.name + (root.location.empty() ? "" : " at " + root.location) + ")";
    for (NodeId n = m_group.first; n < m_group.end; ++n) {
      if (fusedRole(graph.node(n).op) == FusedRole::Anchor) m_anchor = n;
    }
  }

  PrimFunc run(const std::string& funcName) {
    std::set<std::string> used;
    auto param = [&used](const Value& v) {
      std::string base = sanitizeName(v.name), name = base;
      for (int i = 1; used.count(name); ++i) name = base + "_" + std::to_string(i);
      used.insert(name);
      return makeBuffer(name, Type::fromDType(v.type.dtype), v.type.shape);
    };
    PrimFunc func;
    func.name = funcName;
    for (ValueId v : groupInputs(m_graph, m_group)) {
      m_params[v] = param(m_graph.value(v));
      func.params.push_back(m_params[v]);
    }
    m_outBuffer = param(m_graph.value(m_out));
    func.params.push_back(m_outBuffer);
    func.numOutputs = 1;
    checkMembers();

    Stmt body;
    if (m_anchor >= 0)
      body = lowerAnchored();
    else if (fusedRole(m_graph.node(m_group.root()).op) == FusedRole::Reduce)
      body = lowerReduceRoot();
    else if (m_group.end - m_group.first == 1 &&
             fusedRole(m_graph.node(m_group.root()).op) == FusedRole::None)
      body = lowerLoneOp();
    else if (m_graph.node(m_group.root()).op == "concat")
      body = lowerConcatRoot();
    else
      body = lowerElementNest();
    func.body = renameClashes(body, func.params);
    func = simplify(func);
    if (m_elementNest || m_concatNest)
      func = scheduleElementNest(std::move(func));
    else if (!m_rowNest)  // a row nest is vectorized by its sketch, or scalar by its annotation
      func.body = simplify(vectorizeInnermostLoops(func.body, m_options.vectorLanes));
    std::string ops;
    for (NodeId n = m_group.first; n < m_group.end; ++n) ops += (ops.empty() ? "" : ",") + m_graph.node(n).op;
    func.attrs["workload_key"] = groupWorkloadKey(m_graph, m_group);
    func.attrs["op"] = "fused";
    func.attrs["ops"] = ops;
    recordSchedule(func, m_schedule);
    if (!m_tuneKey.empty()) func.attrs["tune_key"] = m_tuneKey;
    if (!m_trace.empty()) func.attrs["trace"] = m_trace;
    return func;
  }

  /// The element nest's sketch (nest_search.h) under its record's annotation or the default (a
  /// concatenation's: on each of its nests). A nest of any dtypes has a tuning key (its task
  /// graph's inputs are filled by dtype, integer indices within the table they index).
  PrimFunc scheduleElementNest(PrimFunc func) {
    m_tuneKey = elementNestTuneKey(groupWorkloadKey(m_graph, m_group));
    const Knobs* tuned = m_options.schedules ? m_options.schedules->find(m_tuneKey) : nullptr;
    Knobs knobs = elementNestKnobsOf(tuned, m_graph.type(m_out).numel(), m_options);
    auto sketch = [&](tir::Schedule& sched) {
      if (m_concatNest)
        applyConcatNestSketch(sched, m_outBuffer->name, knobs);
      else
        applyElementNestSketch(sched, m_outBuffer->name, knobs);
    };
    tir::Schedule sched(func);
    sketch(sched);
    // Untuned, vectors that gather bytes give way to scalar code (nest_search.h).
    if ((!tuned || *tuned != knobs) && knob(knobs, "vl", 1) > 1 && gathersBytes(sched.func().body)) {
      knobs["vl"] = 1;
      sched = tir::Schedule(std::move(func));
      sketch(sched);
    }
    m_schedule = knobsText(knobs);
    m_trace = sched.trace().str();
    return sched.func();
  }

 private:
  /// The dtype checks the standalone lowerings make.
  void checkMembers() const {
    for (NodeId n = m_group.first; n < m_group.end; ++n) {
      if (n == m_anchor) continue;
      OpContext ctx = nodeContext(m_graph, n);
      ctx.where = m_where;
      if (isUnaryElementwise(ctx.op))
        checkUnary(ctx);
      else if (isBinaryElementwise(ctx.op))
        checkBinary(ctx);
      else if (isComparison(ctx.op))
        checkComparison(ctx);
      else if (ctx.op == "batch_norm")
        ctx.requireFloat();
    }
  }

  Stmt lowerAnchored() {
    const Node& anchor = m_graph.node(m_anchor);
    OpLowering lowering = findLowering(anchor.op);
    KILN_ASSERT(lowering != nullptr, "fused group @" + m_group.name + ": no lowering of anchor " + anchor.op);
    OpContext ctx = nodeContext(m_graph, m_anchor);
    ctx.options = m_options;
    for (ValueId v : anchor.inputs) ctx.in.push_back(m_params.at(v));
    ctx.out = {m_outBuffer};
    ValueId anchorOut = anchor.outputs[0];
    const Shape& shape = m_graph.type(anchorOut).shape;
    GroupEvaluator eval(m_graph, m_group, m_params);
    int calls = 0;
    ctx.epilogue = [&](Expr value, const std::vector<Expr>& index) {
      ++calls;
      KILN_ASSERT(index.size() == shape.size(), "fused group @" + m_group.name + ": " + anchor.op +
                                                    " passed an epilogue index of the wrong rank");
      eval.clearMemo();
      eval.seed(anchorOut, value);
      return eval.valueAt(m_out, Index{shape, index, value.type().lanes, nullptr, {}, false});
    };
    // Anchors that know only their stores' offsets (sketch kernels, epilogueAtStores) then apply
    // the epilogue there, reading every operand at that offset.
    const int64_t numel = m_graph.type(anchorOut).numel();
    if (canUseFlat(m_graph, m_group, -1, m_anchor) && m_graph.type(m_out).numel() == numel)
      ctx.flatEpilogue = [&](Expr value, const Expr& offset) {
        ++calls;
        eval.clearMemo();
        eval.seed(anchorOut, value);
        return eval.valueAt(m_out, Index{{numel}, {offset}, value.type().lanes, nullptr, {}, true});
      };
    ctx.nestWorkload = groupWorkloadKey(m_graph, m_group);  // a pooling anchor's tuning key
    Stmt body = lowering(ctx);
    m_schedule = ctx.schedule;
    m_tuneKey = ctx.tuneKey;
    m_trace = ctx.trace;
    if (calls > 0) return body;
    // The anchor stored its plain result: apply the epilogue in place, element by element.
    LoopNest nest(shape, {}, wantParallel(m_graph.type(anchorOut).numel()));
    Expr offset = nest.offset(contiguousStrides(shape));
    eval.clearMemo();
    eval.seed(anchorOut, Load::make(m_outBuffer, offset));
    Expr value = eval.valueAt(m_out, nestIndex(nest, shape));
    return Seq::make({body, nest.wrap(Store::make(m_outBuffer, offset, value))});
  }

  // The plain nest, serial and scalar: its sketch (scheduleElementNest) makes it fast.
  Stmt lowerElementNest() {
    m_elementNest = true;
    const Shape& shape = m_graph.type(m_out).shape;
    int64_t numel = m_graph.type(m_out).numel();
    GroupEvaluator eval(m_graph, m_group, m_params);
    if (canUseFlat(m_graph, m_group)) {
      LoopNest nest({numel}, {"i"}, false);
      Index idx{{numel}, {nest[0]}, 1, nullptr, {}, true};
      Expr offset = nest.offset({1});
      idx.axes[0] = offset;
      return nest.wrap(Store::make(m_outBuffer, offset, eval.valueAt(m_out, idx)));
    }
    LoopNest nest(shape, {}, false);
    Expr value = eval.valueAt(m_out, nestIndex(nest, shape));
    return nest.wrap(Store::make(m_outBuffer, nest.offset(contiguousStrides(shape)), value));
  }

  // The root reduction's lowering, reading its input through the prologue.
  Stmt lowerReduceRoot() {
    NodeId rootId = m_group.root();
    const Node& root = m_graph.node(rootId);
    OpLowering lowering = findLowering(root.op);
    KILN_ASSERT(lowering != nullptr, "fused group @" + m_group.name + ": no lowering of " + root.op);
    ValueId input = root.inputs[0];
    const TensorType& inType = m_graph.type(input);
    OpContext ctx = nodeContext(m_graph, rootId);
    ctx.options = m_options;
    ctx.where = m_where;
    // Stands for the input in the lowering's signature; every read goes through the prologue.
    ctx.in = {makeBuffer(sanitizeName(m_graph.value(input).name) + "_fused", Type::fromDType(inType.dtype),
                         inType.shape)};
    ctx.out = {m_outBuffer};
    GroupEvaluator eval(m_graph, m_group, m_params);
    bool flat = canUseFlat(m_graph, m_group, rootId);
    ctx.prologueFlat = flat;
    ctx.prologueRowwise = !flat && rowwise(rootId);
    ctx.prologue = [&](const std::vector<Expr>& index, const Expr& offset) {
      eval.clearMemo();
      int lanes = offset.type().lanes;
      if (flat) return eval.valueAt(input, Index{{inType.numel()}, {offset}, lanes, nullptr, {}, true});
      KILN_ASSERT(index.size() == inType.shape.size(), "fused group @" + m_group.name + ": " + root.op +
                                                           " passed a prologue index of the wrong rank");
      return eval.valueAt(input, Index{inType.shape, index, lanes, nullptr, {}, false, offset});
    };
    ctx.nestWorkload = groupWorkloadKey(m_graph, m_group);
    Stmt body = lowering(ctx);
    takeSchedule(ctx);
    return body;
  }

  // An op that fuses with nothing (softmax), lowered alone as a group of one: its own lowering
  // over the group's parameters.
  Stmt lowerLoneOp() {
    NodeId id = m_group.root();
    const Node& node = m_graph.node(id);
    OpLowering lowering = findLowering(node.op);
    KILN_ASSERT(lowering != nullptr, "group of one @" + m_group.name + ": no lowering of " + node.op);
    OpContext ctx = nodeContext(m_graph, id);
    ctx.options = m_options;
    ctx.where = m_where;
    for (ValueId v : node.inputs) ctx.in.push_back(m_params.at(v));
    ctx.out = {m_outBuffer};
    ctx.nestWorkload = groupWorkloadKey(m_graph, m_group);
    Stmt body = lowering(ctx);
    takeSchedule(ctx);
    return body;
  }

  /// Whether every value the reduction `rootId`'s prologue evaluates is of the reduction input's
  /// shape (read at the flat offset, Index::offset) or constant along the reduced axes (a
  /// per-channel scale before a global mean): the reduced axes' indices are then never read.
  bool rowwise(NodeId rootId) const {
    const Node& root = m_graph.node(rootId);
    auto fits = [&](ValueId v) { return readsAlongRows(m_graph, root, m_graph.type(v)); };
    for (NodeId n = m_group.first; n < rootId; ++n) {
      const Node& node = m_graph.node(n);
      if (!std::all_of(node.inputs.begin(), node.inputs.end(), fits) ||
          !std::all_of(node.outputs.begin(), node.outputs.end(), fits))
        return false;
    }
    return true;
  }

  /// What a reduction's or lone op's lowering chose; a trace means a row nest's sketch ran.
  void takeSchedule(const OpContext& ctx) {
    m_schedule = ctx.schedule;
    m_tuneKey = ctx.tuneKey;
    m_trace = ctx.trace;
    m_rowNest = !ctx.trace.empty() || ctx.tuneKey.rfind("reduce:", 0) == 0;
  }

  // out[..., offset_j + i, ...] = input_j[..., i, ...], one loop nest per input.
  Stmt lowerConcatRoot() {
    m_concatNest = true;
    const Node& root = m_graph.node(m_group.root());
    const Shape& outShape = m_graph.type(m_out).shape;
    int64_t axis = normalizeAxis(root.attrs.getInt("axis"), static_cast<int64_t>(outShape.size()));
    std::vector<int64_t> outStrides = contiguousStrides(outShape);
    GroupEvaluator eval(m_graph, m_group, m_params);
    // A part that is one contiguous range of the output (nothing but ones before the axis), of
    // values a flat index addresses, is one flat loop.
    int64_t before = 1;
    for (int64_t d = 0; d < axis; ++d) before *= outShape[d];
    const bool flat = before == 1 && canUseFlat(m_graph, m_group, m_group.root());
    std::vector<Stmt> copies;
    int64_t offset = 0;
    for (ValueId v : root.inputs) {
      const Shape& shape = m_graph.type(v).shape;
      const int64_t numel = m_graph.type(v).numel();
      if (numel == 0) continue;
      if (flat) {
        LoopNest nest({numel}, {"i"}, false);
        eval.clearMemo();
        Expr value = eval.valueAt(v, Index{{numel}, {nest[0]}, 1, nullptr, {}, true});
        copies.push_back(nest.wrap(Store::make(m_outBuffer, nest[0] + offset * outStrides[axis], value)));
        offset += shape[axis];
        continue;
      }
      LoopNest nest(shape, {}, false);
      eval.clearMemo();
      Expr value = eval.valueAt(v, nestIndex(nest, shape));
      Expr target = nest.offset(outStrides) + offset * outStrides[axis];
      copies.push_back(nest.wrap(Store::make(m_outBuffer, target, value)));
      offset += shape[axis];
    }
    return Seq::make(std::move(copies));
  }

  const Graph& m_graph;
  FusedGroup m_group;
  LowerOptions m_options;
  ValueId m_out = -1;
  NodeId m_anchor = -1;
  std::string m_where;
  std::map<ValueId, Buffer> m_params;
  Buffer m_outBuffer;
  std::string m_schedule;
  std::string m_tuneKey;
  std::string m_trace;
  bool m_elementNest = false;  // the body is lowerElementNest's plain nest
  bool m_concatNest = false;   // the body is lowerConcatRoot's plain nests
  bool m_rowNest = false;      // the body is a row nest scheduled by its sketch (nest_search.h)
};

}  // namespace

OpContext nodeContext(const Graph& graph, NodeId n) {
  const Node& node = graph.node(n);
  OpContext ctx;
  ctx.op = node.op;
  ctx.attrs = node.attrs;
  for (ValueId v : node.inputs) ctx.inTypes.push_back(graph.type(v));
  for (ValueId v : node.outputs) ctx.outTypes.push_back(graph.type(v));
  std::string label = node.outputs.empty() ? node.op : "%" + graph.value(node.outputs[0]).name;
  ctx.where = " (" + label + (node.location.empty() ? "" : " at " + node.location) + ")";
  return ctx;
}

bool readsAlongRows(const Graph& graph, const Node& reduction, const TensorType& t) {
  const Shape& full = graph.type(reduction.inputs[0]).shape;
  if (t.shape == full) return true;
  if (!reduction.attrs.has("axes")) return false;
  const auto rank = static_cast<int64_t>(full.size());
  const int64_t lead = rank - static_cast<int64_t>(t.shape.size());
  if (lead < 0) return false;
  for (int64_t a : reduction.attrs.getInts("axes")) {
    const int64_t axis = normalizeAxis(a, rank);
    if (axis >= lead && t.shape[axis - lead] != 1) return false;
  }
  return true;
}

FusedRole fusedRole(const std::string& op) {
  const OpDef* def = findOp(op);
  if (!def) return FusedRole::None;
  if (def->pattern == OpPattern::OutEWiseFusable) return canLower(op) ? FusedRole::Anchor : FusedRole::None;
  if (isUnaryElementwise(op) || isBinaryElementwise(op) || op == "copy" || op == "batch_norm" ||
      op == "reshape" || op == "transpose" || op == "concat" || op == "layout_transform" ||
      op == "strided_slice" || op == "take" || op == "where" || op == "cast" || op == "broadcast_to" ||
      isComparison(op) || op == "qnn.quantize" || op == "qnn.dequantize" || op == "qnn.add")
    return FusedRole::Element;
  if (op == "mean" || op == "sum" || op == "max" || op == "min") return FusedRole::Reduce;
  return FusedRole::None;
}

std::vector<ValueId> groupInputs(const Graph& graph, int group) {
  return groupInputs(graph, graph.groups().at(group));
}

std::vector<ValueId> groupInputs(const Graph& graph, const FusedGroup& g) {
  std::vector<ValueId> inputs;
  auto add = [&](ValueId v) {
    NodeId p = graph.value(v).producer;
    if (p >= g.first && p < g.end) return;
    if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
  };
  for (NodeId n = g.first; n < g.end; ++n) {
    if (fusedRole(graph.node(n).op) == FusedRole::Anchor)
      for (ValueId v : graph.node(n).inputs) add(v);
  }
  for (NodeId n = g.first; n < g.end; ++n)
    for (ValueId v : graph.node(n).inputs) add(v);
  return inputs;
}

std::string groupWorkloadKey(const Graph& graph, int group) {
  return groupWorkloadKey(graph, graph.groups().at(group));
}

std::string groupWorkloadKey(const Graph& graph, const FusedGroup& g) {
  std::vector<ValueId> inputs = groupInputs(graph, g);
  std::string key = "fused[";
  for (NodeId n = g.first; n < g.end; ++n) {
    const Node& node = graph.node(n);
    key += (n == g.first ? "" : "; ") + node.op;
    if (!node.attrs.values().empty()) {
      key += "{";
      bool first = true;
      for (const auto& [name, value] : node.attrs.values()) {
        key += (first ? "" : ",") + name + "=" + printAttrValue(value);
        first = false;
      }
      key += "}";
    }
    key += "(";
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId v = node.inputs[i];
      NodeId p = graph.value(v).producer;
      key += i ? "," : "";
      if (p >= g.first && p < g.end) {
        key += "%" + std::to_string(p - g.first);
      } else {
        auto pos = std::find(inputs.begin(), inputs.end(), v) - inputs.begin();
        key += "$" + std::to_string(pos) + ":" + graph.type(v).str();
      }
    }
    key += ")->" + graph.type(node.outputs[0]).str();
  }
  return key + "]";
}

PrimFunc lowerGroup(const Graph& graph, int group, const std::string& funcName, const LowerOptions& options) {
  return GroupLowering(graph, graph.groups().at(group), options).run(funcName);
}

bool lowersAsGroupOfOne(const Graph& graph, NodeId n) {
  const Node& node = graph.node(n);
  if (node.group >= 0 || node.outputs.size() != 1 || !node.regions.empty()) return false;
  const std::string& op = node.op;
  // An element op of any dtype: an element nest.
  // (A copy keeps the kernel the plan's output copies share.)
  if (fusedRole(op) == FusedRole::Element && op != "batch_norm" && op != "copy") return true;
  // A reduction or softmax: a row nest; pooling: its window nest (conv_search.h, or nest_search.h's
  // plain one). Each is keyed by its workload.
  return fusedRole(op) == FusedRole::Reduce || op == "softmax" || isWindowPool(op);
}

PrimFunc lowerAsGroupOfOne(const Graph& graph, NodeId n, const std::string& funcName,
                           const LowerOptions& options) {
  PrimFunc f = GroupLowering(graph, FusedGroup{funcName, n, n + 1}, options).run(funcName);
  f.attrs["op"] = graph.node(n).op;
  return f;
}

}  // namespace kiln::core::lower
