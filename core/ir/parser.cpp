#include "core/ir/parser.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "runtime/error.h"

namespace kiln::core {
namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string file) : m_text(text), m_file(std::move(file)) {}

  Graph parse() {
    Graph graph = parseGraphBlock();
    skipSpace();
    if (m_pos != m_text.size()) error("unexpected text after the graph");
    return graph;
  }

 private:
  /// graph(inputs) { statements return outputs }: a whole graph, or a region of a node. A region
  /// has names of its own: it sees none of the enclosing graph's values.
  Graph parseGraphBlock() {
    Graph outerGraph = std::move(m_graph);
    std::map<std::string, ValueId> outerNames = std::move(m_names);
    m_graph = Graph();
    m_names.clear();
    expectWord("graph");
    expect('(');
    skipSpace();
    if (peek() != ')') {
      for (;;) {
        std::string name = parseValueName();
        expect(':');
        TensorType type = parseType();
        define(name, m_graph.addInput(name, type));
        if (!accept(',')) break;
      }
    }
    expect(')');
    expect('{');
    for (;;) {
      skipSpace();
      if (peekWord("return")) break;
      if (peekWord("group")) {
        parseGroup();
        continue;
      }
      parseStatement();
    }
    expectWord("return");
    std::vector<ValueId> outputs;
    skipSpace();
    if (peek() == '%') {
      do outputs.push_back(use(parseValueName()));
      while (accept(','));
    }
    expect('}');
    m_graph.setOutputs(outputs);
    Graph graph = std::move(m_graph);
    m_graph = std::move(outerGraph);
    m_names = std::move(outerNames);
    return graph;
  }

  [[noreturn]] void error(const std::string& msg) const { errorAt(m_pos, msg); }
  [[noreturn]] void errorAt(size_t pos, const std::string& msg) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos && i < m_text.size(); ++i) {
      if (m_text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string where = (m_file.empty() ? "line " : m_file + ":") + std::to_string(line) + ":" + std::to_string(col);
    throw Error(where + ": " + msg, ErrorKind::InvalidModel);
  }

  void skipSpace() {
    while (m_pos < m_text.size()) {
      if (std::isspace(static_cast<unsigned char>(m_text[m_pos]))) { ++m_pos; continue; }
      if (m_text[m_pos] == '#') {  // comment to end of line
        while (m_pos < m_text.size() && m_text[m_pos] != '\n') ++m_pos;
        continue;
      }
      break;
    }
  }
  char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }
  bool accept(char c) {
    skipSpace();
    if (peek() != c) return false;
    ++m_pos;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) error(std::string("expected '") + c + "'");
  }
  static bool isIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
  std::string parseIdent() {
    skipSpace();
    size_t start = m_pos;
    while (m_pos < m_text.size() && isIdent(m_text[m_pos])) ++m_pos;
    if (start == m_pos) error("expected a name");
    return std::string(m_text.substr(start, m_pos - start));
  }
  bool peekWord(std::string_view w) {
    skipSpace();
    return m_text.substr(m_pos, w.size()) == w &&
           (m_pos + w.size() >= m_text.size() || !isIdent(m_text[m_pos + w.size()]));
  }
  void expectWord(std::string_view w) {
    if (!peekWord(w)) error("expected '" + std::string(w) + "'");
    m_pos += w.size();
  }
  std::string parseValueName() {
    skipSpace();
    m_nameStart = m_pos;
    expect('%');
    return parseIdent();
  }
  void define(const std::string& name, ValueId id) {
    if (m_graph.value(id).name != name) error("value %" + name + " is defined twice");
    m_names[name] = id;
  }
  ValueId use(const std::string& name) {
    auto it = m_names.find(name);
    if (it == m_names.end()) errorAt(m_nameStart, "use of undefined value %" + name);
    return it->second;
  }

  TensorType parseType() {
    std::string dt = parseIdent();
    auto dtype = runtime::parseDType(dt);
    if (!dtype) error("unknown dtype '" + dt + "'");
    TensorType t{*dtype, {}};
    expect('[');
    skipSpace();
    if (peek() != ']') {
      do t.shape.push_back(parseInt());
      while (accept(','));
    }
    expect(']');
    // Element counts must fit in int64 (shape arithmetic everywhere relies on it).
    int64_t numel = 1;
    for (int64_t d : t.shape)
      if (d >= 0 && __builtin_mul_overflow(numel, d, &numel)) error("shape " + runtime::shapeString(t.shape) + " is too large");
    return t;
  }

  int64_t parseInt() {
    skipSpace();
    size_t start = m_pos;
    if (peek() == '-' || peek() == '+') ++m_pos;
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++m_pos;
    if (start == m_pos) error("expected an integer");
    try {
      return std::stoll(std::string(m_text.substr(start, m_pos - start)));
    } catch (const std::exception&) {
      error("integer out of range");
    }
  }

  // A number token; sets isFloat when it has a '.', an exponent or is nan/inf.
  double parseNumber(bool& isFloat, int64_t& asInt) {
    skipSpace();
    size_t start = m_pos;
    if (peek() == '-' || peek() == '+') ++m_pos;
    if (m_text.substr(m_pos, 3) == "nan" || m_text.substr(m_pos, 3) == "inf") {
      bool neg = m_text[start] == '-';
      bool nan = m_text.substr(m_pos, 3) == "nan";
      m_pos += 3;
      isFloat = true;
      if (nan) return std::numeric_limits<double>::quiet_NaN();
      return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }
    while (m_pos < m_text.size() && (std::isdigit(static_cast<unsigned char>(m_text[m_pos])) ||
                                     std::strchr(".eE+-", m_text[m_pos]))) {
      if ((m_text[m_pos] == '+' || m_text[m_pos] == '-') && !(m_text[m_pos - 1] == 'e' || m_text[m_pos - 1] == 'E')) break;
      ++m_pos;
    }
    std::string tok(m_text.substr(start, m_pos - start));
    if (tok.empty() || tok == "-" || tok == "+") error("expected a number");
    isFloat = tok.find_first_of(".eE") != std::string::npos;
    try {
      if (!isFloat) {
        asInt = std::stoll(tok);
        return static_cast<double>(asInt);
      }
      return std::stod(tok);
    } catch (const std::exception&) {
      error("malformed number '" + tok + "'");
    }
  }

  std::string parseString() {
    expect('"');
    std::string s;
    while (m_pos < m_text.size() && m_text[m_pos] != '"') {
      if (m_text[m_pos] == '\\' && m_pos + 1 < m_text.size()) ++m_pos;
      s += m_text[m_pos++];
    }
    if (m_pos >= m_text.size()) error("unterminated string");
    ++m_pos;
    return s;
  }

  AttrValue parseAttrValue() {
    skipSpace();
    if (peek() == '"') return parseString();
    if (peek() == '[') {
      ++m_pos;
      std::vector<int64_t> ints;
      std::vector<double> floats;
      bool anyFloat = false;
      skipSpace();
      if (peek() != ']') {
        do {
          bool isFloat = false;
          int64_t i = 0;
          double d = parseNumber(isFloat, i);
          anyFloat |= isFloat;
          ints.push_back(i);
          floats.push_back(d);
        } while (accept(','));
      }
      expect(']');
      if (anyFloat) return floats;
      return ints;
    }
    bool isFloat = false;
    int64_t i = 0;
    double d = parseNumber(isFloat, i);
    if (isFloat) return d;
    return i;
  }

  runtime::Tensor parseConstantData(const TensorType& type) {
    // An elided constant is allocated from its type alone: bound what a line of text may ask for.
    constexpr int64_t kMaxConstantBytes = int64_t{1} << 30;
    int64_t bytes = static_cast<int64_t>(runtime::dtypeSize(type.dtype));
    for (int64_t d : type.shape) {
      if (d < 0) error("negative dimension in constant type " + type.str());
      if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxConstantBytes)
        error("constant of type " + type.str() + " is larger than 1 GiB");
    }
    runtime::Tensor t = runtime::Tensor::zeros(type.dtype, type.shape);
    if (peekWord("elided")) {
      m_pos += 6;
      return t;
    }
    expect('[');
    int64_t n = t.numel();
    for (int64_t k = 0; k < n; ++k) {
      if (k) expect(',');
      bool isFloat = false;
      int64_t i = 0;
      double d = parseNumber(isFloat, i);
      switch (type.dtype) {
        case DType::Float32: t.data<float>()[k] = static_cast<float>(d); break;
        case DType::Float64: t.data<double>()[k] = d; break;
        case DType::Int64: t.data<int64_t>()[k] = i; break;
        case DType::Int32: t.data<int32_t>()[k] = static_cast<int32_t>(i); break;
        case DType::Bool: t.data<uint8_t>()[k] = i != 0; break;
        case DType::Int8: t.data<int8_t>()[k] = static_cast<int8_t>(i); break;
        case DType::UInt8: t.data<uint8_t>()[k] = static_cast<uint8_t>(i); break;
      }
    }
    expect(']');
    return t;
  }

  // group @name { statements }: the nodes defined inside form one fused group.
  void parseGroup() {
    expectWord("group");
    expect('@');
    std::string name = parseIdent();
    expect('{');
    NodeId first = static_cast<NodeId>(m_graph.nodes().size());
    for (;;) {
      skipSpace();
      if (peek() == '}') break;
      if (peek() != '%') error("expected a statement or '}' in group @" + name);
      parseStatement();
    }
    expect('}');
    NodeId end = static_cast<NodeId>(m_graph.nodes().size());
    if (end == first) error("group @" + name + " has no nodes");
    for (const FusedGroup& g : m_graph.groups())
      if (g.name == name) error("group @" + name + " is defined twice");
    m_graph.addGroup(name, first, end);
  }

  void parseStatement() {
    std::vector<std::string> names;
    do names.push_back(parseValueName());
    while (accept(','));
    expect('=');
    if (peekWord("constant")) {
      m_pos += 8;
      if (names.size() != 1) error("a constant defines exactly one value");
      TensorType type = parseType();
      define(names[0], m_graph.addConstant(names[0], parseConstantData(type)));
      return;
    }
    skipSpace();
    size_t opStart = m_pos;  // errors about the node (inference, output counts) point at its op
    std::string op = parseIdent();
    expect('(');
    std::vector<ValueId> inputs;
    skipSpace();
    if (peek() != ')') {
      do inputs.push_back(use(parseValueName()));
      while (accept(','));
    }
    expect(')');
    Attrs attrs;
    if (accept('{')) {
      skipSpace();
      if (peek() != '}') {
        do {
          std::string key = parseIdent();
          expect('=');
          attrs.set(key, parseAttrValue());
        } while (accept(','));
      }
      expect('}');
    }
    expect(':');
    std::vector<TensorType> declared;
    std::vector<size_t> declaredAt;
    do {
      skipSpace();
      declaredAt.push_back(m_pos);
      declared.push_back(parseType());
    } while (accept(','));
    std::string location;
    if (peekWord("loc")) {
      m_pos += 3;
      expect('(');
      location = parseString();
      expect(')');
    }
    std::vector<Region> regions;
    if (accept('{')) {
      while (!accept('}')) regions.push_back(std::make_shared<const Graph>(parseGraphBlock()));
    }
    std::vector<ValueId> outs;
    try {
      outs = m_graph.addNode(op, inputs, attrs, location, names[0], std::move(regions));
    } catch (const Error& e) {
      errorAt(opStart, e.what());
    }
    if (outs.size() != names.size()) errorAt(opStart, op + " defines " + std::to_string(outs.size()) + " values");
    if (declared.size() != outs.size())
      errorAt(opStart, op + " defines " + std::to_string(outs.size()) + " values but " + std::to_string(declared.size()) +
            " types are declared");
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!(m_graph.type(outs[i]) == declared.at(i)))
        errorAt(declaredAt[i], "declared type " + declared[i].str() + " of %" + names[i] + " differs from inferred " +
              m_graph.type(outs[i]).str());
      // Later outputs of a multi-output node were named after the first; rename by re-defining.
      if (i == 0) define(names[i], outs[i]);
      else m_names[names[i]] = outs[i];
    }
  }

  std::string_view m_text;
  std::string m_file;  // empty: errors say "line L:C"
  size_t m_pos = 0;
  size_t m_nameStart = 0;  // where the last %name began (errors about a use point at it)
  Graph m_graph;
  std::map<std::string, ValueId> m_names;
};

}  // namespace

Graph parseGraph(std::string_view text) { return Parser(text, "").parse(); }

Graph parseGraph(std::string_view text, const std::string& file) { return Parser(text, file).parse(); }

}  // namespace kiln::core
