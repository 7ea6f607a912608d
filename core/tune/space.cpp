// Enumerated schedule spaces and cost-model features; see space.h.
#include "core/tune/space.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/lower/conv_search.h"
#include "core/lower/gemm_search.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "core/lower/winograd_search.h"
#include "runtime/error.h"

namespace kiln::core::tune {

using lower::knob;
using lower::Knobs;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// What a packed-conv task's shape implies on this target.
struct ConvPlan {
  lower::ConvGeometry g;
  int64_t block = 1;    // output channel block L
  bool depthwise = false;
  bool pointwise = false;
  bool winograd = false;  // eligible for Winograd (the algo knob)
  int64_t elementBytes = 4;
  int64_t rowWidth(bool flatten) const { return flatten ? g.outHeight() * g.outWidth() : g.outWidth(); }
};

ConvPlan convPlan(const Knobs& p, const lower::LowerOptions& options) {
  ConvPlan plan;
  plan.g = lower::convGeometryOfKey(p);
  const lower::ConvGeometry& g = plan.g;
  plan.block = lower::channelBlock(g.o, options);
  plan.depthwise = g.groups > 1;
  plan.winograd = lower::winogradEligible(g);
  if (p.count("ob")) {  // int8 (qnn.conv2d_nchwc): the key's block, one byte per element, direct only
    plan.block = p.at("ob"), plan.elementBytes = 1;
    plan.winograd = false;
  }
  plan.pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  return plan;
}

float lg(double v) { return static_cast<float>(std::log2(std::max(1.0, v))); }

}  // namespace

