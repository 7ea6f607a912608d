// alter-layout: NCHW → NCHW[x]c with weights packed at compile time (see alter_layout.h).
//
// The pass walks the nodes in order and rebuilds the graph (GraphRewriter). Every source value
// may have a plain version (the rewriter's mapping) and a packed one (m_packed); either is
// created on demand:
// - a packed op's output exists only packed until a barrier or a graph output asks for the
//   plain value, which inserts `layout_transform{src="NCHW16c", dst="NCHW"}` once;
// - a plain value feeding a packed op is transformed once (`src="NCHW", dst="NCHW16c"`) and the
//   packed copy is reused by every packed consumer.
// Constant operands of binary ops are repacked into new constants instead.
#include "core/passes/alter_layout.h"

#include <algorithm>
#include <map>

#include "core/ir/op_registry.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {

using runtime::Tensor;

runtime::Tensor packChannels(const Tensor& nchw, int64_t block) {
  const Shape& s = nchw.shape();
  KILN_ASSERT(s.size() == 4 && block > 0 && s[1] % block == 0, "packChannels: bad shape or block");
  KILN_ASSERT(nchw.dtype() == DType::Float32, "packChannels: f32 only");
  int64_t n = s[0], cb = s[1] / block, hw = s[2] * s[3];
  Tensor out = Tensor::zeros(DType::Float32, {n, cb, s[2], s[3], block});
  const float* src = nchw.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t p = 0; p < hw; ++p) dst[((i * cb + c / block) * hw + p) * block + c % block] = src[(i * s[1] + c) * hw + p];
  return out;
}

runtime::Tensor unpackChannels(const Tensor& packed) {
  const Shape& s = packed.shape();
  KILN_ASSERT(s.size() == 5 && packed.dtype() == DType::Float32, "unpackChannels: expects f32 [N, C/x, H, W, x]");
  int64_t n = s[0], cb = s[1], block = s[4], hw = s[2] * s[3], c = cb * block;
  Tensor out = Tensor::zeros(DType::Float32, {n, c, s[2], s[3]});
  const float* src = packed.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) dst[(i * c + ch) * hw + p] = src[((i * cb + ch / block) * hw + p) * block + ch % block];
  return out;
}

runtime::Tensor packConvWeight(const Tensor& oihw, int64_t inBlock, int64_t outBlock, bool depthwise) {
  const Shape& s = oihw.shape();
  KILN_ASSERT(s.size() == 4 && oihw.dtype() == DType::Float32, "packConvWeight: expects f32 OIHW");
  int64_t o = s[0], i = s[1], kh = s[2], kw = s[3], taps = kh * kw;
  if (depthwise) inBlock = 1;
  KILN_ASSERT(o % outBlock == 0 && i % inBlock == 0, "packConvWeight: blocks do not divide the channels");
  Tensor out = Tensor::zeros(DType::Float32, {o / outBlock, i / inBlock, kh, kw, inBlock, outBlock});
  const float* src = oihw.data<float>();
  float* dst = out.data<float>();
  int64_t ib = i / inBlock;
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t ic = 0; ic < i; ++ic)
      for (int64_t t = 0; t < taps; ++t) {
        int64_t packed = (((oc / outBlock) * ib + ic / inBlock) * taps + t) * inBlock * outBlock +
                         (ic % inBlock) * outBlock + oc % outBlock;
        dst[packed] = src[(oc * i + ic) * taps + t];
      }
  return out;
}

