// qnn-alter-layout: qnn.conv2d → qnn.conv2d_nchwc on packed u8 activations (see qnn_alter_layout.h).
//
// Like alter-layout, the pass walks the nodes in order and rebuilds the graph (GraphRewriter).
// Every source u8 value may have a plain version (the rewriter's mapping) and a packed one
// (m_packed, with its channel block); the plain one of a packed-only value is made on demand by
// one layout_transform back to NCHW. A qnn.quantize whose channel count needs padding (RGB
// input, 3 → 4) has no such transform: its plain version is the original quantize, copied.
#include "core/passes/qnn_alter_layout.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/ir/op_registry.h"
#include "core/lower/conv_search.h"
#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {

using runtime::Tensor;

int64_t qnnChannelBlock(int64_t channels, int lanes) {
  for (int64_t block : {int64_t{lanes}, int64_t{16}, int64_t{8}, int64_t{4}}) {
    if (block <= lanes && block % 4 == 0 && channels % block == 0) return block;
  }
  return 0;
}

namespace {

std::string layoutName(int64_t block) { return "NCHW" + std::to_string(block) + "c"; }

struct Packed {
  ValueId value = -1;  // target value, u8 [N, C/b, H, W, b]
  int64_t block = 0;
};

class QnnAlterLayout {
 public:
  QnnAlterLayout(const Graph& source, const QnnAlterLayoutOptions& options, PassCounters* counters)
      : m_src(source), m_rw(source), m_options(options), m_counters(counters), m_uses(valueUses(source)) {}

  Graph run() {
    for (NodeId n = 0; n < static_cast<NodeId>(m_src.nodes().size()); ++n) visit(n);
    for (ValueId v : m_src.outputs()) plain(v);
    return m_rw.finish();
  }
  bool changed() const { return m_changed; }

 private:
  void visit(NodeId n) {
    const Node& node = m_src.node(n);
    if (node.op == "qnn.conv2d" && packConv(n)) return;
    if (node.op == "qnn.quantize" && packQuantize(n)) return;
    if (node.op == "max_pool2d" && m_packed.count(node.inputs[0])) return packUnary(n);
    if (node.op == "qnn.add" && packAdd(n)) return;
    if (node.op == "qnn.dense" && compensateDense(n)) return;
    // Anything else reads plain values.
    for (ValueId v : node.inputs) plain(v);
    m_rw.copyNode(n);
  }

  /// The plain (NCHW) target value of source value `v`, transforming a packed-only value once.
  ValueId plain(ValueId v) {
    if (!m_packedOnly.count(v)) return m_rw.map(v);
    m_packedOnly.erase(v);
    const Packed& p = m_packed.at(v);
    const Node& producer = m_src.node(m_src.value(v).producer);
    ValueId out = -1;
    if (producer.op == "qnn.quantize") {  // possibly padded channels: quantize again, plainly
      std::vector<ValueId> inputs;
      for (ValueId i : producer.inputs) inputs.push_back(plain(i));
      Attrs attrs = producer.attrs;
      attrs.set("out_layout", std::string("NCHW"));
      out = m_rw.addNode("qnn.quantize", inputs, attrs, producer.location, m_src.value(v).name + "_plain");
    } else {
      out = m_rw.addNode("layout_transform", {p.value}, {{"src", layoutName(p.block)}, {"dst", std::string("NCHW")}},
                         producer.location, m_src.value(v).name + "_nchw");
      bump(m_counters, "transforms");
    }
    m_rw.replace(v, out);
    return out;
  }

  /// The packed version of source u8 value `v` with channel block `block` (transformed from
  /// the plain one when needed).
  ValueId packedWith(ValueId v, int64_t block) {
    auto it = m_packed.find(v);
    if (it != m_packed.end() && it->second.block == block) return it->second.value;
    auto key = std::make_pair(v, block);
    auto cached = m_extraPacked.find(key);
    if (cached != m_extraPacked.end()) return cached->second;
    ValueId x = plain(v);
    ValueId out = m_rw.addNode("layout_transform", {x}, {{"src", std::string("NCHW")}, {"dst", layoutName(block)}}, {},
                               m_src.value(v).name + "_nchw" + std::to_string(block) + "c");
    bump(m_counters, "transforms");
    m_extraPacked[key] = out;
    if (it == m_packed.end()) m_packed[v] = Packed{out, block};
    return out;
  }