ConfigSpace ConfigSpace::forKey(const std::string& key, const lower::LowerOptions& options) {
  ConfigSpace space;
  lower::TuneKeyParts parts = lower::parseTuneKey(key);
  space.m_key = key;
  space.m_kind = parts.kind;
  space.m_params = parts.params;
  space.m_options = options;
  // A sketch annotation (conv_search.h, winograd_search.h) at the runtime's default launch
  // granularity first, then at the others (par_chunks, left out at the default).
  std::vector<int64_t> chunkOrder{lower::defaultParallelChunks()};
  for (int64_t c : lower::parallelChunkChoices())
    if (c != lower::defaultParallelChunks()) chunkOrder.push_back(c);
  auto addChunked = [&](const Knobs& k) {
    space.m_defaults["par_chunks"] = lower::defaultParallelChunks();
    for (int64_t chunks : chunkOrder) {
      Knobs c = k;
      if (chunks != lower::defaultParallelChunks()) c["par_chunks"] = chunks;
      if (!space.m_index.count(c)) space.add(std::move(c));
    }
  };
  if (parts.kind == "conv2d_nchwc") {
    ConvPlan plan = convPlan(parts.params, options);
    int64_t blocks = plan.g.o / plan.block;
    // The sketch's annotations (conv_search.h) for every packing, each default a seed, each at
    // every granularity. The direct kernel's annotations have no algo: a Winograd point's
    // neighbour along algo.
    if (plan.winograd) space.m_defaults["algo"] = 0;
    for (int64_t v : {1, 2, 3, 4, 6, 8}) {
      if (blocks % v != 0) continue;
      std::optional<lower::ConvSketchShape> s = lower::convSketchShapeOfKey(key, v, options.vectorLanes);
      if (!s) continue;
      space.m_seeds.push_back(space.size());
      addChunked(lower::convSketchDefaultKnobs(*s, options.vectorRegisters));
      for (Knobs& k : lower::convSketchAnnotations(*s, options.vectorRegisters)) addChunked(k);
    }
    // Winograd: the sketch's annotations (winograd_search.h) of each tile size and packing, as
    // above.
    for (int64_t m : {4, 2}) {
      if (!plan.winograd) break;
      if (m > options.winograd) continue;  // --winograd 2 or 0: the build would not run it
      for (int64_t v : {1, 2, 3, 4, 6, 8}) {
        if (blocks % v != 0) continue;
        std::optional<lower::WinogradShape> s =
            lower::winogradShapeOfKey(key, static_cast<int>(m), v, options.vectorLanes);
        if (!s) continue;
        space.m_seeds.push_back(space.size());
        addChunked(lower::winogradSketchDefaultKnobs(*s, options.vectorRegisters));
        for (Knobs& k : lower::winogradSketchAnnotations(*s, options.vectorRegisters)) addChunked(k);
      }
    }
  } else if (parts.kind == "conv2d") {
    // A plain NCHW convolution (conv_search.h "NCHW"): the default annotation first, then every
    // annotation of each weight group V, each at every granularity.
    std::optional<lower::ConvSketchShape> one = lower::convSketchShapeOfKey(key, 1, options.vectorLanes);
    if (!one) throw Error("tuning key '" + key + "' has no NCHW sketch", ErrorKind::InvalidInput);
    space.m_seeds.push_back(space.size());
    addChunked(lower::convSketchDefaultKnobs(*one, options.vectorRegisters));
    for (int64_t v : {1, 2, 3, 4, 6, 8}) {
      std::optional<lower::ConvSketchShape> s = lower::convSketchShapeOfKey(key, v, options.vectorLanes);
      if (!s) continue;
      const int64_t first = space.size();
      for (Knobs& k : lower::convSketchAnnotations(*s, options.vectorRegisters)) addChunked(k);
      if (space.size() > first) space.m_seeds.push_back(first);
    }
  } else if (parts.kind == "dense") {
    // The default annotation first (what an untuned build runs), then every other that fits
    // (gemm_search.h).
    lower::DenseShape s = lower::denseShapeOfKey(parts.params, key);
    Knobs first = lower::denseDefaultKnobs(s, options.vectorRegisters);
    space.add(first);
    for (Knobs& k : lower::denseAnnotations(s, options.vectorRegisters))
      if (k != first) space.add(std::move(k));
  } else if (parts.kind == "matmul") {
    // The default annotation first (what an untuned build runs), then every other that fits
    // (gemm_search.h).
    lower::MatmulShape s = lower::matmulShapeOfKey(parts.params, key);
    Knobs first = lower::matmulDefaultKnobs(s, options.vectorLanes, lower::accumulatorBudget(options));
    space.add(first);
    for (Knobs& k : lower::matmulAnnotations(s, options.vectorLanes))
      if (k != first) space.add(std::move(k));
  } else if (parts.kind == "dense_packed") {
    // The default annotation first (what an untuned build runs), then every other that fits.
    lower::DensePackedShape s = lower::densePackedShapeOfKey(parts.params, key);
    const int lanes = lower::densePackedLanes(s, options.vectorLanes);
    Knobs first = lower::densePackedDefaultKnobs(s, lanes, options.vectorRegisters);
    space.add(first);
    for (Knobs& k : lower::densePackedAnnotations(s, lanes, options.vectorRegisters))
      if (k != first) space.add(std::move(k));
  } else if (parts.kind == "nest") {
    // The default annotation first (nest_search.h), then the others.
    space.m_params["numel"] = lower::elementNestOutputs(key);
    for (Knobs& k : lower::elementNestAnnotations(space.m_params["numel"], options)) space.add(std::move(k));
  } else if (parts.kind == "pool") {
    // The window nest's annotations (conv_search.h), the default first, each at every
    // granularity.
    const lower::ConvSketchShape s = lower::poolSketchShapeOfKey(key);
    space.m_params = {
        {"blocks", s.n * s.groups}, {"rows", s.rows}, {"pixels", s.pixels}, {"taps", s.kh * s.kw}};
    addChunked(lower::convSketchDefaultKnobs(s, options.vectorRegisters));
    for (Knobs& k : lower::convSketchAnnotations(s, options.vectorRegisters)) addChunked(k);
  } else if (parts.kind == "window") {
    // The plain window nest's annotations (nest_search.h), the default first.
    const lower::WindowNestShape s = lower::windowNestShapeOfKey(key);
    space.m_params = {{"numel", s.outputs}, {"taps", s.taps}};
    for (Knobs& k : lower::windowNestAnnotations(s)) space.add(std::move(k));
  } else if (parts.kind == "reduce") {
    lower::RowNestShape s = lower::rowNestShapeOfKey(key);
    space.m_params["rows"] = s.rows;
    space.m_params["length"] = s.length;
    for (Knobs& k : lower::rowNestAnnotations(s, options)) space.add(std::move(k));
  } else {
    throw Error("tuning key '" + key + "' names no tunable operator", ErrorKind::InvalidInput);
  }
  // A knob that some configurations leave out takes its default there.
  for (const auto& [name, value] : space.m_defaults)
    if (space.m_values.count(name)) space.m_values[name].push_back(value);
  for (auto& [name, values] : space.m_values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
  }
  return space;
}

void ConfigSpace::add(Knobs knobs) {
  for (const auto& [name, value] : knobs) m_values[name].push_back(value);
  m_index.emplace(knobs, static_cast<int64_t>(m_configs.size()));
  m_configs.push_back(std::move(knobs));
}

Knobs ConfigSpace::canonical(Knobs knobs) const {
  for (const auto& [name, value] : m_defaults) {
    auto it = knobs.find(name);
    if (it != knobs.end() && it->second == value) knobs.erase(it);
  }
  return knobs;
}

