#include "core/passes/pass_registry.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "core/passes/alter_layout.h"
#include "core/passes/eliminate_common_subexpressions.h"
#include "core/passes/eliminate_dead_code.h"
#include "core/passes/fold_constants.h"
#include "core/passes/fold_pad_into_conv.h"
#include "core/passes/fold_scale_axis.h"
#include "core/passes/fuse_ops.h"
#include "core/passes/inline_control_flow.h"
#include "core/passes/merge_parallel.h"
#include "core/passes/pack_dense.h"
#include "core/passes/pool_to_mean.h"
#include "core/passes/qnn_alter_layout.h"
#include "core/passes/simplify_inference.h"
#include "core/tir/bounds_check.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

const char* typeName(OptionType t) {
  switch (t) {
    case OptionType::Int: return "int";
    case OptionType::Float: return "float";
    case OptionType::Bool: return "bool";
    case OptionType::String: return "string";
  }
  return "?";
}

bool parseBool(const std::string& text, bool& out) {
  if (text == "1" || text == "true" || text == "on") return out = true, true;
  if (text == "0" || text == "false" || text == "off") return out = false, true;
  return false;
}

bool parseInt(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtoll(text.c_str(), &end, 10);
  return *end == '\0';
}

bool parseFloat(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return *end == '\0';
}

bool validValue(OptionType type, const std::string& text) {
  int64_t i = 0;
  double d = 0;
  bool b = false;
  switch (type) {
    case OptionType::Int: return parseInt(text, i);
    case OptionType::Float: return parseFloat(text, d);
    case OptionType::Bool: return parseBool(text, b);
    case OptionType::String: return true;
  }
  return false;
}

struct Registry {
  std::vector<std::unique_ptr<PassInfo>> passes;
  void add(PassInfo info) { passes.push_back(std::make_unique<PassInfo>(std::move(info))); }
  void graph(std::string name, std::string summary, int level, std::vector<PassOptionDef> options,
             std::function<bool(Graph&, const PassOptions&, PassCounters*)> run) {
    PassInfo info;
    info.name = std::move(name);
    info.summary = std::move(summary);
    info.minOptLevel = level;
    info.options = std::move(options);
    info.run = std::move(run);
    add(std::move(info));
  }
};