runtime::Tensor winogradConvWeight(const Tensor& oihw, int m, int64_t outBlock) {
  const Shape& s = oihw.shape();
  KILN_ASSERT(s.size() == 4 && s[2] == 3 && s[3] == 3 && oihw.dtype() == DType::Float32,
              "winogradConvWeight: expects f32 OIHW 3x3");
  const lower::WinogradMatrices& mat = lower::winogradMatrices(m);
  int64_t o = s[0], i = s[1], a = mat.alpha;
  KILN_ASSERT(outBlock > 0 && o % outBlock == 0, "winogradConvWeight: block does not divide the channels");
  Tensor out = Tensor::zeros(DType::Float32, {o / outBlock, a, a, i, outBlock});
  const float* src = oihw.data<float>();
  float* dst = out.data<float>();
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t ic = 0; ic < i; ++ic) {
      const float* g = src + (oc * i + ic) * 9;
      double gg[6][3] = {};  // G g: α × 3
      for (int64_t x = 0; x < a; ++x)
        for (int k = 0; k < 3; ++k)
          for (int l = 0; l < 3; ++l) gg[x][k] += mat.g[static_cast<size_t>(x * 3 + l)] * g[l * 3 + k];
      for (int64_t x = 0; x < a; ++x)
        for (int64_t y = 0; y < a; ++y) {
          double v = 0;
          for (int k = 0; k < 3; ++k) v += gg[x][k] * mat.g[static_cast<size_t>(y * 3 + k)];
          dst[((((oc / outBlock) * a + x) * a + y) * i + ic) * outBlock + oc % outBlock] = static_cast<float>(v);
        }
    }
  return out;
}

namespace {

std::string layoutName(int64_t block) { return block == 0 ? "NCHW" : "NCHW" + std::to_string(block) + "c"; }

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool isPool(const std::string& op) {
  return op == "max_pool2d" || op == "avg_pool2d" || op == "adaptive_avg_pool2d";
}

class LayoutRewriter {
 public:
  LayoutRewriter(const Graph& graph, const AlterLayoutOptions& options, PassCounters* counters)
      : m_src(graph), m_rw(graph), m_counters(counters), m_schedules(options.schedules), m_winograd(options.winograd),
        m_plain(graph.values().size(), false) {
    m_lower.vectorLanes = std::max(1, options.lanes);
    m_lower.vectorRegisters = lower::vectorRegistersForLanes(m_lower.vectorLanes);
    for (ValueId v : graph.inputs()) m_plain[v] = true;
    for (ValueId v = 0; v < static_cast<ValueId>(graph.values().size()); ++v)
      if (graph.value(v).isConstant()) m_plain[v] = true;
  }

  bool run(Graph& out) {
    for (NodeId n = 0; n < static_cast<NodeId>(m_src.nodes().size()); ++n) {
      if (!rewrite(n)) copyPlain(n);
    }
    if (m_convs == 0) return false;
    for (ValueId v : m_src.outputs()) ensurePlain(v);
    out = m_rw.finish();
    return true;
  }

 private:
  struct Packed {
    ValueId value = -1;  // in the target graph
    int64_t block = 0;
  };

  int64_t blockFor(int64_t channels) const { return lower::channelBlock(channels, m_lower); }
  const Packed* packedOf(ValueId v) const {
    auto it = m_packed.find(v);
    return it == m_packed.end() ? nullptr : &it->second;
  }

  void copyPlain(NodeId n) {
    for (ValueId v : m_src.node(n).inputs) ensurePlain(v);
    m_rw.copyNode(n);
    for (ValueId v : m_src.node(n).outputs) m_plain[v] = true;
  }

  /// The plain version of source value `v` (inserting a transform back from its packed form).
  ValueId ensurePlain(ValueId v) {
    if (m_plain[v]) return m_rw.map(v);
    const Packed* p = packedOf(v);
    KILN_ASSERT(p != nullptr, "alter-layout: %" + m_src.value(v).name + " has neither layout");
    const Value& value = m_src.value(v);
    Attrs attrs{{"src", layoutName(p->block)}, {"dst", std::string("NCHW")}};
    ValueId t = m_rw.addNode("layout_transform", {p->value}, attrs, locationOf(v), value.name + "_nchw");
    bump(m_counters, "transforms");
    m_rw.replace(v, t);
    m_plain[v] = true;
    return t;
  }

