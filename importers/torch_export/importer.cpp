// torch.export import (importers/torch_export.h): reads a `.pt2` archive, rebuilds its exported
// program's graph as a TorchScript graph and imports that with the TorchScript walker.
//
// The archive (torch/export/pt2_archive, version 0) is a zip written by torch's PyTorchFileWriter:
//   archive_format                  "pt2"
//   archive_version                 "0"
//   models/<name>.json              the ExportedProgram (torch/_export/serde/schema.py, as JSON:
//                                   unions as {"as_tensor": ...}, enums as integers)
//   data/weights/<name>_weights_config.json     fqn → {path_name, use_pickle, tensor_meta}
//   data/weights/weight_<i>         raw bytes of one storage (several weights may view it)
//   data/constants/<name>_constants_config.json and data/constants/tensor_<i>: the same for
//                                   tensor constants and non-persistent buffers
// The graph's placeholders are, in the signature's order, parameters, buffers, constants and the
// user inputs; nodes name an aten overload ("torch.ops.aten.conv2d.default") with arguments in
// schema order (defaulted ones left out), symbolic sizes come from aten.sym_size nodes and Python
// arithmetic on them ("_operator.mul").
//
// The rebuilt graph: user inputs are graph inputs, weights constant tensors, each aten node a
// node of that kind with every argument of libtorch 1.13's schema for the overload (defaults
// filled in), so the walker's handlers read them by position as they read traced graphs; integer
// arithmetic on sizes is left to the walker, which folds it once shapes are known. In-place ops
// (relu_, add_) become their functional form here, after checking that no other view of the
// updated tensor is read later. Operators libtorch 1.13 does not know get their arguments in the
// order of the newer schema (kNewerSchemas) for the handlers of aten_ops_export.cpp; any other
// unknown operator becomes a node of its kind that the walker reports as not supported.
#include "importers/torch_export.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/frontend/source_range.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "importers/torchscript/archive.h"
#include "importers/torchscript/context.h"
#include "runtime/error.h"

