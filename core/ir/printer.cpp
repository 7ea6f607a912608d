#include "core/ir/printer.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace kiln::core {
namespace {

std::string formatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string formatFloat32(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void printElements(std::ostream& os, const runtime::Tensor& t) {
  os << " [";
  int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (i) os << ", ";
    switch (t.dtype()) {
      case DType::Float32: os << formatFloat32(t.data<float>()[i]); break;
      case DType::Float64: os << formatDouble(t.data<double>()[i]); break;
      case DType::Int64: os << t.data<int64_t>()[i]; break;
      case DType::Int32: os << t.data<int32_t>()[i]; break;
      case DType::Bool: os << (t.data<uint8_t>()[i] ? 1 : 0); break;
      case DType::Int8: os << static_cast<int>(t.data<int8_t>()[i]); break;
      case DType::UInt8: os << static_cast<int>(t.data<uint8_t>()[i]); break;
    }
  }
  os << "]";
}

}  // namespace

std::string printAttrValue(const AttrValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return formatDouble(v); }
    std::string operator()(const std::string& v) const { return quote(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + formatDouble(v[i]);
      return s + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

std::string printGraph(const Graph& graph, const PrintOptions& options) {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value& v = graph.value(graph.inputs()[i]);
    os << (i ? ", " : "") << "%" << v.name << ": " << v.type.str();
  }
  os << ") {\n";
  // Values in creation order: constants and node results interleave as they were built, so
  // parsing the text back reproduces the same value ids. A fused group's nodes are consecutive;
  // they print inside a `group @name { ... }` block.
  int openGroup = -1;
  auto indent = [&openGroup] { return openGroup >= 0 ? "    " : "  "; };
  for (const Value& v : graph.values()) {
    if (v.isConstant()) {
      os << indent() << "%" << v.name << " = constant " << v.type.str();
      if (options.fullConstants || v.type.numel() <= options.inlineLimit)
        printElements(os, *v.constant);
      else
        os << " elided";
      os << "\n";
      continue;
    }
    if (v.producer < 0 || v.outputIndex != 0) continue;
    const Node& n = graph.node(v.producer);
    if (n.group >= 0 && n.group != openGroup) {
      openGroup = n.group;
      os << "  group @" << graph.groups()[n.group].name << " {\n";
    }
    os << indent();
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << "%" << graph.value(n.outputs[i]).name;
    os << " = " << n.op << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << "%" << graph.value(n.inputs[i]).name;
    os << ")";
    if (!n.attrs.values().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [name, value] : n.attrs.values()) {
        os << (first ? "" : ", ") << name << "=" << printAttrValue(value);
        first = false;
      }
      os << "}";
    }
    os << " : ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << graph.type(n.outputs[i]).str();
    if (options.locations && !n.location.empty()) os << " loc(" << quote(n.location) << ")";
    if (!n.regions.empty()) {
      // Sub-graphs print as nested graphs, indented under their node.
      os << " {\n";
      for (const Region& r : n.regions) {
        std::istringstream lines(printGraph(*r, options));
        for (std::string line; std::getline(lines, line);) os << indent() << "  " << line << "\n";
      }
      os << indent() << "}";
    }
    os << "\n";
    if (n.group >= 0 && v.producer == graph.groups()[n.group].root()) {
      os << "  }\n";
      openGroup = -1;
    }
  }
  os << "  return";
  for (size_t i = 0; i < graph.outputs().size(); ++i) os << (i ? ", " : " ") << "%" << graph.value(graph.outputs()[i]).name;
  os << "\n}\n";
  return os.str();
}

}  // namespace kiln::core