  /// The packed version of rank-4 source value `v` with channel block `block`.
  ValueId ensurePacked(ValueId v, int64_t block) {
    if (const Packed* p = packedOf(v); p && p->block == block) return p->value;
    const Value& value = m_src.value(v);
    ValueId t;
    if (value.isConstant()) {
      t = m_rw.addConstant(value.name + "_" + lowerCase(layoutName(block)), packChannels(*value.constant, block));
    } else {
      ValueId in;
      std::string src = "NCHW";
      if (const Packed* p = packedOf(v); p && !m_plain[v]) {
        in = p->value;
        src = layoutName(p->block);
      } else {
        in = ensurePlain(v);
      }
      Attrs attrs{{"src", src}, {"dst", layoutName(block)}};
      t = m_rw.addNode("layout_transform", {in}, attrs, locationOf(v), value.name + "_" + lowerCase(layoutName(block)));
      bump(m_counters, "transforms");
    }
    m_packed[v] = Packed{t, block};
    return t;
  }

  std::string locationOf(ValueId v) const {
    NodeId p = m_src.value(v).producer;
    return p >= 0 ? m_src.node(p).location : std::string();
  }

  /// Adds a node producing the packed form of source output `v` under v's own name.
  ValueId addPacked(ValueId v, const std::string& op, std::vector<ValueId> inputs, Attrs attrs, int64_t block) {
    const Node& node = m_src.node(m_src.value(v).producer);
    auto outs = m_rw.target().addNode(op, std::move(inputs), std::move(attrs), node.location, m_src.value(v).name);
    m_packed[v] = Packed{outs[0], block};
    return outs[0];
  }

  bool rewrite(NodeId n) {
    const Node& node = m_src.node(n);
    if (node.outputs.size() != 1 || m_src.type(node.outputs[0]).dtype != DType::Float32) return false;
    if (node.op == "conv2d") return rewriteConv(node);
    if (node.inputs.empty() || !anyPacked(node)) return false;
    const OpDef* def = findOp(node.op);
    if (def && def->pattern == OpPattern::ElemWise && node.inputs.size() == 1) return keepPacked(node, {});
    if (isBinaryElementwise(node.op)) return rewriteBinary(node);
    if (isPool(node.op) && packedOf(node.inputs[0])) return keepPacked(node, {});
    if (node.op == "concat") return rewriteConcat(node);
    return false;
  }

  bool anyPacked(const Node& node) const {
    for (ValueId v : node.inputs)
      if (packedOf(v)) return true;
    return false;
  }

  /// The same op on the packed input (single-input ops whose lowering is layout-agnostic).
  bool keepPacked(const Node& node, Attrs extra) {
    ValueId in = node.inputs[0];
    const Packed* p = packedOf(in);
    if (!p || m_src.type(in).rank() != 4) return false;
    Attrs attrs = node.attrs;
    for (const auto& [k, v] : extra.values()) attrs.set(k, v);
    addPacked(node.outputs[0], node.op, {p->value}, attrs, p->block);
    bump(m_counters, "packed-ops");
    return true;
  }