namespace kiln::importers {
namespace {

namespace jit = torch::jit;
using json = nlohmann::json;

constexpr const char* kFormatRecord = "archive_format";
constexpr const char* kVersionRecord = "archive_version";
constexpr const char* kArchiveVersion = "0";
constexpr int kSchemaMajor = 8;  // torch/_export/serde/schema.py SCHEMA_VERSION of torch 2.15

[[noreturn]] void corrupt(const std::string& path, const std::string& why) {
  throw Error(path + ": " + why, ErrorKind::InvalidModel);
}
[[noreturn]] void unsupported(const std::string& path, const std::string& why) {
  throw Error(path + ": " + why, ErrorKind::Unsupported);
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A program whose JSON does not have the schema's shape (reported as "malformed models/...").
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The one member of a serialized union ({"as_tensor": {...}}): its tag and value.
std::pair<std::string, const json*> unionOf(const json& value) {
  if (!value.is_object() || value.size() != 1) throw Malformed("expected a one-member union, got " + value.dump().substr(0, 80));
  auto it = value.begin();
  return {it.key(), &it.value()};
}

// --- the archive -------------------------------------------------------------------------------

/// The archive's bytes (read once) and libtorch's zip reader over them.
class Archive {
 public:
  explicit Archive(const std::string& path) : m_path(path) {
    std::shared_ptr<std::string> bytes = ts::readFileBytes(path);
    if (bytes->empty()) corrupt(path, "empty file, not a torch.export archive");
    if (bytes->size() < 4 || bytes->compare(0, 4, "PK\x03\x04") != 0) {
      if (static_cast<unsigned char>((*bytes)[0]) == 0x80)
        corrupt(path, "not a torch.export archive (a pickle from torch.save; save the program with torch.export.save)");
      corrupt(path, "not a torch.export archive (not a zip file)");
    }
    m_bytes = bytes;
    try {
      m_reader = ts::openZipInMemory(m_bytes);
      for (std::string& name : m_reader->getAllRecords()) m_records.insert(std::move(name));
    } catch (const std::exception& e) {
      std::string why = ts::torchMessage(e);
      if (why.find("central directory") != std::string::npos)
        corrupt(path, "not a torch.export archive (truncated or corrupt zip: no central directory)");
      if (why.find("invalid header or archive is corrupted") != std::string::npos)
        corrupt(path, "not a torch.export archive (truncated or corrupt zip: invalid header)");
      if (size_t enforce = why.find("] . "); why.rfind("[enforce fail", 0) == 0 && enforce != std::string::npos)
        why = why.substr(enforce + 4);
      corrupt(path, "not a torch.export archive (" + why + ")");
    }
    m_sizes = ts::zipRecordSizes(*m_bytes);
    if (!has(kFormatRecord)) {
      if (has("data.pkl") && has("constants.pkl"))
        corrupt(path, "not a torch.export archive (a TorchScript archive: name it .pt)");
      corrupt(path, "not a torch.export archive (no archive_format record)");
    }
    if (std::string format = text(kFormatRecord); format != "pt2")
      corrupt(path, "not a torch.export archive (archive_format is '" + format + "', expected 'pt2')");
    // torch reads an archive without the record as version 0.
    if (has(kVersionRecord)) {
      if (std::string version = text(kVersionRecord); version != kArchiveVersion)
        corrupt(path, "PT2 archive version '" + version + "' is not supported (Kiln reads version " + kArchiveVersion + ")");
    }
  }

  const std::string& path() const { return m_path; }
  bool has(const std::string& name) const { return m_records.count(name) != 0; }
  const std::set<std::string>& records() const { return m_records; }

  /// A record's bytes; InvalidModel when it is missing or cannot be read.
  std::pair<at::DataPtr, size_t> bytes(const std::string& name) const {
    if (!has(name)) corrupt(m_path, "the archive has no record " + name);
    // A corrupt size field would have the reader allocate it: torch's writer stores records
    // uncompressed, so none is larger than the file (a recompressed archive gets some slack).
    auto size = m_sizes.find(name);
    uint64_t limit = std::max<uint64_t>(uint64_t{16} * m_bytes->size(), uint64_t{1} << 26);
    if (size != m_sizes.end() && size->second > limit)
      corrupt(m_path, "the record " + name + " claims " + std::to_string(size->second) +
                          " bytes, more than the archive can hold (corrupt archive)");
    try {
      auto [data, n] = m_reader->getRecord(name);
      return {std::move(data), n};
    } catch (const std::exception& e) {
      corrupt(m_path, "cannot read the record " + name + ": " + ts::torchMessage(e));
    }
  }

  std::string text(const std::string& name) const {
    auto [data, n] = bytes(name);
    return std::string(static_cast<const char*>(data.get()), n);
  }

  json jsonRecord(const std::string& name) const {
    std::string content = text(name);
    try {
      return json::parse(content);
    } catch (const json::exception& e) {
      corrupt(m_path, "malformed " + name + ": " + ts::firstLine(e.what()));
    }
  }

 private:
  std::string m_path;
  std::shared_ptr<const std::string> m_bytes;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> m_reader;
  std::set<std::string> m_records;
  std::unordered_map<std::string, uint64_t> m_sizes;
};

/// The exported program of an archive and its payload configurations.
struct Program {
  std::string record;  // models/<name>.json
  json ep;
  json weights = json::object();    // fqn → PayloadMeta
  json constants = json::object();  // fqn → PayloadMeta
  std::string weightsDir = "data/weights/", constantsDir = "data/constants/";
};

json payloadConfig(const Archive& a, const std::string& dir, const std::string& model, const std::string& configSuffix) {
  const std::string config = dir + model + configSuffix;
  if (a.has(config)) {
    json doc = a.jsonRecord(config);
    if (!doc.is_object() || !doc.contains("config") || !doc["config"].is_object())
      corrupt(a.path(), "malformed " + config + ": no \"config\" object");
    return doc["config"];
  }
  if (a.has(dir + model + ".pt"))
    unsupported(a.path(), "the archive keeps its tensors in the legacy pickled format (" + dir + model +
                              ".pt); save the program again with a current torch.export.save");
  return json::object();
}

Program readProgram(const Archive& a) {
  std::vector<std::string> models;
  for (const std::string& r : a.records())
    if (startsWith(r, "models/") && endsWith(r, ".json")) models.push_back(r);
  if (models.empty()) {
    for (const std::string& r : a.records())
      if (startsWith(r, "data/aotinductor/"))
        unsupported(a.path(), "an AOTInductor package holds compiled code, not an exported program; save the "
                              "ExportedProgram with torch.export.save");
    corrupt(a.path(), "the archive holds no exported program (models/*.json)");
  }
  Program p;
  p.record = a.has("models/model.json") ? "models/model.json" : models.front();
  const std::string model = p.record.substr(7, p.record.size() - 7 - 5);
  p.ep = a.jsonRecord(p.record);
  try {
    const json& version = p.ep.at("schema_version");
    int major = version.at("major").get<int>();
    if (major != kSchemaMajor)
      corrupt(a.path(), "exported program schema version " + std::to_string(major) + "." +
                            std::to_string(version.value("minor", 0)) + " is not supported (Kiln reads version " +
                            std::to_string(kSchemaMajor) + ".x)");
  } catch (const json::exception& e) {
    corrupt(a.path(), "malformed " + p.record + ": " + ts::firstLine(e.what()));
  }
  p.weights = payloadConfig(a, p.weightsDir, model, "_weights_config.json");
  p.constants = payloadConfig(a, p.constantsDir, model, "_constants_config.json");
  return p;
}

// --- serialized values -------------------------------------------------------------------------

/// torch/_export/serde/schema.py ScalarType → c10.
std::optional<c10::ScalarType> scalarType(int64_t v) {
  switch (v) {
    case 1: return c10::ScalarType::Byte;
    case 2: return c10::ScalarType::Char;
    case 3: return c10::ScalarType::Short;
    case 4: return c10::ScalarType::Int;
    case 5: return c10::ScalarType::Long;
    case 6: return c10::ScalarType::Half;
    case 7: return c10::ScalarType::Float;
    case 8: return c10::ScalarType::Double;
    case 12: return c10::ScalarType::Bool;
    case 13: return c10::ScalarType::BFloat16;
    default: return std::nullopt;
  }
}

/// schema.py MemoryFormat → c10::MemoryFormat's value.
int64_t memoryFormat(int64_t v) {
  switch (v) {
    case 2: return static_cast<int64_t>(c10::MemoryFormat::ChannelsLast);
    case 3: return static_cast<int64_t>(c10::MemoryFormat::ChannelsLast3d);
    case 4: return static_cast<int64_t>(c10::MemoryFormat::Preserve);
    default: return static_cast<int64_t>(c10::MemoryFormat::Contiguous);
  }
}

/// A float as torch writes it: a number, or "Infinity", "-Infinity", "NaN".
double number(const json& v) {
  if (v.is_number()) return v.get<double>();
  std::string s = v.get<std::string>();
  if (s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  throw Malformed("not a number: " + s);
}

/// A SymInt of a tensor's metadata that must be concrete ({"as_int": n}); nullopt for a symbol.
std::optional<int64_t> concreteInt(const json& symInt) {
  auto [tag, value] = unionOf(symInt);
  if (tag == "as_int") return value->get<int64_t>();
  return std::nullopt;
}

/// A symbolic size's expression as torch 2.15 writes it for an input dimension:
/// "Symbol('s40', positive=True, integer=True)" (older: "s40") → "s40"; derived sizes ("2*s40") as
/// they are.
std::string sizeExpression(const json& symInt) {
  std::string expr = symInt.at("as_expr").at("expr_str").get<std::string>();
  const std::string prefix = "Symbol('";
  if (startsWith(expr, prefix)) {
    size_t end = expr.find('\'', prefix.size());
    if (end != std::string::npos) return expr.substr(prefix.size(), end - prefix.size());
  }
  return expr;
}

/// "File "/x/conv.py", line 548, in forward" of the innermost frame of a node's stack trace.
jit::SourceRange sourceRangeOf(const json& node) {
  const json* meta = node.contains("metadata") && node["metadata"].is_object() ? &node["metadata"] : nullptr;
  if (!meta || !meta->contains("stack_trace") || !(*meta)["stack_trace"].is_string()) return {};
  const std::string trace = (*meta)["stack_trace"].get<std::string>();
  size_t at = trace.rfind("File \"");
  if (at == std::string::npos) return {};
  size_t fileEnd = trace.find('"', at + 6);
  size_t lineAt = trace.find(", line ", fileEnd);
  if (fileEnd == std::string::npos || lineAt == std::string::npos) return {};
  size_t line = 0;
  for (size_t i = lineAt + 7; i < trace.size() && std::isdigit(static_cast<unsigned char>(trace[i])); ++i)
    line = line * 10 + static_cast<size_t>(trace[i] - '0');
  if (line == 0) return {};
  auto source = std::make_shared<jit::Source>(c10::string_view(" "), trace.substr(at + 6, fileEnd - at - 6), line);
  return jit::SourceRange(source, 0, 1);
}

// --- operator schemas ----------------------------------------------------------------------------

/// One argument of an operator's schema.
struct Param {
  std::string name;
  c10::TypePtr type;  // null for kNewerSchemas
  std::optional<c10::IValue> defaultValue;
  bool kwargOnly = false;
};

struct OpSchema {
  std::vector<Param> params;
  std::vector<c10::TypePtr> returns;  // empty entries for kNewerSchemas: typed from the program
  bool view = false;                  // the first output aliases the first argument
};

/// Operators newer than libtorch 1.13 that aten_ops_export.cpp maps, with today's argument order.
std::optional<OpSchema> newerSchema(const std::string& name) {
  auto p = [](const char* n) { return Param{n, nullptr, std::nullopt, false}; };
  auto d = [](const char* n, c10::IValue v, bool kwargOnly = false) { return Param{n, nullptr, std::move(v), kwargOnly}; };
  if (name == "_native_batch_norm_legit_no_training")
    return OpSchema{{p("input"), p("weight"), p("bias"), p("running_mean"), p("running_var"), p("momentum"), p("eps")},
                    std::vector<c10::TypePtr>(3), false};
  if (name == "scaled_dot_product_attention")
    return OpSchema{{p("query"), p("key"), p("value"), d("attn_mask", c10::IValue()), d("dropout_p", 0.0),
                     d("is_causal", false), d("scale", c10::IValue(), true), d("enable_gqa", false, true)},
                    std::vector<c10::TypePtr>(1), false};
  if (name == "_safe_softmax") return OpSchema{{p("self"), p("dim"), d("dtype", c10::IValue())}, std::vector<c10::TypePtr>(1), false};
  return std::nullopt;
}

/// libtorch 1.13's schema for aten::name.overload ("" for .default), if it has one.
std::optional<OpSchema> knownSchema(const std::string& name, const std::string& overload) {
  for (const auto& op : jit::getAllOperatorsFor(c10::Symbol::fromQualString("aten::" + name))) {
    const c10::FunctionSchema& schema = op->schema();
    if (schema.overload_name() != overload) continue;
    OpSchema s;
    for (const c10::Argument& a : schema.arguments())
      s.params.push_back(Param{a.name(), a.type(),
                               a.default_value() ? std::optional<c10::IValue>(*a.default_value()) : std::nullopt,
                               a.kwarg_only()});
    for (const c10::Argument& r : schema.returns())
      s.returns.push_back(r.type()->hasFreeVariables() ? c10::TypePtr(nullptr) : r.type());
    if (!schema.returns().empty() && !schema.arguments().empty()) {
      const c10::AliasInfo* out = schema.returns()[0].alias_info();
      const c10::AliasInfo* in = schema.arguments()[0].alias_info();
      s.view = out && in && !out->isWrite() && out->beforeSets() == in->beforeSets();
    }
    return s;
  }
  return std::nullopt;
}

/// Nodes that only check things torch knew at export time.
bool isAssertion(const std::string& name) {
  static const std::set<std::string> kAssertions = {
      "_assert_scalar", "_assert_async", "_assert_tensor_metadata", "sym_constrain_range",
      "sym_constrain_range_for_size", "_functional_assert_async", "_functional_assert_scalar",
      "_functional_sym_constrain_range", "_functional_sym_constrain_range_for_size", "_print"};
  return kAssertions.count(name) != 0;
}

/// Python arithmetic on symbolic sizes ("_operator.mul", "math.ceil", "torch.sym_max") → the
/// TorchScript operator that computes it on ints; null when unknown.
std::optional<c10::Symbol> symbolicOp(const std::string& target) {
  static const std::map<std::string, std::string> kOps = {
      {"_operator.add", "aten::add"},      {"_operator.sub", "aten::sub"},       {"_operator.mul", "aten::mul"},
      {"_operator.floordiv", "aten::floordiv"}, {"_operator.truediv", "aten::div"}, {"_operator.mod", "aten::remainder"},
      {"_operator.pow", "aten::pow"},      {"_operator.neg", "aten::neg"},       {"_operator.eq", "aten::eq"},
      {"_operator.ne", "aten::ne"},        {"_operator.lt", "aten::lt"},         {"_operator.le", "aten::le"},
      {"_operator.gt", "aten::gt"},        {"_operator.ge", "aten::ge"},         {"_operator.and_", "aten::__and__"},
      {"_operator.or_", "aten::__or__"},   {"math.ceil", "aten::ceil"},          {"math.floor", "aten::floor"},
      {"math.sqrt", "aten::sqrt"},         {"torch.sym_float", "aten::Float"},   {"torch.sym_int", "aten::Int"},
      {"torch.sym_max", "prim::max"},      {"torch.sym_min", "prim::min"},       {"torch.sym_not", "aten::__not__"},
      {"torch._sym_sqrt", "aten::sqrt"}};
  auto it = kOps.find(target);
  if (it == kOps.end()) return std::nullopt;
  return c10::Symbol::fromQualString(it->second);
}

// --- the program's inputs ----------------------------------------------------------------------

struct UserInput {
  std::string name;
  c10::ScalarType dtype = c10::ScalarType::Float;
  json sizes;  // SymInt per dimension
};

/// Rebuilds an exported program as a TorchScript graph (see the top of this file).
class GraphBuilder {
 public:
  GraphBuilder(const Archive& archive, const Program& program) : m_archive(archive), m_program(program) {
    guard([&] {
      const json& gm = m_program.ep.at("graph_module");
      m_graphJson = &gm.at("graph");
      m_signature = &gm.at("signature");
      for (const json& spec : m_signature->at("input_specs")) {
        auto [kind, body] = unionOf(spec);
        if (kind != "user_input") continue;
        const json& arg = body->at("arg");
        auto [argKind, value] = unionOf(arg);
        if (argKind != "as_tensor")
          unsupported(path(), "the program takes a non-tensor input (" + argKind +
                                  "); only tensor arguments are supported");
        UserInput in;
        in.name = value->at("name").get<std::string>();
        const json& meta = m_graphJson->at("tensor_values").at(in.name);
        auto dtype = scalarType(meta.at("dtype").get<int64_t>());
        if (!dtype) unsupported(path(), "input '" + in.name + "' has a dtype Kiln does not support");
        in.dtype = *dtype;
        in.sizes = meta.at("sizes");
        m_inputs.push_back(std::move(in));
      }
    });
  }

  const std::string& path() const { return m_archive.path(); }

  std::vector<std::string> inputNames() const {
    std::vector<std::string> names;
    for (const UserInput& in : m_inputs) names.push_back(in.name);
    return names;
  }

  /// The inputs as exported: a symbolic dimension takes its example size (the hint).
  std::vector<InputSpec> recordedSpecs() const {
    std::vector<InputSpec> specs;
    guard([&] {
      for (const UserInput& in : m_inputs) {
        InputSpec spec{in.name, ts::toKilnDType(in.dtype), {}};
        for (const json& d : in.sizes) {
          if (auto v = concreteInt(d)) {
            spec.shape.push_back(*v);
            continue;
          }
          const json& expr = d.at("as_expr");
          const json* hint = expr.contains("hint") && !expr["hint"].is_null() ? &expr["hint"] : nullptr;
          if (!hint || !hint->contains("as_int"))
            throw Error(path() + ": input '" + in.name + "' has a symbolic dimension (" + sizeExpression(d) +
                            ") without an example size; pass the input shapes (--input-shapes)",
                        ErrorKind::InvalidInput);
          spec.shape.push_back(hint->at("as_int").get<int64_t>());
        }
        specs.push_back(std::move(spec));
      }
    });
    return specs;
  }

  /// `given` checked against the export: count, dtypes, ranks, static dimensions, and symbolic
  /// ones (equal where they share a symbol, inside the export's ranges). Names are filled in.
  std::vector<InputSpec> checkedSpecs(std::vector<InputSpec> given) const {
    if (given.size() != m_inputs.size()) {
      std::string names;
      for (const UserInput& in : m_inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw Error(path() + ": the model takes " + std::to_string(m_inputs.size()) + " input" +
                      (m_inputs.size() == 1 ? "" : "s") + " (" + names + ") but " + std::to_string(given.size()) +
                      " input spec" + (given.size() == 1 ? " was" : "s were") + " given",
                  ErrorKind::InvalidInput);
    }
    guard([&] {
      std::map<std::string, int64_t> symbols;
      const json& ranges = m_program.ep.contains("range_constraints") ? m_program.ep["range_constraints"] : json::object();
      for (size_t i = 0; i < given.size(); ++i) {
        InputSpec& spec = given[i];
        const UserInput& in = m_inputs[i];
        if (spec.name.empty()) spec.name = in.name;
        const std::string what = path() + ": input '" + in.name + "'";
        runtime::DType dtype = ts::toKilnDType(in.dtype);
        if (spec.dtype != dtype)
          throw Error(what + " is " + std::string(runtime::dtypeName(dtype)) + " in the exported program, got " +
                          std::string(runtime::dtypeName(spec.dtype)),
                      ErrorKind::InvalidInput);
        if (spec.shape.size() != in.sizes.size())
          throw Error(what + " has rank " + std::to_string(in.sizes.size()) + " in the exported program, got " +
                          runtime::shapeString(spec.shape),
                      ErrorKind::InvalidInput);
        for (size_t d = 0; d < spec.shape.size(); ++d) {
          const int64_t v = spec.shape[d];
          const std::string dim = what + ": dimension " + std::to_string(d);
          if (v < 0) throw Error(dim + " is negative", ErrorKind::InvalidInput);
          if (auto fixed = concreteInt(in.sizes[d])) {
            if (*fixed != v)
              throw Error(dim + " is static (" + std::to_string(*fixed) + ") in the exported program, got " +
                              std::to_string(v) + " (export it with dynamic_shapes to vary it)",
                          ErrorKind::InvalidInput);
            continue;
          }
          const std::string expr = sizeExpression(in.sizes[d]);
          bool symbol = !expr.empty() && std::all_of(expr.begin(), expr.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
          });
          if (!symbol) continue;  // a derived size (2*s0): torch checks it, Kiln's shapes will
          auto [it, fresh] = symbols.emplace(expr, v);
          if (!fresh && it->second != v)
            throw Error(dim + " is the symbolic size " + expr + ", which is " + std::to_string(it->second) +
                            " elsewhere; got " + std::to_string(v),
                        ErrorKind::InvalidInput);
          if (!ranges.is_object() || !ranges.contains(expr)) continue;
          const json& r = ranges[expr];
          std::optional<int64_t> lo, hi;
          if (r.contains("min_val") && r["min_val"].is_number_integer()) lo = r["min_val"].get<int64_t>();
          if (r.contains("max_val") && r["max_val"].is_number_integer()) hi = r["max_val"].get<int64_t>();
          // torch specializes sizes 0 and 1 while it traces, so ranges start at 2 at the least;
          // the program runs at 1 all the same.
          if (lo && *lo <= 2) lo = std::min<int64_t>(*lo, 1);
          if ((lo && v < *lo) || (hi && v > *hi))
            throw Error(dim + " (" + expr + ") must lie in [" + (lo ? std::to_string(*lo) : "0") + ", " +
                            (hi ? std::to_string(*hi) : "inf") + "] (the export's range), got " + std::to_string(v),
                        ErrorKind::InvalidInput);
        }
      }
    });
    return given;
  }

  std::shared_ptr<jit::Graph> build() {
    m_graph = std::make_shared<jit::Graph>();
    guard([&] {
      bindPlaceholders();
      const json& nodes = m_graphJson->at("nodes");
      computeLastUses(nodes);
      for (size_t i = 0; i < nodes.size(); ++i) translate(nodes[i], i);
      bindOutputs();
    });
    // Nodes whose results nothing uses are not imported (libtorch's dead-code elimination asks
    // every aten node for its schema, which the newer operators do not have). All are pure but
    // the writes through views kept in place (translate), whose effect is on the viewed tensor.
    for (auto it = m_graph->nodes().rbegin(); it != m_graph->nodes().rend();) {
      jit::Node* n = *it;
      ++it;
      const c10::FunctionSchema* schema = n->maybeSchema();
      if (!n->hasUses() && !(schema && schema->is_mutable())) n->destroy();
    }
    return m_graph;
  }

 private:
  /// Runs `fn`, turning a malformed program (missing fields, wrong JSON types) and libtorch's
  /// errors while building the graph into one-line InvalidModel errors.
  template <typename Fn>
  void guard(Fn&& fn) const {
    try {
      fn();
    } catch (const Error&) {
      throw;
    } catch (const json::exception& e) {
      corrupt(path(), "malformed " + m_program.record + ": " + ts::firstLine(e.what()));
    } catch (const Malformed& e) {
      corrupt(path(), "malformed " + m_program.record + ": " + e.what());
    } catch (const std::exception& e) {
      corrupt(path(), ts::torchMessage(e));
    }
  }

  std::string nodeWhere() const { return m_nodeName.empty() ? "" : " (torch.export node " + m_nodeName + ")"; }

  // --- values ----------------------------------------------------------------------------------

  void bind(const std::string& name, jit::Value* value) {
    m_values[name] = value;
    if (value->type()->kind() == c10::TypeKind::TensorType && !value->hasDebugName()) {
      bool numeric = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
      if (!numeric && name.find('.') == std::string::npos) value->setDebugName(name);
    }
  }

  jit::Value* lookup(const std::string& name) const {
    auto it = m_values.find(name);
    if (it == m_values.end()) corrupt(path(), "the value '" + name + "' is used before it is defined" + nodeWhere());
    return it->second;
  }

  jit::Value* constant(const c10::IValue& v) { return m_graph->insertConstant(v); }

  jit::Value* list(const c10::TypePtr& element, const std::vector<jit::Value*>& values) {
    return m_graph->insertNode(m_graph->createList(element, values))->output();
  }

  /// A symbolic argument ({"as_name": ...} or a literal {"as_int": ...}).
  jit::Value* symbolic(const json& arg) {
    auto [tag, value] = unionOf(arg);
    if (tag == "as_name") return lookup(value->get<std::string>());
    if (tag == "as_int") return constant(value->get<int64_t>());
    if (tag == "as_float") return constant(number(*value));
    if (tag == "as_bool") return constant(value->get<bool>());
    throw Malformed("unknown symbolic argument " + tag);
  }

  /// One serialized argument as a TorchScript value.
  jit::Value* value(const json& arg) {
    auto [tag, v] = unionOf(arg);
    if (tag == "as_none") return constant(c10::IValue());
    if (tag == "as_tensor") return lookup(v->at("name").get<std::string>());
    if (tag == "as_tensors") {
      std::vector<jit::Value*> items;
      for (const json& t : *v) items.push_back(lookup(t.at("name").get<std::string>()));
      return list(c10::TensorType::get(), items);
    }
    if (tag == "as_optional_tensor") return value(*v);
    if (tag == "as_optional_tensors") {
      std::vector<jit::Value*> items;
      for (const json& t : *v) items.push_back(value(t));
      return list(c10::OptionalType::ofTensor(), items);
    }
    if (tag == "as_int") return constant(v->get<int64_t>());
    if (tag == "as_ints") {
      std::vector<int64_t> xs = v->get<std::vector<int64_t>>();
      return constant(c10::List<int64_t>(c10::ArrayRef<int64_t>(xs)));
    }
    if (tag == "as_float") return constant(number(*v));
    if (tag == "as_floats") {
      c10::List<double> xs;
      for (const json& x : *v) xs.push_back(number(x));
      return constant(xs);
    }
    if (tag == "as_bool") return constant(v->get<bool>());
    if (tag == "as_bools") {
      c10::List<bool> xs;
      for (const json& x : *v) xs.push_back(x.get<bool>());
      return constant(xs);
    }
    if (tag == "as_string") return constant(v->get<std::string>());
    if (tag == "as_strings") {
      c10::List<std::string> xs;
      for (const json& x : *v) xs.push_back(x.get<std::string>());
      return constant(xs);
    }
    if (tag == "as_sym_int" || tag == "as_sym_float" || tag == "as_sym_bool") return symbolic(*v);
    if (tag == "as_sym_ints" || tag == "as_sym_floats" || tag == "as_sym_bools") {
      c10::TypePtr element = tag == "as_sym_ints"     ? c10::TypePtr(c10::IntType::get())
                             : tag == "as_sym_floats" ? c10::TypePtr(c10::FloatType::get())
                                                      : c10::TypePtr(c10::BoolType::get());
      std::vector<jit::Value*> items;
      for (const json& x : *v) items.push_back(symbolic(x));
      return list(element, items);
    }
    if (tag == "as_scalar_type") {
      auto dtype = scalarType(v->get<int64_t>());
      if (!dtype) unsupported(path(), "a dtype Kiln does not support (" + std::to_string(v->get<int64_t>()) + ")" + nodeWhere());
      return constant(static_cast<int64_t>(*dtype));
    }
    if (tag == "as_memory_format") return constant(memoryFormat(v->get<int64_t>()));
    if (tag == "as_layout") {
      if (v->get<int64_t>() != 7) unsupported(path(), "sparse or other non-strided layouts are not supported" + nodeWhere());
      return constant(static_cast<int64_t>(c10::kStrided));
    }
    if (tag == "as_device") {
      std::string type = v->at("type").get<std::string>();
      if (v->contains("index") && !(*v)["index"].is_null()) type += ":" + std::to_string((*v)["index"].get<int64_t>());
      return constant(c10::Device(type));
    }
    unsupported(path(), "arguments of kind '" + tag + "' are not supported" + nodeWhere());
  }

  /// Whether an argument Kiln's schema does not have can be left out: None or false.
  static bool isNeutral(const json& arg) {
    auto [tag, v] = unionOf(arg);
    return tag == "as_none" || (tag == "as_bool" && !v->get<bool>());
  }

  // --- placeholders, weights, outputs ----------------------------------------------------------

  /// A weight or constant: its bytes viewed with its sizes, strides and offset, copied contiguous.
  at::Tensor payload(const json& config, const std::string& dir, const std::string& fqn) {
    if (!config.contains(fqn)) corrupt(path(), "the tensor '" + fqn + "' is missing from the archive's " + dir + " config");
    const json& meta = config.at(fqn);
    if (meta.value("use_pickle", false))
      unsupported(path(), "the tensor '" + fqn + "' is a pickled tensor subclass, which is not supported");
    const json& tm = meta.at("tensor_meta");
    auto dtype = scalarType(tm.at("dtype").get<int64_t>());
    if (!dtype) unsupported(path(), "the tensor '" + fqn + "' has a dtype Kiln does not support");
    if (tm.contains("layout") && tm["layout"].is_number_integer() && tm["layout"].get<int64_t>() != 7)
      unsupported(path(), "the tensor '" + fqn + "' is not strided (sparse), which is not supported");
    std::vector<int64_t> sizes, strides;
    for (const json& s : tm.at("sizes")) sizes.push_back(concreteInt(s).value_or(-1));
    for (const json& s : tm.at("strides")) strides.push_back(concreteInt(s).value_or(-1));
    int64_t offset = concreteInt(tm.at("storage_offset")).value_or(-1);
    const std::string bad = "the tensor '" + fqn + "' ";
    if (sizes.size() != strides.size() || offset < 0 ||
        std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v < 0; }) ||
        std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v < 0; }))
      corrupt(path(), bad + "has invalid sizes, strides or offset (corrupt archive)");
    auto opts = at::TensorOptions().dtype(*dtype);
    int64_t numel = 1, last = offset;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t span = 0;
      if (__builtin_mul_overflow(numel, sizes[i], &numel) ||
          (sizes[i] > 0 && (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) || __builtin_add_overflow(last, span, &last))))
        corrupt(path(), bad + "is too large (corrupt archive)");
    }
    if (numel == 0) return at::empty(sizes, opts);
    const std::string record = dir + meta.at("path_name").get<std::string>();
    at::Tensor& storage = m_storages[record + "#" + c10::toString(*dtype)];
    if (!storage.defined()) {
      auto [data, n] = m_archive.bytes(record);
      size_t element = c10::elementSize(*dtype);
      if (n % element != 0)
        corrupt(path(), "the record " + record + " holds " + std::to_string(n) + " bytes, not a whole number of " +
                            c10::toString(*dtype) + " elements (corrupt archive)");
      storage = at::empty({static_cast<int64_t>(n / element)}, opts);
      if (n != 0) std::memcpy(storage.data_ptr(), data.get(), n);
    }
    if (storage.numel() == 0) return at::zeros(sizes, opts);  // torch writes no bytes for fake tensors
    if (last >= storage.numel())
      corrupt(path(), bad + "reaches past its record " + record + " (corrupt or truncated archive)");
    return storage.as_strided(sizes, strides, offset).clone(at::MemoryFormat::Contiguous);
  }

  void bindPlaceholders() {
    for (const json& spec : m_signature->at("input_specs")) {
      auto [kind, body] = unionOf(spec);
      if (kind == "user_input") {
        const std::string name = unionOf(body->at("arg")).second->at("name").get<std::string>();
        jit::Value* input = m_graph->addInput();
        input->setType(c10::TensorType::get());
        bind(name, input);
        m_userInputs.insert(name);
      } else if (kind == "parameter") {
        const std::string fqn = body->at("parameter_name").get<std::string>();
        bind(body->at("arg").at("name").get<std::string>(),
             constant(payload(m_program.weights, m_program.weightsDir, fqn)));
      } else if (kind == "buffer") {
        const std::string fqn = body->at("buffer_name").get<std::string>();
        bool persistent = m_program.weights.contains(fqn);
        bind(body->at("arg").at("name").get<std::string>(),
             constant(persistent ? payload(m_program.weights, m_program.weightsDir, fqn)
                                 : payload(m_program.constants, m_program.constantsDir, fqn)));
      } else if (kind == "tensor_constant") {
        const std::string fqn = body->at("tensor_constant_name").get<std::string>();
        bind(body->at("arg").at("name").get<std::string>(),
             constant(payload(m_program.constants, m_program.constantsDir, fqn)));
      } else if (kind == "constant_input") {
        auto [tag, v] = unionOf(body->at("value"));
        c10::IValue value;
        if (tag == "as_int") value = v->get<int64_t>();
        else if (tag == "as_float") value = number(*v);
        else if (tag == "as_bool") value = v->get<bool>();
        else if (tag == "as_string") value = v->get<std::string>();
        bind(body->at("name").get<std::string>(), constant(value));
      } else {
        unsupported(path(), "the program has an input of kind '" + kind + "' (a script object or effect token), "
                            "which is not supported");
      }
    }
  }

  void bindOutputs() {
    for (const json& spec : m_signature->at("output_specs")) {
      auto [kind, body] = unionOf(spec);
      if (kind == "buffer_mutation") continue;  // a buffer's new value: not an output of forward
      if (kind == "user_input_mutation")
        unsupported(path(), "the program updates its input '" + body->at("user_input_name").get<std::string>() +
                                "' in place, which is not supported");
      if (kind != "user_output") unsupported(path(), "the program has an output of kind '" + kind + "' (training)");
      auto [tag, v] = unionOf(body->at("arg"));
      if (tag != "as_tensor")
        unsupported(path(), "the program returns a value of kind '" + tag + "'; only tensors can be outputs");
      m_graph->registerOutput(lookup(v->at("name").get<std::string>()));
    }
  }

  // --- nodes -----------------------------------------------------------------------------------

  /// Every tensor name a serialized argument reads.
  static void tensorNames(const json& v, std::vector<std::string>& out) {
    if (v.is_object()) {
      if (v.size() == 1 && v.contains("as_tensor") && v["as_tensor"].is_object() && v["as_tensor"].contains("name")) {
        out.push_back(v["as_tensor"]["name"].get<std::string>());
        return;
      }
      if (v.size() == 1 && v.contains("as_tensors") && v["as_tensors"].is_array()) {
        for (const json& t : v["as_tensors"])
          if (t.is_object() && t.contains("name") && t["name"].is_string()) out.push_back(t["name"].get<std::string>());
        return;
      }
      for (const auto& item : v.items()) tensorNames(item.value(), out);
    } else if (v.is_array()) {
      for (const json& item : v) tensorNames(item, out);
    }
  }

  void computeLastUses(const json& nodes) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<std::string> names;
      tensorNames(nodes[i].at("inputs"), names);
      for (const std::string& n : names) m_lastUse[n] = i;
    }
    std::vector<std::string> names;
    tensorNames(m_graphJson->at("outputs"), names);
    for (const std::string& n : names) m_lastUse[n] = std::numeric_limits<size_t>::max();
  }

  /// The arguments of a node in `schema`'s order: given by name (or by position when the names
  /// differ), else the schema's default. An argument the schema does not have must be neutral.
  std::vector<jit::Value*> arguments(const json& node, const OpSchema& schema, const std::string& kind) {
    struct Given {
      std::string name;
      const json* arg;
      bool used = false;
    };
    std::vector<Given> given, positional;
    for (const json& in : node.at("inputs")) {
      Given g{in.at("name").get<std::string>(), &in.at("arg")};
      bool keyword = in.contains("kind") && in["kind"].is_number_integer() && in["kind"].get<int>() == 2;
      given.push_back(g);
      if (!keyword) positional.push_back(g);
    }
    std::set<std::string> names;
    for (const Param& p : schema.params) names.insert(p.name);
    std::vector<jit::Value*> values;
    for (size_t i = 0; i < schema.params.size(); ++i) {
      const Param& p = schema.params[i];
      Given* g = nullptr;
      for (Given& c : given)
        if (c.name == p.name) g = &c;
      if (!g && !p.kwargOnly && i < positional.size() && !names.count(positional[i].name)) {
        for (Given& c : given)
          if (c.name == positional[i].name) g = &c;
      }
      if (g) {
        g->used = true;
        values.push_back(value(*g->arg));
      } else if (p.defaultValue) {
        values.push_back(constant(*p.defaultValue));
      } else {
        corrupt(path(), kind + ": argument '" + p.name + "' is missing" + nodeWhere());
      }
    }
    for (const Given& g : given) {
      if (!g.used && !isNeutral(*g.arg))
        unsupported(path(), kind + ": argument '" + g.name + "' is not supported (newer than Kiln's operator schemas)" +
                                nodeWhere());
    }
    return values;
  }

  /// The type of an output the program serialized as `out`.
  static c10::TypePtr typeOf(const json& out) {
    auto [tag, v] = unionOf(out);
    if (tag == "as_tensors") return c10::ListType::ofTensors();
    if (tag == "as_sym_int") return c10::IntType::get();
    if (tag == "as_sym_float") return c10::FloatType::get();
    if (tag == "as_sym_bool") return c10::BoolType::get();
    if (tag == "as_int") return c10::IntType::get();
    if (tag == "as_none") return c10::NoneType::get();
    return c10::TensorType::get();
  }

  /// Binds the names of a node's serialized outputs to `values`.
  void bindNodeOutputs(const json& outs, const std::vector<jit::Value*>& values, bool view, const std::string& base) {
    for (size_t j = 0; j < outs.size() && j < values.size(); ++j) {
      auto [tag, v] = unionOf(outs[j]);
      if (tag == "as_tensor") {
        const std::string name = v->at("name").get<std::string>();
        bind(name, values[j]);
        setBase(name, j == 0 && view ? base : name);
      } else if (tag == "as_tensors") {
        std::vector<std::string> names;
        for (const json& t : *v) names.push_back(t.at("name").get<std::string>());
        jit::Node* unpack = m_graph->insertNode(m_graph->createListUnpack(values[j], names.size()));
        for (size_t k = 0; k < names.size(); ++k) {
          bind(names[k], unpack->output(k));
          setBase(names[k], view ? base : names[k]);
        }
      } else if (tag == "as_sym_int" || tag == "as_sym_float" || tag == "as_sym_bool") {
        auto [symTag, name] = unionOf(*v);
        if (symTag == "as_name") bind(name->get<std::string>(), values[j]);
      }
    }
  }

  void setBase(const std::string& name, const std::string& base) {
    std::string root = m_base.count(base) ? m_base[base] : base;
    m_base[name] = root;
    m_aliases[root].push_back(name);
  }

  /// An in-place update of `self` at node `index` becomes functional: refused when the tensor is
  /// a model input or another view of it is read later (it would still see the old value).
  /// `intoView`: a write through a slice/select view that the walker makes functional; only the
  /// model-input checks apply here.
  void checkInPlace(const std::string& kind, const std::string& self, size_t index, bool intoView) {
    if (m_userInputs.count(self))
      unsupported(path(), kind + " updates the model input '" + self + "' in place, which is not supported" + nodeWhere());
    std::string root = m_base.count(self) ? m_base[self] : self;
    for (const std::string& alias : m_aliases[root]) {
      if (intoView) break;
      if (alias == self) continue;
      auto use = m_lastUse.find(alias);
      if (use != m_lastUse.end() && use->second > index)
        unsupported(path(), kind + ": the tensor it updates in place is also used through an alias (a view), which "
                                   "is not supported" + nodeWhere());
    }
    if (root != self && m_userInputs.count(root))
      unsupported(path(), kind + " updates a view of the model input '" + root + "' in place, which is not supported" +
                              nodeWhere());
  }

  void translate(const json& node, size_t index) {
    const std::string target = node.at("target").get<std::string>();
    m_nodeName = node.contains("name") && node["name"].is_string() ? node["name"].get<std::string>() : "";
    const jit::SourceRange range = sourceRangeOf(node);
    const json& outs = node.at("outputs");

    if (auto op = symbolicOp(target)) {
      std::vector<jit::NamedValue> args;
      for (const json& in : node.at("inputs")) args.emplace_back(value(in.at("arg")));
      jit::Value* out = nullptr;
      try {
        out = m_graph->insert(*op, args, {}, range);
      } catch (const std::exception&) {
        unsupported(path(), target + " on these arguments is not supported" + nodeWhere());
      }
      bindNodeOutputs(outs, {out}, false, "");
      return;
    }
    const std::string prefix = "torch.ops.aten.";
    if (!startsWith(target, prefix)) unsupported(path(), target + " is not supported" + nodeWhere());
    const std::string rest = target.substr(prefix.size());
    size_t dot = rest.rfind('.');
    std::string name = dot == std::string::npos ? rest : rest.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : rest.substr(dot + 1);
    if (overload == "default") overload.clear();
    if (isAssertion(name)) return;
    // Symbolic size queries are the ordinary ones once shapes are known.
    if (startsWith(name, "sym_")) {
      static const std::set<std::string> kSymbolic = {"sym_size", "sym_numel", "sym_stride", "sym_storage_offset"};
      if (kSymbolic.count(name)) name = name.substr(4);
    }
    const std::string kind = "aten::" + name;

    std::optional<OpSchema> schema = knownSchema(name, overload);
    bool inPlace = false;
    if (!schema && name.size() > 1 && name.back() == '_' && !startsWith(name, "__")) {
      // relu_, add_.Tensor: the functional form, the update checked below.
      schema = knownSchema(name.substr(0, name.size() - 1), overload);
      inPlace = schema.has_value();
    } else if (schema && name.size() > 1 && name.back() == '_' && !startsWith(name, "__")) {
      if (auto functional = knownSchema(name.substr(0, name.size() - 1), overload)) {
        schema = functional;
        inPlace = true;
      }
    }
    if (!schema) schema = newerSchema(name);
    std::string selfName;
    if (inPlace) {
      const json& first = node.at("inputs").at(0).at("arg");
      if (first.contains("as_tensor")) selfName = first["as_tensor"].at("name").get<std::string>();
      // A write into a slice/select view (Swin's mask[a:b, c:d] = k) keeps its in-place form: the
      // walker puts it back into the viewed tensor and checks the other aliases itself
      // (importers/torchscript/view_writes.h). Any other update becomes functional here.
      auto self = m_values.find(selfName);
      bool intoView = self != m_values.end() && (self->second->node()->kind() == c10::aten::slice ||
                                                 self->second->node()->kind() == c10::aten::select);
      if (!selfName.empty()) checkInPlace(kind, selfName, index, intoView);
      if (!intoView) name = name.substr(0, name.size() - 1);
    }

    std::vector<jit::Value*> inputs;
    std::vector<c10::TypePtr> types;
    if (schema) {
      inputs = arguments(node, *schema, kind);
      types = schema->returns;
    } else {
      // Unknown to libtorch 1.13 and to Kiln: a node of its kind that the walker reports.
      for (const json& in : node.at("inputs")) inputs.push_back(value(in.at("arg")));
    }
    size_t count = schema ? types.size() : outs.size();
    jit::Node* n = m_graph->create(c10::Symbol::fromQualString("aten::" + name), inputs, count);
    for (size_t j = 0; j < count; ++j) {
      c10::TypePtr type = j < types.size() ? types[j] : c10::TypePtr(nullptr);
      if (!type && j < outs.size()) type = typeOf(outs[j]);
      n->output(j)->setType(type ? type : c10::TensorType::get());
    }
    m_graph->insertNode(n);
    n->setSourceRange(range);
    if (outs.size() > count) corrupt(path(), kind + " has " + std::to_string(outs.size()) + " outputs in the program, "
                                               "its schema " + std::to_string(count) + nodeWhere());
    std::string base;
    if (schema && schema->view && !inputs.empty()) {
      const json& first = node.at("inputs").empty() ? json() : node.at("inputs").at(0).at("arg");
      if (first.is_object() && first.contains("as_tensor")) base = first["as_tensor"].at("name").get<std::string>();
    }
    bindNodeOutputs(outs, std::vector<jit::Value*>(n->outputs().begin(), n->outputs().end()),
                    (schema && schema->view && !base.empty()) || inPlace, inPlace ? selfName : base);
    if (inPlace && !selfName.empty()) m_values[selfName] = n->output(0);
  }

  const Archive& m_archive;
  const Program& m_program;
  const json* m_graphJson = nullptr;
  const json* m_signature = nullptr;
  std::vector<UserInput> m_inputs;
  std::shared_ptr<jit::Graph> m_graph;
  std::unordered_map<std::string, jit::Value*> m_values;
  std::set<std::string> m_userInputs;
  std::unordered_map<std::string, at::Tensor> m_storages;  // payload records, per dtype
  std::unordered_map<std::string, size_t> m_lastUse;       // tensor name → index of its last reader
  std::unordered_map<std::string, std::string> m_base;     // tensor name → the tensor it views
  std::unordered_map<std::string, std::vector<std::string>> m_aliases;  // base → its views
  std::string m_nodeName;
};