void registerPasses(Registry& r) {
  r.graph("simplify-inference",
          "batch_norm → per-channel mul + add; drop copies and identity reshapes/transposes",
          1,
          {},
          [](Graph& g, const PassOptions&, PassCounters* c) { return simplifyInference(g, c); });
  r.graph("fold-constants",
          "evaluate nodes whose inputs are all constants (lowered, then interpreted)",
          1,
          {{"max-elements", OptionType::Int, "65536",
            "fold larger results only when they do not outgrow their inputs"}},
          [](Graph& g, const PassOptions& o, PassCounters* c) {
            return foldConstants(g, FoldConstantsOptions{o.getInt("max-elements")}, c);
          });
  r.graph("inline-control-flow",
          "an if on a constant becomes its branch; a loop whose every condition is known is unrolled",
          1,
          {{"max-trip", OptionType::Int, "64", "the most iterations a loop is unrolled for"},
           {"max-nodes", OptionType::Int, "4096", "the most nodes one unrolled loop may add"}},
          [](Graph& g, const PassOptions& o, PassCounters* c) {
            return inlineControlFlow(g, InlineControlFlowOptions{o.getInt("max-trip"), o.getInt("max-nodes")}, c);
          });
  r.graph("fold-pad-into-conv",
          "zero constant pads of H and W feeding conv2d become the convolution's padding",
          2,
          {},
          [](Graph& g, const PassOptions&, PassCounters* c) { return foldPadIntoConv(g, c); });
  r.graph("fold-scale-axis",
          "fold per-channel mul/add/sub/div after conv2d/dense into its weights and bias",
          3,
          {},
          [](Graph& g, const PassOptions&, PassCounters* c) { return foldScaleAxis(g, c); });
  r.graph("eliminate-common-subexpressions",
          "merge equal constants and nodes applying the same op to the same inputs",
          1,
          {},
          [](Graph& g, const PassOptions&, PassCounters* c) { return eliminateCommonSubexpressions(g, c); });
  r.graph("eliminate-dead-code",
          "remove nodes and constants that no output depends on",
          1,
          {},
          [](Graph& g, const PassOptions&, PassCounters* c) { return eliminateDeadCode(g, c); });
  r.graph("alter-layout",
          "convolutions to the packed NCHW[x]c layout with pre-packed weights",
          3,
          {{"lanes", OptionType::Int, "8", "the channel block x (the f32 vector width)"},
           {"winograd", OptionType::Int, "4", "the largest Winograd output tile: 4, 2 or 0 (none)"}},
          [](Graph& g, const PassOptions& o, PassCounters* c) {
            const int64_t winograd = o.getInt("winograd");
            if (winograd != 0 && winograd != 2 && winograd != 4)
              throw Error("alter-layout: winograd must be 4, 2 or 0, got " + std::to_string(winograd), ErrorKind::Usage);
            return alterLayout(
                g, AlterLayoutOptions{static_cast<int>(o.getInt("lanes")), o.schedules, static_cast<int>(winograd)}, c);
          });
  r.graph("qnn-alter-layout",
          "quantized convolutions to packed u8 NCHW[x]c with int8 weights packed for the dot-product kernel",
          3,
          {{"lanes", OptionType::Int, "16", "the largest channel block (i32 lanes)"}},
          [](Graph& g, const PassOptions& o, PassCounters* c) {
            return qnnAlterLayout(g, QnnAlterLayoutOptions{static_cast<int>(o.getInt("lanes"))}, c);
          });
  r.graph("merge-parallel",
          "merge sibling conv2d/dense ops on one input into one wide op plus channel slices",
          4,
          {},
          [](Graph& g, const PassOptions&, PassCounters* c) { return mergeParallel(g, c); });
  r.graph("pack-dense",
          "dense layers (and matmuls by a constant matrix) over many rows get their weights packed into column panels",
          3,
          {{"lanes", OptionType::Int, "8", "f32 lanes of the target's vectors"},
           {"max-vectors", OptionType::Int, "3", "the most vectors in one panel"},
           {"min-rows", OptionType::Int, "16", "dense layers over fewer rows keep the dot-product kernel"}},
          [](Graph& g, const PassOptions& o, PassCounters* c) {
            return packDense(g,
                             PackDenseOptions{static_cast<int>(o.getInt("lanes")), static_cast<int>(o.getInt("max-vectors")),
                                              o.getInt("min-rows")},
                             c);
          });
  r.graph(
      "pool-to-mean",
      "average pools over whole NCHW planes become means over H and W (row reductions that fuse producers)",
      1, {}, [](Graph& g, const PassOptions&, PassCounters* c) { return poolToMean(g, c); });
  r.graph("fuse-ops",
          "fuse elementwise/broadcast/injective chains and anchor epilogues into primitive functions",
          2,
          {{"max-depth", OptionType::Int, "256", "the most nodes one fused group may hold"}},
          [](Graph& g, const PassOptions& o, PassCounters* c) {
            return fuseOps(g, FuseOpsOptions{o.getInt("max-depth")}, c);
          });

  // Loop-IR passes: run on every kernel after lowering.
  auto loop = [&r](std::string name, std::string summary, int level,
                   std::function<bool(tir::PrimFunc&, const PassOptions&)> run) {
    PassInfo info;
    info.name = std::move(name);
    info.summary = std::move(summary);
    info.minOptLevel = level;
    info.kind = PassKind::Loop;
    info.runLoop = std::move(run);
    r.add(std::move(info));
  };
  loop("simplify", "fold constants and trivial loops of the loop IR (lowering already ends with it)",
       kNoDefaultLevel, [](tir::PrimFunc& f, const PassOptions&) {
         f = tir::simplify(f);
         return true;
       });
  loop("fast-math", "let code generation reassociate, ignore signed zeros, contract and approximate functions", 4,
       [](tir::PrimFunc& f, const PassOptions&) {
         std::string& flags = f.attrs["fast_math"];
         bool changed = flags != "reassoc,nsz,contract,afn";
         flags = "reassoc,nsz,contract,afn";
         return changed;
       });
  loop("bounds-check",
       "check each load/store index the loop ranges do not prove in bounds when the kernel runs (debug, "
       "--bounds-check)",
       kNoDefaultLevel, [](tir::PrimFunc& f, const PassOptions&) {
         if (tir::hasBoundsChecks(f)) return false;
         f = tir::insertBoundsChecks(f);
         return true;
       });
}