  bool rewriteConv(const Node& node) {
    const Value& w = m_src.value(node.inputs[1]);
    const TensorType& xt = m_src.type(node.inputs[0]);
    if (!w.isConstant() || xt.rank() != 4 || xt.dtype != DType::Float32) return false;
    if (node.inputs.size() == 3 && m_src.type(node.inputs[2]).rank() != 1) return false;
    int64_t groups = node.attrs.getInt("groups", 1);
    int64_t c = xt.shape[1], oc = w.type.shape[0];
    bool depthwise = groups > 1 && groups == c && oc == c;
    if (groups != 1 && !depthwise) return false;
    const TensorType& yt = m_src.type(node.outputs[0]);
    int64_t outBlock = blockFor(oc), inBlock = depthwise ? outBlock : blockFor(c);
    const Shape& ws = w.type.shape;
    bool flat = lower::packedConvFlattens(ws[2], ws[3], node.attrs.getPair("stride", 1),
                                          node.attrs.getPair("padding", 0), yt.shape[3], m_lower);
    lower::ConvGeometry geometry = lower::convGeometry(node.op, node.attrs, {xt, w.type});
    bool winogradOk = !depthwise && lower::winogradEligible(geometry);
    int64_t algo = winogradOk ? std::min<int64_t>(lower::packedConvAlgo(geometry, m_lower), m_winograd) : 0;
    // The row a register tile runs along: output columns, a pointwise conv's flattened pixels, or
    // Winograd's list of output tiles (16 for a 7×7 output at F(2×2), where 7 columns would
    // wrongly call for a tile of many channels and few columns).
    int64_t rowWidth = flat ? yt.shape[2] * yt.shape[3] : yt.shape[3];
    if (algo != 0)
      rowWidth = geometry.n * ((geometry.outHeight() + algo - 1) / algo) * ((geometry.outWidth() + algo - 1) / algo);
    int ocVecs = lower::packedConvOcVecs(oc, outBlock, rowWidth, depthwise, m_lower);
    if (m_schedules && !depthwise) {
      std::string key = lower::packedConvTuneKey(geometry, xt.dtype);
      if (const lower::Knobs* tuned = m_schedules->find(key)) {
        int64_t v = lower::knob(*tuned, "oc_vecs", ocVecs);
        if (v >= 1 && (oc / outBlock) % v == 0 && lower::packedConvTileFits(v, 1, m_lower)) ocVecs = static_cast<int>(v);
        int64_t a = lower::knob(*tuned, "algo", 0);
        algo = winogradOk && (a == 2 || a == 4) ? a : 0;
      }
    }
    if (algo > m_winograd) algo = m_winograd;  // 4 → 2 when only F(2×2) is allowed, → 0 when none
    int64_t weightBlock = outBlock * ocVecs;

    ValueId x = ensurePacked(node.inputs[0], inBlock);
    if (algo != 0) return addWinograd(node, x, static_cast<int>(algo), inBlock, outBlock, weightBlock);
    ValueId wp = m_rw.addConstant(w.name + "_packed", packConvWeight(*w.constant, inBlock, weightBlock, depthwise));
    std::vector<ValueId> inputs = {x, wp};
    if (node.inputs.size() == 3) inputs.push_back(ensurePlain(node.inputs[2]));
    Attrs attrs = node.attrs;
    attrs.set("groups", groups);
    attrs.set("data_layout", layoutName(inBlock));
    attrs.set("kernel_layout", "OIHW" + std::to_string(depthwise ? 1 : inBlock) + "i" + std::to_string(weightBlock) + "o");
    attrs.set("out_layout", layoutName(outBlock));
    addPacked(node.outputs[0], "conv2d_nchwc", std::move(inputs), attrs, outBlock);
    ++m_convs;
    bump(m_counters, "convs");
    return true;
  }

  /// conv2d_winograd_nchwc with the weight transformed for F(m×m, 3×3) (stride and dilation
  /// are 1, groups 1: only padding carries over).
  bool addWinograd(const Node& node, ValueId x, int m, int64_t inBlock, int64_t outBlock, int64_t weightBlock) {
    const Value& w = m_src.value(node.inputs[1]);
    ValueId u = m_rw.addConstant(w.name + "_winograd" + std::to_string(m), winogradConvWeight(*w.constant, m, weightBlock));
    std::vector<ValueId> inputs = {x, u};
    if (node.inputs.size() == 3) inputs.push_back(ensurePlain(node.inputs[2]));
    Attrs attrs;
    attrs.set("padding", node.attrs.getPair("padding", 0));
    attrs.set("tile", int64_t{m});
    attrs.set("data_layout", layoutName(inBlock));
    attrs.set("kernel_layout", "wino" + std::to_string(m) + "_OAAI" + std::to_string(weightBlock) + "o");
    attrs.set("out_layout", layoutName(outBlock));
    addPacked(node.outputs[0], "conv2d_winograd_nchwc", std::move(inputs), attrs, outBlock);
    ++m_convs;
    bump(m_counters, "convs");
    return true;
  }

