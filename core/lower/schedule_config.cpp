// Schedule configurations and tuning keys; see schedule_config.h.
#include "core/lower/schedule_config.h"

#include <charconv>

#include "core/ir/op_registry.h"
#include "core/lower/gemm_search.h"
#include "runtime/error.h"

namespace kiln::core::lower {

std::string knobsText(const Knobs& knobs) {
  std::string out;
  for (const auto& [name, value] : knobs) {
    if (!out.empty()) out += ',';
    out += name + '=' + std::to_string(value);
  }
  return out;
}

Knobs parseKnobs(std::string_view text) {
  Knobs knobs;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    size_t eq = item.find('=');
    int64_t value = 0;
    if (eq == std::string_view::npos || eq == 0)
      throw Error("malformed knob '" + std::string(item) + "', expected name=value", ErrorKind::InvalidInput);
    std::string_view digits = item.substr(eq + 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty())
      throw Error("malformed knob value '" + std::string(item) + "', expected an integer", ErrorKind::InvalidInput);
    knobs[std::string(item.substr(0, eq))] = value;
    start = end + 1;
  }
  return knobs;
}

int64_t knob(const Knobs& knobs, const std::string& name, int64_t fallback) {
  auto it = knobs.find(name);
  return it == knobs.end() ? fallback : it->second;
}

const Knobs* ScheduleConfigs::find(const std::string& key) const {
  auto it = byKey.find(key);
  return it == byKey.end() ? nullptr : &it->second;
}

const std::string* ScheduleConfigs::findTrace(const std::string& key) const {
  auto it = traces.find(key);
  return it == traces.end() ? nullptr : &it->second;
}

int64_t ConvGeometry::outHeight() const { return windowOutputSize(h, kh, sh, ph, dh, false); }
int64_t ConvGeometry::outWidth() const { return windowOutputSize(w, kw, sw, pw, dw, false); }
double ConvGeometry::flops() const {
  return 2.0 * static_cast<double>(n * o * outHeight() * outWidth()) * static_cast<double>(c / groups * kh * kw);
}

TuneKeyParts parseTuneKey(std::string_view key) {
  // Nests (nest_search.h): the kind, then a group's workload key.
  for (std::string_view kind : {"nest", "reduce", "pool", "window"}) {
    if (key.size() < kind.size() + 1 || key.substr(0, kind.size()) != kind || key[kind.size()] != ':')
      continue;
    if (key.size() == kind.size() + 1)
      throw Error("malformed tuning key '" + std::string(key) + "'", ErrorKind::InvalidInput);
    return {std::string(kind), {}, "f32", std::string(key.substr(kind.size() + 1))};
  }
  size_t a = key.find(':'), b = key.rfind(':');
  if (a == std::string_view::npos || a == b || a == 0)
    throw Error("malformed tuning key '" + std::string(key) + "'", ErrorKind::InvalidInput);
  return {std::string(key.substr(0, a)),
          parseKnobs(key.substr(a + 1, b - a - 1)),
          std::string(key.substr(b + 1)),
          {}};
}

ConvGeometry convGeometryOfKey(const Knobs& p) {
  ConvGeometry g;
  g.n = knob(p, "n", 1), g.c = knob(p, "c", 1), g.h = knob(p, "h", 1), g.w = knob(p, "w", 1);
  g.o = knob(p, "o", 1), g.kh = knob(p, "kh", 1), g.kw = knob(p, "kw", 1);
  g.sh = knob(p, "sh", 1), g.sw = knob(p, "sw", 1), g.ph = knob(p, "ph", 0), g.pw = knob(p, "pw", 0);
  g.dh = knob(p, "dh", 1), g.dw = knob(p, "dw", 1), g.groups = knob(p, "g", 1);
  return g;
}

namespace {

/// "kind:n=1,c=64,...,g=1:dtype".
std::string convTuneKey(const char* kind, const ConvGeometry& g, DType dtype) {
  Knobs p{{"n", g.n},   {"c", g.c},   {"h", g.h},   {"w", g.w},   {"o", g.o},   {"kh", g.kh}, {"kw", g.kw},
          {"sh", g.sh}, {"sw", g.sw}, {"ph", g.ph}, {"pw", g.pw}, {"dh", g.dh}, {"dw", g.dw}, {"g", g.groups}};
  // Parameters in a fixed, readable order (not the map's alphabetical one).
  std::string text;
  for (const char* name : {"n", "c", "h", "w", "o", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "g"})
    text += (text.empty() ? "" : ",") + std::string(name) + "=" + std::to_string(p[name]);
  return std::string(kind) + ":" + text + ":" + std::string(dtypeName(dtype));
}

}  // namespace