  /// A quantize feeding a packable convolution is packed (and padded to 4 channels) itself.
  bool packQuantize(NodeId n) {
    const Node& node = m_src.node(n);
    const TensorType& t = m_src.type(node.inputs[0]);
    if (t.rank() != 4 || (node.attrs.has("out_layout") && node.attrs.getString("out_layout") != "NCHW")) return false;
    bool feedsConv = false;
    for (NodeId u : m_uses[node.outputs[0]]) feedsConv = feedsConv || convPackable(u);
    if (!feedsConv) return false;
    int64_t block = qnnChannelBlock(t.shape[1], m_options.lanes);
    if (block == 0) block = 4;  // padded
    Attrs attrs = node.attrs;
    attrs.set("out_layout", layoutName(block));
    ValueId out = m_rw.addNode("qnn.quantize", {m_rw.map(node.inputs[0])}, attrs, node.location,
                               m_src.value(node.outputs[0]).name + "_packed");
    m_packed[node.outputs[0]] = Packed{out, block};
    m_packedOnly.insert(node.outputs[0]);
    bump(m_counters, "packed-ops");
    m_changed = true;
    return true;
  }

  /// A qnn.dense of constant weights and a non-zero input zero point gets the fifth input zx·Σw[j]
  /// (i32), so its kernel sums x·w as they are (four products per dot4 step) and takes it off.
  bool compensateDense(NodeId n) {
    const Node& node = m_src.node(n);
    const int64_t zx = node.attrs.getInt("input_zero_point");
    if (node.inputs.size() != 4 || zx == 0 || !m_src.value(node.inputs[1]).isConstant()) return false;
    const Tensor& weight = *m_src.value(node.inputs[1]).constant;
    const int64_t rows = weight.shape()[0], k = weight.shape()[1];
    Tensor comp = Tensor::zeros(DType::Int32, {rows});
    for (int64_t j = 0; j < rows; ++j) {
      int64_t sum = 0;
      for (int64_t c = 0; c < k; ++c) sum += weight.data<int8_t>()[j * k + c];
      comp.data<int32_t>()[j] = static_cast<int32_t>(zx * sum);
    }
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) inputs.push_back(plain(v));
    inputs.push_back(
        m_rw.addConstant(m_src.value(node.outputs[0]).name + "_zero_point_sum", std::move(comp)));
    m_rw.replaceWithNode(node.outputs[0], "qnn.dense", std::move(inputs), node.attrs, node.location);
    bump(m_counters, "denses");
    m_changed = true;
    return true;
  }

  bool convPackable(NodeId n) const {
    const Node& node = m_src.node(n);
    if (node.op != "qnn.conv2d") return false;
    for (size_t i = 1; i < 4; ++i) {
      if (!m_src.value(node.inputs[i]).isConstant()) return false;
    }
    const Shape &x = m_src.type(node.inputs[0]).shape, &w = m_src.type(node.inputs[1]).shape;
    int64_t groups = node.attrs.getInt("groups", 1), oc = w[0];
    if (qnnChannelBlock(oc, m_options.lanes) == 0) return false;
    if (groups == 1) return true;
    return groups == x[1] && oc == x[1] && w[1] == 1;
  }