  /// Broadcasting binary op with a rank-4 result: every operand in the packed form.
  bool rewriteBinary(const Node& node) {
    const TensorType& yt = m_src.type(node.outputs[0]);
    if (yt.rank() != 4) return false;
    int64_t c = yt.shape[1], block = blockFor(c);
    for (ValueId v : node.inputs)
      if (!canPackOperand(v, c, block)) return false;
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) inputs.push_back(packOperand(v, c, block));
    addPacked(node.outputs[0], node.op, std::move(inputs), node.attrs, block);
    bump(m_counters, "packed-ops");
    return true;
  }

  /// `v` as a rank-4 shape (leading 1s added), or empty when it has more axes.
  Shape shape4(ValueId v) const {
    Shape s = m_src.type(v).shape;
    if (s.size() > 4) return {};
    s.insert(s.begin(), 4 - s.size(), 1);
    return s;
  }

  /// Whether packOperand can give `v` a form broadcasting against [N, C/block, H, W, block].
  bool canPackOperand(ValueId v, int64_t channels, int64_t block) const {
    if (const Packed* p = packedOf(v); p && p->block == block) return true;
    Shape s = shape4(v);
    if (s.empty() || (s[1] != channels && s[1] != 1)) return false;
    return m_src.value(v).isConstant() || m_src.type(v).rank() == 4;
  }

  ValueId packOperand(ValueId v, int64_t channels, int64_t block) {
    if (const Packed* p = packedOf(v); p && p->block == block) return p->value;
    const Value& value = m_src.value(v);
    Shape s = shape4(v);
    if (value.isConstant()) {
      std::string stem = value.name + "_" + lowerCase(layoutName(block));
      if (s[1] == 1) return m_rw.addConstant(stem, value.constant->clone().reshaped({s[0], 1, s[2], s[3], 1}));
      return m_rw.addConstant(stem, packChannels(value.constant->reshaped(s), block));
    }
    if (s[1] == channels) return ensurePacked(v, block);
    Attrs attrs{{"shape", std::vector<int64_t>{s[0], 1, s[2], s[3], 1}}};
    return m_rw.addNode("reshape", {ensurePlain(v)}, attrs, locationOf(v), value.name + "_nchw1c");
  }

  /// concat along channels: allowed when every input and the result share one block.
  bool rewriteConcat(const Node& node) {
    const TensorType& yt = m_src.type(node.outputs[0]);
    int64_t axis = node.attrs.getInt("axis");
    if (yt.rank() != 4 || (axis != 1 && axis != -3)) return false;
    int64_t block = blockFor(yt.shape[1]);
    for (ValueId v : node.inputs) {
      if (m_src.type(v).rank() != 4 || blockFor(m_src.type(v).shape[1]) % block != 0 ||
          m_src.type(v).shape[1] % block != 0)
        return false;
    }
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) inputs.push_back(ensurePacked(v, block));
    Attrs attrs = node.attrs;
    attrs.set("axis", int64_t{1});
    addPacked(node.outputs[0], "concat", std::move(inputs), attrs, block);
    bump(m_counters, "packed-ops");
    return true;
  }

  const Graph& m_src;
  GraphRewriter m_rw;
  PassCounters* m_counters;
  std::shared_ptr<const lower::ScheduleConfigs> m_schedules;
  int m_winograd = 4;  // the largest Winograd tile allowed
  lower::LowerOptions m_lower;
  std::vector<bool> m_plain;  // source value → its plain version exists in the target
  std::map<ValueId, Packed> m_packed;
  int m_convs = 0;
};

}  // namespace

bool alterLayout(Graph& graph, const AlterLayoutOptions& options, PassCounters* counters) {
  Graph out;
  if (!LayoutRewriter(graph, options, counters).run(out)) return false;
  graph = std::move(out);
  return true;
}

}  // namespace kiln::core::passes