std::string packedConvTuneKey(const ConvGeometry& g, DType dtype) {
  return convTuneKey("conv2d_nchwc", g, dtype);
}

std::string planarConvTuneKey(const ConvGeometry& g, DType dtype) { return convTuneKey("conv2d", g, dtype); }

ConvGeometry convGeometry(const std::string& op, const Attrs& attrs, const std::vector<TensorType>& in) {
  const Shape &x = in[0].shape, &w = in[1].shape;
  ConvGeometry g;
  g.n = x[0], g.h = x[2], g.w = x[3];
  g.kh = w[2], g.kw = w[3];
  if (op == "conv2d_nchwc") {
    g.c = x[1] * x[4];
    g.o = w[0] * w[5];
  } else if (op == "qnn.conv2d_nchwc") {  // w [O/ob, C/4, KH, KW, ob, 4] (depthwise [.., ob, 1])
    g.c = x[1] * x[4];
    g.o = w[0] * w[4];
  } else if (op == "conv2d_winograd_nchwc") {  // w [O/ob, α, α, C, ob]: a 3×3 filter
    g.c = x[1] * x[4];
    g.o = w[0] * w[4];
    g.kh = g.kw = 3;
  } else {
    g.c = x[1];
    g.o = w[0];
  }
  auto s = attrs.getPair("stride", 1), p = attrs.getPair("padding", 0), d = attrs.getPair("dilation", 1);
  g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  g.groups = attrs.getInt("groups", 1);
  return g;
}

std::string quantizedConvTuneKey(const ConvGeometry& g, int64_t inBlock, int64_t outBlock) {
  std::string key = packedConvTuneKey(g, DType::UInt8);
  return key.insert(key.rfind(':'), ",ib=" + std::to_string(inBlock) + ",ob=" + std::to_string(outBlock));
}

std::string denseTuneKey(int64_t m, int64_t k, int64_t n, DType dtype) {
  return "dense:m=" + std::to_string(m) + ",k=" + std::to_string(k) + ",n=" + std::to_string(n) + ":" +
         std::string(dtypeName(dtype));
}

std::string tuneKeyOf(const std::string& op, const Attrs& attrs, const std::vector<TensorType>& in,
                      const std::vector<TensorType>& out) {
  if (op == "conv2d_nchwc" && in.size() >= 2 && in[0].rank() == 5 && in[1].rank() == 6)
    return packedConvTuneKey(convGeometry(op, attrs, in), in[0].dtype);
  if ((op == "conv2d" || op == "qnn.conv2d") && in.size() >= 2 && in[0].rank() == 4 && in[1].rank() == 4)
    return planarConvTuneKey(convGeometry(op, attrs, in), in[0].dtype);
  if (op == "qnn.conv2d_nchwc" && in.size() >= 2 && in[0].rank() == 5 && in[1].rank() == 6)
    return quantizedConvTuneKey(convGeometry(op, attrs, in), in[0].shape[4], in[1].shape[4]);
  if (op == "conv2d_winograd_nchwc" && in.size() >= 2 && in[0].rank() == 5 && in[1].rank() == 5)
    return packedConvTuneKey(convGeometry(op, attrs, in), in[0].dtype);
  if ((op == "dense" || op == "qnn.dense") && in.size() >= 2 && in[0].rank() >= 1 && in[1].rank() == 2) {
    int64_t m = 1;
    for (size_t d = 0; d + 1 < in[0].shape.size(); ++d) m *= in[0].shape[d];
    return denseTuneKey(m, in[0].shape.back(), in[1].shape[0], in[0].dtype);
  }
  if (op == "dense_packed" && in.size() >= 2 && in[0].rank() >= 1 && in[1].rank() == 3 && in[0].dtype == DType::Float32) {
    DensePackedShape s;
    for (size_t d = 0; d + 1 < in[0].shape.size(); ++d) s.m *= in[0].shape[d];
    s.k = in[0].shape.back(), s.panel = in[1].shape[2], s.n = in[1].shape[0] * s.panel;
    s.bias = in.size() == 3;
    return densePackedTuneKey(s, in[0].dtype);
  }
  if (op == "matmul" && in.size() == 2 && in[0].dtype == DType::Float32 && in[0].rank() >= 1 &&
      in[1].rank() >= 1) {
    // A vector operand is keyed as the matrix it is lowered as (a first one a row, a second one a
    // column): the same plain nest, so the same traces.
    const Shape& a = in[0].shape;
    const Shape& b = in[1].shape;
    std::optional<MatmulShape> s =
        matmulShape(a.size() == 1 ? Shape{1, a[0]} : a, b.size() == 1 ? Shape{b[0], 1} : b);
    if (s) return matmulTuneKey(*s, in[0].dtype);
  }
  return "";
}

}  // namespace kiln::core::lower