std::optional<int64_t> ConfigSpace::indexOf(const Knobs& knobs) const {
  auto it = m_index.find(canonical(knobs));
  if (it == m_index.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> ConfigSpace::neighbors(int64_t index) const {
  std::vector<int64_t> out;
  const Knobs& base = config(index);
  for (const auto& [name, values] : m_values) {
    auto own = base.find(name);
    auto fallback = m_defaults.find(name);
    if (own == base.end() && fallback == m_defaults.end()) continue;  // not a knob of this point
    int64_t current = own != base.end() ? own->second : fallback->second;
    for (int64_t v : values) {
      if (v == current) continue;
      Knobs other = base;
      other[name] = v;
      if (auto i = indexOf(other)) out.push_back(*i);
    }
  }
  return out;
}

std::optional<int64_t> ConfigSpace::crossover(int64_t a, int64_t b, std::mt19937_64& rng) const {
  const Knobs &x = config(a), &y = config(b);
  auto sameName = [](const auto& p, const auto& q) { return p.first == q.first; };
  if (x.size() != y.size() || !std::equal(x.begin(), x.end(), y.begin(), sameName))
    return std::nullopt;  // different schedule families
  std::bernoulli_distribution coin(0.5);
  for (int attempt = 0; attempt < 4; ++attempt) {
    Knobs child;
    for (auto xi = x.begin(), yi = y.begin(); xi != x.end(); ++xi, ++yi)
      child.emplace(xi->first, coin(rng) ? xi->second : yi->second);
    std::optional<int64_t> i = indexOf(child);
    if (i && *i != a && *i != b) return i;
  }
  return std::nullopt;
}

std::vector<float> ConfigSpace::features(int64_t index) const {
  const Knobs& k = config(index);
  std::vector<float> f;
  float threads = static_cast<float>(std::max(1u, std::thread::hardware_concurrency()));
  if (m_kind == "conv2d_nchwc") {
    ConvPlan plan = convPlan(m_params, m_options);
    const lower::ConvGeometry& g = plan.g;
    // An annotation (mi pixels × oc_vecs vectors, po: channel groups outermost) is a tile of mi
    // columns (of the flattened pixels at stride 1), unrolled by the whole block.
    int64_t v = k.at("oc_vecs"), b = k.at("mi"), flatten = plan.pointwise ? 1 : 0, ocOuter = k.at("po");
    int64_t algo = knob(k, "algo", 0), vectors = v;  // accumulator vectors per column
    double chunks = static_cast<double>(knob(k, "par_chunks", lower::defaultParallelChunks())) * threads;
    int64_t row = plan.rowWidth(flatten != 0), tiles = ceilDiv(row, b);
    int64_t rows = flatten ? 1 : g.outHeight();
    double parallel = static_cast<double>(g.n * (g.o / plan.block / v) * rows);
    double cin = static_cast<double>(plan.depthwise ? 1 : g.c / g.groups);
    double taps = static_cast<double>(g.kh * g.kw);  // multiplies per output and input channel
    if (algo != 0) {
      // Winograd: the "row" is the flat tile list; α² multiplies per m² outputs.
      int64_t all = g.n * ceilDiv(g.outHeight(), algo) * ceilDiv(g.outWidth(), algo);
      row = all, tiles = ceilDiv(all, b), rows = 1;
      parallel = static_cast<double>((g.o / plan.block / v) * tiles);
      taps = static_cast<double>((algo + 2) * (algo + 2)) / static_cast<double>(algo * algo);
    }
    const auto bytes = static_cast<double>(plan.elementBytes);
    double weightTileKb = cin * taps * static_cast<double>(plan.block * v) * bytes / 1024;
    double inputRowKb = static_cast<double>(g.c * g.w * g.kh) * bytes / 1024;
    f = {static_cast<float>(v),
         static_cast<float>(b),
         static_cast<float>(flatten),
         static_cast<float>(ocOuter),
         static_cast<float>(vectors * b),                                    // accumulators
         static_cast<float>(vectors * b) / static_cast<float>(vectors + b),  // FMAs per load
         static_cast<float>(tiles),
         static_cast<float>(tiles * b - row) / static_cast<float>(row),  // padded tile share
         static_cast<float>(parallel / threads),                         // iterations per thread
         static_cast<float>(std::fmod(parallel, threads)),               // load imbalance
         lg(weightTileKb * 1024),
         lg(inputRowKb * 1024),
         lg(cin),
         lg(static_cast<double>(g.o)),
         lg(static_cast<double>(g.outHeight() * g.outWidth())),
         static_cast<float>(g.kh * g.kw),
         static_cast<float>(g.sh),
         static_cast<float>(plan.depthwise),
         static_cast<float>(algo),
         static_cast<float>(taps),
         lg(chunks / threads),                                       // parallel granularity
         static_cast<float>(parallel / std::min(parallel, chunks)),  // iterations per chunk
         static_cast<float>(std::fmod(parallel, std::min(parallel, chunks)))};
    return f;
  }
  if (m_kind == "conv2d") {
    // A tile of oc_vecs output channels × mi vectors of output columns, the weight broadcast and
    // the input loaded once per vector; the weight groups (with the images) run in parallel.
    const lower::ConvGeometry g = lower::convGeometryOfKey(m_params);
    const int64_t v = k.at("oc_vecs"), mi = k.at("mi"), lanes = m_options.vectorLanes;
    const int64_t width = mi * lanes, columns = g.outWidth(), tiles = ceilDiv(columns, width);
    const double chunks =
        static_cast<double>(knob(k, "par_chunks", lower::defaultParallelChunks())) * threads;
    const double parallel = static_cast<double>(g.n * (g.o / v));
    const double cin = static_cast<double>(g.c / g.groups), taps = static_cast<double>(g.kh * g.kw);
    f = {static_cast<float>(v),
         static_cast<float>(mi),
         static_cast<float>(v * mi),                               // accumulators
         static_cast<float>(v * mi) / static_cast<float>(v + mi),  // FMAs per load
         static_cast<float>(tiles),
         static_cast<float>(columns % width) / static_cast<float>(columns),  // columns in the tail tile
         static_cast<float>(parallel / threads),
         static_cast<float>(std::fmod(parallel, threads)),
         lg(cin * taps * static_cast<double>(v) * 4),  // a tile's weights in bytes
         lg(cin),
         lg(static_cast<double>(g.o)),
         lg(static_cast<double>(g.outHeight() * g.outWidth())),
         static_cast<float>(taps),
         static_cast<float>(g.sw),
         static_cast<float>(g.groups == g.c),
         lg(chunks / threads),
         static_cast<float>(parallel / std::min(parallel, chunks))};
    return f;
  }
  if (m_kind == "matmul") {
    lower::MatmulShape s = lower::matmulShapeOfKey(m_params, m_key);
    bool hand = !k.count("mi");
    int64_t lanes = m_options.vectorLanes;
    // The one-column form's annotation has no vectors of columns (0).
    int64_t rows = hand ? k.at("rows") : k.at("mi"), vecs = hand ? k.at("cols") : knob(k, "nv", 0);
    int64_t kt = knob(k, "kt", 0), par = hand ? 3 : knob(k, "par", 0);
    int64_t width = std::max<int64_t>(1, vecs * lanes);
    double parallel = par == 0   ? 1.0
                      : par == 1 ? static_cast<double>(s.m / rows)
                      : par == 2 ? static_cast<double>(s.batches)
                                 : static_cast<double>(s.batches * (s.m / rows));
    f = {static_cast<float>(hand),
         static_cast<float>(rows),
         static_cast<float>(vecs),
         lg(static_cast<double>(kt)),
         static_cast<float>(par),
         static_cast<float>(rows * vecs),                                   // accumulators
         static_cast<float>(rows * vecs) / static_cast<float>(rows + vecs),  // FMAs per load
         static_cast<float>(s.m % rows) / static_cast<float>(s.m),          // rows in the tail loop
         static_cast<float>(s.n % width) / static_cast<float>(s.n),         // columns in the tail loop
         static_cast<float>(parallel / threads),
         lg(static_cast<double>(s.batches)),
         lg(static_cast<double>(s.m)),
         lg(static_cast<double>(s.k)),
         lg(static_cast<double>(s.n))};
    return f;
  }
  if (m_kind == "nest") {
    const int64_t numel = m_params.at("numel"), lanes = k.at("vl"), unroll = k.at("un"), par = k.at("par");
    const double vectors = static_cast<double>(numel) / static_cast<double>(lanes);
    f = {static_cast<float>(lanes),
         static_cast<float>(unroll),
         static_cast<float>(par),
         lg(vectors),
         lg(par ? vectors / threads : vectors),  // vectors per thread
         lg(static_cast<double>(numel))};
    return f;
  }
  if (m_kind == "window") {
    // Vectors of vl lanes per output, each over the window's taps.
    const int64_t numel = m_params.at("numel"), lanes = k.at("vl"), par = k.at("par");
    const double vectors = static_cast<double>(numel) / static_cast<double>(lanes);
    f = {static_cast<float>(lanes),
         static_cast<float>(par),
         lg(vectors),
         lg(par ? vectors / threads : vectors),  // vectors per thread
         lg(static_cast<double>(m_params.at("taps"))),
         lg(static_cast<double>(numel))};
    return f;
  }
  if (m_kind == "pool") {
    // A tile of mi output columns (one vector each) over the window's taps; po = 1 runs the
    // channel blocks in parallel.
    const int64_t blocks = m_params.at("blocks"), rows = m_params.at("rows"), pixels = m_params.at("pixels");
    const int64_t mi = k.at("mi"), po = k.at("po");
    const double chunks =
        static_cast<double>(knob(k, "par_chunks", lower::defaultParallelChunks())) * threads;
    const double parallel = static_cast<double>(po ? blocks : rows);
    const int64_t tiles = ceilDiv(pixels, mi);
    f = {static_cast<float>(mi),
         static_cast<float>(po),
         static_cast<float>(tiles),
         static_cast<float>(tiles * mi - pixels) / static_cast<float>(pixels),  // padded tile share
         static_cast<float>(parallel / threads),                                // iterations per thread
         static_cast<float>(std::fmod(parallel, threads)),                      // load imbalance
         lg(chunks),
         lg(static_cast<double>(m_params.at("taps"))),
         lg(static_cast<double>(rows * pixels)),
         lg(static_cast<double>(blocks))};
    return f;
  }
  if (m_kind == "reduce") {
    const int64_t rows = m_params.at("rows"), length = m_params.at("length");
    const int64_t lanes = k.at("vl"), accs = k.at("un"), par = k.at("par");
    const double steps = static_cast<double>(length) / static_cast<double>(lanes * accs);
    f = {static_cast<float>(lanes),
         static_cast<float>(accs),
         static_cast<float>(par),
         lg(steps),                                    // vector steps per row and accumulator
         static_cast<float>(length % (lanes * accs)),  // scalar iterations left per row
         lg(par ? static_cast<double>(rows) / threads : static_cast<double>(rows)),  // rows per thread
         lg(static_cast<double>(rows)),
         lg(static_cast<double>(length))};
    return f;
  }
  if (m_kind == "dense_packed") {
    lower::DensePackedShape s = lower::densePackedShapeOfKey(m_params, m_key);
    int64_t rows = k.at("mi"), vecs = k.at("nv"), panelsOuter = k.at("po");
    int64_t width = vecs * lower::densePackedLanes(s, m_options.vectorLanes), panels = s.n / s.panel;
    double parallel = static_cast<double>(panelsOuter ? panels : s.m / rows);
    f = {static_cast<float>(rows),
         static_cast<float>(vecs),
         static_cast<float>(panelsOuter),
         static_cast<float>(rows * vecs),                                   // accumulators
         static_cast<float>(rows * vecs) / static_cast<float>(rows + vecs),  // FMAs per load
         static_cast<float>(s.m % rows) / static_cast<float>(s.m),          // rows in the tail loop
         static_cast<float>(s.panel / std::max<int64_t>(1, width)),         // register tiles per panel row
         static_cast<float>(parallel / threads),
         static_cast<float>(std::fmod(parallel, threads)),  // load imbalance
         lg(static_cast<double>(s.k * s.panel) * 4),         // one panel's bytes
         lg(static_cast<double>(s.m)),
         lg(static_cast<double>(s.k)),
         lg(static_cast<double>(s.n))};
    return f;
  }
  // dense: a sketch annotation, or a record of the hand-written tile it replaced (rows, cols,
  // always parallel).
  const bool hand = !k.count("mi");
  int64_t rows = hand ? k.at("rows") : k.at("mi"), cols = hand ? k.at("cols") : k.at("nc");
  int64_t par = hand ? 1 : k.at("par");
  int64_t m = knob(m_params, "m", 1), kk = knob(m_params, "k", 1), n = knob(m_params, "n", 1);
  double parallel = par ? static_cast<double>(m / rows * std::max<int64_t>(1, n / cols)) : 1.0;
  f = {static_cast<float>(rows),
       static_cast<float>(cols),
       static_cast<float>(par),
       static_cast<float>(rows * cols),
       static_cast<float>(rows * cols) / static_cast<float>(rows + cols),
       static_cast<float>(n % cols) / static_cast<float>(n),
       static_cast<float>(parallel / threads),
       lg(static_cast<double>(m)),
       lg(static_cast<double>(kk)),
       lg(static_cast<double>(n))};
  return f;
}

}  // namespace kiln::core::tune
