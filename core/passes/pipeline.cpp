#include "core/passes/pipeline.h"

#include <cctype>
#include <map>

#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

class PipelineParser {
 public:
  explicit PipelineParser(std::string_view text) : m_text(text) {}

  Pipeline parse() {
    Pipeline pipeline;
    skipSpace();
    if (m_pos == m_text.size()) return pipeline;
    const PassInfo* loopPass = nullptr;  // the first loop-IR pass so far
    for (;;) {
      skipSpace();
      size_t at = m_pos;
      pipeline.push_back(parseInvocation());
      const PassInfo* pass = pipeline.back().pass;
      if (pass->kind == PassKind::Loop && !loopPass) loopPass = pass;
      if (pass->kind == PassKind::Graph && loopPass)
        fail("graph pass '" + pass->name + "' after loop-IR pass '" + loopPass->name +
                 "' (graph passes run first, before lowering)",
             at);
      skipSpace();
      if (m_pos == m_text.size()) return pipeline;
      expect(',');
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw Error("pipeline '" + std::string(m_text) + "': " + what + " at column " + std::to_string(at + 1),
                ErrorKind::Usage);
  }
  void skipSpace() {
    while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos]))) ++m_pos;
  }
  void expect(char c) {
    skipSpace();
    if (m_pos >= m_text.size() || m_text[m_pos] != c) fail(std::string("expected '") + c + "'", m_pos);
    ++m_pos;
  }
  static bool isNameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  }
  std::string word(bool isValue) {
    skipSpace();
    size_t start = m_pos;
    while (m_pos < m_text.size() &&
           (isNameChar(m_text[m_pos]) || (isValue && (m_text[m_pos] == '.' || m_text[m_pos] == '+'))))
      ++m_pos;
    if (start == m_pos) fail(isValue ? "expected a value" : "expected a name", start);
    return std::string(m_text.substr(start, m_pos - start));
  }

  PassInvocation parseInvocation() {
    skipSpace();
    size_t at = m_pos;
    std::string name = word(false);
    const PassInfo* pass = findPass(name);
    if (!pass) {
      std::string known;
      for (const PassInfo* p : allPasses()) known += (known.empty() ? "" : ", ") + p->name;
      fail("unknown pass '" + name + "' (passes: " + known + ")", at);
    }
    std::map<std::string, std::string> overrides;
    skipSpace();
    if (m_pos < m_text.size() && m_text[m_pos] == '{') {
      ++m_pos;
      skipSpace();
      if (m_pos < m_text.size() && m_text[m_pos] == '}') {
        ++m_pos;
      } else {
        for (;;) {
          std::string key = word(false);
          expect('=');
          overrides[key] = word(true);
          skipSpace();
          if (m_pos < m_text.size() && m_text[m_pos] == '}') {
            ++m_pos;
            break;
          }
          if (m_pos >= m_text.size() || m_text[m_pos] != ',')
            fail("expected ',' or '}' after an option", m_pos);
          ++m_pos;
        }
      }
    }
    try {
      return PassInvocation{pass, pass->makeOptions(overrides)};
    } catch (const Error& e) {
      fail(e.what(), at);
    }
  }

  std::string_view m_text;
  size_t m_pos = 0;
};

}  // namespace

std::string PassInvocation::text() const {
  std::string s = pass->name, opts;
  PassOptions defaults = pass->makeOptions();
  for (const auto& [key, value] : options.values()) {
    if (defaults.values().at(key) == value) continue;
    opts += (opts.empty() ? "" : ",") + key + "=" + value;
  }
  return opts.empty() ? s : s + "{" + opts + "}";
}

Pipeline parsePipeline(std::string_view text) { return PipelineParser(text).parse(); }

std::string printPipeline(const Pipeline& pipeline) {
  std::string s;
  for (const PassInvocation& p : pipeline) s += (s.empty() ? "" : ",") + p.text();
  return s;
}

}  // namespace kiln::core::passes