const Registry& registry() {
  static const Registry* reg = [] {
    auto* r = new Registry();
    registerPasses(*r);
    return r;
  }();
  return *reg;
}

}  // namespace

int64_t PassOptions::getInt(const std::string& name) const {
  auto it = m_values.find(name);
  KILN_ASSERT(it != m_values.end(), "pass option '" + name + "' is not set");
  int64_t v = 0;
  KILN_ASSERT(parseInt(it->second, v), "pass option '" + name + "' is not an integer");
  return v;
}

double PassOptions::getFloat(const std::string& name) const {
  auto it = m_values.find(name);
  KILN_ASSERT(it != m_values.end(), "pass option '" + name + "' is not set");
  double v = 0;
  KILN_ASSERT(parseFloat(it->second, v), "pass option '" + name + "' is not a number");
  return v;
}

bool PassOptions::getBool(const std::string& name) const {
  auto it = m_values.find(name);
  KILN_ASSERT(it != m_values.end(), "pass option '" + name + "' is not set");
  bool v = false;
  KILN_ASSERT(parseBool(it->second, v), "pass option '" + name + "' is not a boolean");
  return v;
}

const std::string& PassOptions::getString(const std::string& name) const {
  auto it = m_values.find(name);
  KILN_ASSERT(it != m_values.end(), "pass option '" + name + "' is not set");
  return it->second;
}

const PassOptionDef* PassInfo::findOption(std::string_view option) const {
  for (const PassOptionDef& def : options)
    if (def.name == option) return &def;
  return nullptr;
}

PassOptions PassInfo::makeOptions(const std::map<std::string, std::string>& overrides) const {
  PassOptions result;
  for (const PassOptionDef& def : options) result.setRaw(def.name, def.defaultValue);
  for (const auto& [key, value] : overrides) {
    const PassOptionDef* def = findOption(key);
    if (!def) {
      std::string known;
      for (const PassOptionDef& d : options) known += (known.empty() ? "" : ", ") + d.name;
      throw Error(name + ": unknown option '" + key + "'" +
                      (known.empty() ? " (it has none)" : " (options: " + known + ")"),
                  ErrorKind::Usage);
    }
    if (!validValue(def->type, value))
      throw Error(name + ": option '" + key + "' expects " + (def->type == OptionType::Int ? "an " : "a ") +
                      typeName(def->type) + ", got '" + value + "'",
                  ErrorKind::Usage);
    result.setRaw(key, value);
  }
  return result;
}

const PassInfo* findPass(std::string_view name) {
  for (const auto& p : registry().passes)
    if (p->name == name) return p.get();
  return nullptr;
}

std::vector<const PassInfo*> allPasses() {
  std::vector<const PassInfo*> out;
  for (const auto& p : registry().passes) out.push_back(p.get());
  return out;
}

std::string describePasses() {
  std::ostringstream os;
  size_t width = 0;
  for (const PassInfo* p : allPasses()) width = std::max(width, p->name.size());
  for (const PassInfo* p : allPasses()) {
    std::string level = p->minOptLevel == kNoDefaultLevel ? "--" : "O" + std::to_string(p->minOptLevel);
    os << p->name << std::string(width + 2 - p->name.size(), ' ') << level << "  "
       << (p->kind == PassKind::Loop ? "[loop IR] " : "") << p->summary << "\n";
    for (const PassOptionDef& o : p->options)
      os << std::string(width + 6, ' ') << "{" << o.name << "=" << o.defaultValue << "} " << typeName(o.type)
         << ": " << o.summary << "\n";
  }
  return os.str();
}

}  // namespace kiln::core::passes