/// Opens the archive and prepares the graph and the input specs.
struct Loaded {
  std::shared_ptr<jit::Graph> graph;
  std::vector<InputSpec> specs;
};

Loaded load(const std::string& path, const ImportOptions& options) {
  Archive archive(path);
  Program program = readProgram(archive);
  GraphBuilder builder(archive, program);
  Loaded l;
  l.specs = options.inputs.empty() ? builder.recordedSpecs() : builder.checkedSpecs(options.inputs);
  l.graph = builder.build();
  return l;
}

/// The walker's errors name the operator; the file goes in front, as for the archive's errors.
[[noreturn]] void rethrowNamed(const std::string& path, const Error& e) {
  std::string message = e.what();
  if (startsWith(message, path + ": ")) throw e;
  throw Error(path + ": " + message, e.kind());
}

}  // namespace

bool isTorchExportFile(const std::string& path) { return std::filesystem::path(path).extension() == ".pt2"; }

ImportedModel importTorchExport(const std::string& path, const ImportOptions& options) {
  Loaded l = load(path, options);
  try {
    return importTorchScriptGraph(l.graph, l.specs);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    rethrowNamed(path, e);
  }
}

InputSignature readTorchExportSignature(const std::string& path) {
  Archive archive(path);
  Program program = readProgram(archive);
  GraphBuilder builder(archive, program);
  InputSignature sig;
  sig.names = builder.inputNames();
  sig.specs = builder.recordedSpecs();
  return sig;
}

SurveyResult surveyTorchExport(const std::string& path, const ImportOptions& options) {
  Loaded l = load(path, options);
  try {
    return surveyTorchScriptGraph(l.graph, l.specs);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    rethrowNamed(path, e);
  }
}

}  // namespace kiln::importers
