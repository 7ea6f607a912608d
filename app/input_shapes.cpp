#include "app/input_shapes.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace kiln::app {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

const std::map<std::string, runtime::DType>& dtypeNames() {
  static const auto* names = new std::map<std::string, runtime::DType>{
      {"float32", runtime::DType::Float32}, {"float", runtime::DType::Float32}, {"f32", runtime::DType::Float32},
      {"float64", runtime::DType::Float64}, {"double", runtime::DType::Float64}, {"f64", runtime::DType::Float64},
      {"int64", runtime::DType::Int64},     {"long", runtime::DType::Int64},     {"i64", runtime::DType::Int64},
      {"int32", runtime::DType::Int32},     {"int", runtime::DType::Int32},      {"i32", runtime::DType::Int32},
      {"int8", runtime::DType::Int8},       {"i8", runtime::DType::Int8},        {"uint8", runtime::DType::UInt8},
      {"u8", runtime::DType::UInt8},        {"bool", runtime::DType::Bool}};
  return *names;
}

[[noreturn]] void malformed(const std::string& problem) {
  throw Error("--input-shapes: " + problem + " (expected e.g. \"x:[1,3,224,224],ids:[1,128]:int64\")",
              ErrorKind::Usage);
}

/// One entry: [NAME:][D0,...][:DTYPE].
InputSpec parseEntry(const std::string& entry) {
  InputSpec spec;
  size_t open = entry.find('[');
  if (open == std::string::npos) malformed("expected a shape in brackets in '" + entry + "'");
  std::string head = trim(entry.substr(0, open));
  if (!head.empty()) {
    if (head.back() != ':') malformed("expected ':' between the name and the shape in '" + entry + "'");
    spec.name = trim(head.substr(0, head.size() - 1));
    if (spec.name.empty()) malformed("empty input name in '" + entry + "'");
  }
  size_t close = entry.find(']', open);
  if (close == std::string::npos) malformed("missing ']' in '" + entry + "'");
  std::string dims = entry.substr(open + 1, close - open - 1);
  if (!trim(dims).empty()) {
    size_t start = 0;
    while (true) {
      size_t comma = dims.find(',', start);
      std::string d = trim(dims.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos)
        malformed("dimension '" + d + "' of '" + entry + "' is not a non-negative integer");
      spec.shape.push_back(std::stoll(d));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::string tail = trim(entry.substr(close + 1));
  if (tail.empty()) return spec;
  if (tail[0] != ':') malformed("unexpected '" + tail + "' after the shape in '" + entry + "'");
  std::string dtype = trim(tail.substr(1));
  auto it = dtypeNames().find(dtype);
  if (it == dtypeNames().end())
    throw Error("--input-shapes: unknown dtype '" + dtype + "' in '" + entry +
                    "' (expected float32, float64, int64, int32, int8, uint8 or bool)",
                ErrorKind::Usage);
  spec.dtype = it->second;
  return spec;
}

}  // namespace

std::optional<runtime::DType> parseInputDType(const std::string& name) {
  auto it = dtypeNames().find(name);
  if (it == dtypeNames().end()) return std::nullopt;
  return it->second;
}

std::string inputDTypeName(runtime::DType dtype) {
  switch (dtype) {
    case runtime::DType::Float32: return "float32";
    case runtime::DType::Float64: return "float64";
    case runtime::DType::Int64: return "int64";
    case runtime::DType::Int32: return "int32";
    case runtime::DType::Bool: return "bool";
    case runtime::DType::Int8: return "int8";
    case runtime::DType::UInt8: return "uint8";
  }
  return "float32";
}

Result<std::vector<InputSpec>> parseInputShapes(const std::string& text) {
  try {
    if (trim(text).empty()) malformed("no shapes given");
    std::vector<InputSpec> specs;
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      char c = i < text.size() ? text[i] : ',';
      if (c == '[' && ++depth > 1) malformed("nested '[' in '" + text + "'");
      if (c == ']' && --depth < 0) malformed("unbalanced ']' in '" + text + "'");
      if (c != ',' || depth > 0) continue;
      if (i == text.size() && depth != 0) malformed("missing ']' in '" + text + "'");
      std::string entry = trim(text.substr(start, i - start));
      if (entry.empty()) malformed("empty entry in '" + text + "'");
      specs.push_back(parseEntry(entry));
      start = i + 1;
    }
    if (depth != 0) malformed("missing ']' in '" + text + "'");
    bool named = !specs.front().name.empty();
    std::set<std::string> seen;
    for (const InputSpec& s : specs) {
      if (s.name.empty() == named) malformed("name every input or none");
      if (named && !seen.insert(s.name).second) malformed("input '" + s.name + "' is given twice");
    }
    return specs;
  } catch (const Error& e) {
    return Diagnostic{e.what(), e.kind()};
  }
}

std::string inputShapesText(const std::vector<InputSpec>& specs) {
  std::string text;
  for (const InputSpec& s : specs) {
    if (!text.empty()) text += ",";
    if (!s.name.empty()) text += s.name + ":";
    text += runtime::shapeString(s.shape);
    if (s.dtype != runtime::DType::Float32) text += ":" + inputDTypeName(s.dtype);
  }
  return text;
}

std::vector<InputSpec> matchInputNames(const std::vector<InputSpec>& given, const std::vector<std::string>& names) {
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& n : v) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? std::string("none") : s;
  };
  bool named = !given.empty() && !given.front().name.empty();
  if (!named) {
    if (!names.empty() && given.size() != names.size())
      throw Error("the model takes " + std::to_string(names.size()) + " input(s) (" + list(names) + "), --input-shapes gives " +
                      std::to_string(given.size()),
                  ErrorKind::InvalidInput);
    std::vector<InputSpec> out = given;
    for (size_t i = 0; i < out.size() && i < names.size(); ++i) out[i].name = names[i];
    return out;
  }
  if (names.empty()) return given;  // nothing to match against (the importer checks the count)
  std::vector<InputSpec> out;
  std::set<std::string> used;
  for (const InputSpec& s : given) {
    if (std::find(names.begin(), names.end(), s.name) == names.end())
      throw Error("the model has no input '" + s.name + "' (its inputs: " + list(names) + ")", ErrorKind::InvalidInput);
  }
  std::vector<std::string> missing;
  for (const std::string& n : names) {
    auto it = std::find_if(given.begin(), given.end(), [&](const InputSpec& s) { return s.name == n; });
    if (it == given.end()) missing.push_back(n);
    else out.push_back(*it);
  }
  if (!missing.empty())
    throw Error("no shape given for input(s) " + list(missing) + " (the model takes " + list(names) + ")",
                ErrorKind::InvalidInput);
  return out;
}

}  // namespace kiln::app