  bool packConv(NodeId n) {
    if (!convPackable(n)) return false;
    const Node& node = m_src.node(n);
    ValueId xv = node.inputs[0];
    const Shape& xs = m_src.type(xv).shape;
    const Tensor& weight = *m_src.value(node.inputs[1]).constant;
    const Shape& ws = weight.shape();
    int64_t oc = ws[0], channels = xs[1], kh = ws[2], kw = ws[3], taps = kh * kw;
    bool depthwise = node.attrs.getInt("groups", 1) != 1;
    int64_t outBlock = qnnChannelBlock(oc, m_options.lanes);

    // The input, packed: its own block when it has one (any multiple of 4), else the block of its
    // channel count (padded inputs only come from a packed quantize).
    ValueId x = -1;
    int64_t inBlock = 0;
    auto it = m_packed.find(xv);
    if (depthwise) {
      inBlock = outBlock;
      x = packedWith(xv, inBlock);
    } else if (it != m_packed.end()) {
      inBlock = it->second.block;
      x = it->second.value;
    } else {
      inBlock = qnnChannelBlock(channels, m_options.lanes);
      if (inBlock == 0) return false;
      x = packedWith(xv, inBlock);
    }
    int64_t paddedChannels = (channels + inBlock - 1) / inBlock * inBlock;

    // Weights: [O/ob, Cp/4, KH, KW, ob, 4] (depthwise [O/ob, 1, KH, KW, ob, 1]).
    const auto* w = weight.data<int8_t>();
    Shape packedShape = depthwise ? Shape{oc / outBlock, 1, kh, kw, outBlock, 1}
                                  : Shape{oc / outBlock, paddedChannels / 4, kh, kw, outBlock, 4};
    Tensor packed = Tensor::zeros(DType::Int8, packedShape);
    auto* dst = packed.data<int8_t>();
    int64_t inPerGroup = depthwise ? 1 : channels;
    for (int64_t o = 0; o < oc; ++o) {
      int64_t ob = o / outBlock, oi = o % outBlock;
      for (int64_t c = 0; c < inPerGroup; ++c) {
        for (int64_t t = 0; t < taps; ++t) {
          int8_t value = w[(o * inPerGroup + c) * taps + t];
          int64_t at = depthwise ? ((ob * taps + t) * outBlock + oi)
                                 : ((((ob * (paddedChannels / 4) + c / 4) * taps + t) * outBlock + oi) * 4 + c % 4);
          dst[at] = value;
        }
      }
    }
    // The kernel sums x·w over the taps inside the image; the input zero point's share there,
    // zx·Σw, comes off in i32: one row per region of outputs whose windows reach the same taps.
    const int64_t zx = node.attrs.getInt("input_zero_point");
    std::vector<int32_t> shares =
        lower::quantizedConvShares(w, ws, zx, {xs[2], xs[3]}, node.attrs.getPair("stride", 1),
                                   node.attrs.getPair("padding", 0), node.attrs.getPair("dilation", 1));
    const auto regions = static_cast<int64_t>(shares.size()) / oc;
    Tensor comp = Tensor::zeros(DType::Int32, {regions, oc});
    std::copy(shares.begin(), shares.end(), comp.data<int32_t>());
    std::string name = m_src.value(node.outputs[0]).name;
    ValueId wPacked = m_rw.addConstant(m_src.value(node.inputs[1]).name + "_packed", std::move(packed));
    ValueId multV = m_rw.map(node.inputs[2]);
    ValueId offsetV = m_rw.map(node.inputs[3]);
    ValueId compV = m_rw.addConstant(name + "_zero_point_sum", std::move(comp));
    Attrs attrs = node.attrs;
    attrs.set("out_layout", layoutName(outBlock));
    attrs.set("in_channels", channels);
    ValueId out = m_rw.addNode("qnn.conv2d_nchwc", {x, wPacked, multV, offsetV, compV}, attrs, node.location, name + "_packed");
    m_packed[node.outputs[0]] = Packed{out, outBlock};
    m_packedOnly.insert(node.outputs[0]);
    bump(m_counters, "convs");
    m_changed = true;
    return true;
  }

  void packUnary(NodeId n) {
    const Node& node = m_src.node(n);
    const Packed& in = m_packed.at(node.inputs[0]);
    ValueId out = m_rw.addNode(node.op, {in.value}, node.attrs, node.location, m_src.value(node.outputs[0]).name + "_packed");
    m_packed[node.outputs[0]] = Packed{out, in.block};
    m_packedOnly.insert(node.outputs[0]);
    bump(m_counters, "packed-ops");
  }

  bool packAdd(NodeId n) {
    const Node& node = m_src.node(n);
    auto a = m_packed.find(node.inputs[0]), b = m_packed.find(node.inputs[1]);
    if (a == m_packed.end() && b == m_packed.end()) return false;
    int64_t block = a != m_packed.end() ? a->second.block : b->second.block;
    ValueId pa = packedWith(node.inputs[0], block), pb = packedWith(node.inputs[1], block);
    if (m_rw.target().type(pa).shape != m_rw.target().type(pb).shape) return false;
    ValueId out = m_rw.addNode("qnn.add", {pa, pb}, node.attrs, node.location, m_src.value(node.outputs[0]).name + "_packed");
    m_packed[node.outputs[0]] = Packed{out, block};
    m_packedOnly.insert(node.outputs[0]);
    bump(m_counters, "packed-ops");
    return true;
  }

  const Graph& m_src;
  GraphRewriter m_rw;
  QnnAlterLayoutOptions m_options;
  PassCounters* m_counters;
  std::vector<std::vector<NodeId>> m_uses;
  std::map<ValueId, Packed> m_packed;
  std::map<std::pair<ValueId, int64_t>, ValueId> m_extraPacked;
  std::set<ValueId> m_packedOnly;  // source values whose plain version does not exist yet
  bool m_changed = false;
};

}  // namespace

bool qnnAlterLayout(Graph& graph, const QnnAlterLayoutOptions& options, PassCounters* counters) {
  bool any = false;
  for (const Node& node : graph.nodes()) any = any || node.op == "qnn.conv2d" || node.op == "qnn.dense";
  if (!any) return false;
  QnnAlterLayout pass(graph, options, counters);
  Graph out = pass.run();
  if (!pass.changed()) return false;
  graph = std::move(out);
  return true;
}

}  // namespace kiln::core::passes
