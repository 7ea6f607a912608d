// Schedule traces (see trace.h): text form, parsing and replay.
#include "core/tir/trace.h"

#include <cctype>

#include "core/tir/schedule.h"
#include "runtime/error.h"

namespace kiln::core::tir {

namespace {

struct Arity {
  const char* name;
  size_t minLoops, maxLoops, params;
};

constexpr Arity kPrimitives[] = {
    {"split", 1, 1, 2},       {"reorder", 2, 64, 0},  {"fuse", 2, 2, 0},     {"tile", 2, 2, 2},
    {"unroll", 1, 1, 0},      {"vectorize", 1, 1, 0}, {"parallel", 1, 1, 0}, {"compute_at", 2, 2, 0},
    {"cache_write", 1, 1, 0}, {"merge", 2, 2, 0},     {"store_at", 2, 2, 0}, {"fission", 1, 1, 0},
    {"rfactor", 1, 1, 0},     {"dot4", 1, 1, 0},
};

bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  if (trim(s).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

TraceStep parseLine(const std::string& line, int lineNo) {
  auto fail = [&](const std::string& what) -> TraceStep {
    throw Error("trace line " + std::to_string(lineNo) + ": " + what + " ('" + line + "')");
  };
  size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || !trim(line.substr(close + 1)).empty())
    return fail("expected 'primitive(loops; params)'");
  TraceStep step;
  step.primitive = trim(line.substr(0, open));
  std::string inside = line.substr(open + 1, close - open - 1);
  size_t semi = inside.find(';');
  step.loops = splitList(inside.substr(0, semi));
  for (const std::string& name : step.loops) {
    if (name.empty()) return fail("empty loop name");
    for (char c : name)
      if (!isNameChar(c)) return fail("bad loop name '" + name + "'");
  }
  if (semi != std::string::npos) {
    for (const std::string& p : splitList(inside.substr(semi + 1))) {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(p, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (p.empty() || used != p.size()) return fail("bad integer parameter '" + p + "'");
      step.params.push_back(v);
    }
  }
  try {
    validateStep(step);
  } catch (const Error& e) {
    return fail(e.what());
  }
  return step;
}

}  // namespace

void validateStep(const TraceStep& step) {
  for (const Arity& a : kPrimitives) {
    if (step.primitive != a.name) continue;
    if (step.loops.size() < a.minLoops || step.loops.size() > a.maxLoops)
      throw Error(step.primitive + " takes " +
                  (a.minLoops == a.maxLoops ? std::to_string(a.minLoops) : "at least " + std::to_string(a.minLoops)) +
                  " loop name(s), got " + std::to_string(step.loops.size()));
    if (step.params.size() != a.params)
      throw Error(step.primitive + " takes " + std::to_string(a.params) + " integer parameter(s), got " +
                  std::to_string(step.params.size()));
    return;
  }
  throw Error("unknown schedule primitive '" + step.primitive + "'");
}

std::string TraceStep::str() const {
  std::string s = primitive + "(";
  for (size_t i = 0; i < loops.size(); ++i) s += (i ? ", " : "") + loops[i];
  if (!params.empty()) {
    s += ";";
    for (int64_t p : params) s += " " + std::to_string(p) + ",";
    s.pop_back();
  }
  return s + ")";
}

void Trace::append(const Trace& other) {
  m_steps.insert(m_steps.end(), other.m_steps.begin(), other.m_steps.end());
}

std::string Trace::str() const {
  std::string s;
  for (const TraceStep& step : m_steps) s += step.str() + "\n";
  return s;
}

Trace Trace::parse(const std::string& text) {
  Trace trace;
  size_t start = 0;
  int lineNo = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string line = trim(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    ++lineNo;
    if (!line.empty()) trace.append(parseLine(line, lineNo));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return trace;
}

PrimFunc Trace::apply(const PrimFunc& func) const {
  Schedule schedule(func);
  for (const TraceStep& step : m_steps) schedule.apply(step);
  return schedule.func();
}

}  // namespace kiln::core::tir
