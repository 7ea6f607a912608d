// Bounds-checked loop IR: wraps every Load/Store index in bounds_check (see bounds_check.h).
#include "core/tir/bounds_check.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "core/tir/functor.h"

namespace kiln::core::tir {

namespace {

constexpr const char* kAttr = "bounds_check";

bool knownExtent(const Buffer& buffer) {
  for (int64_t d : buffer->shape)
    if (d < 0) return false;
  return true;
}

class BoundsChecker : public IRMutator {
 public:
  explicit BoundsChecker(BoundsCheckStats& stats) : m_stats(stats) {}

  /// Comma-separated buffer names by site number.
  std::string siteTable() const {
    std::string s;
    for (const std::string& name : m_siteNames) s += (s.empty() ? "" : ",") + name;
    return s;
  }

 protected:
  using IRMutator::visit;

  Expr visit(const Load* op, const Expr& self) override {
    Expr index = mutate(op->index);
    Expr checked = checkIndex(op->buffer, index);
    if (checked.same(op->index)) return self;
    return Load::make(op->buffer, checked);
  }

  Stmt visit(const Store* op, const Stmt& self) override {
    Expr index = mutate(op->index);
    Expr value = mutate(op->value);
    Expr checked = checkIndex(op->buffer, index);
    if (checked.same(op->index) && value.same(op->value)) return self;
    return Store::make(op->buffer, checked, value);
  }

 private:
  Expr checkIndex(const Buffer& buffer, const Expr& index) {
    if (!knownExtent(buffer)) {
      ++m_stats.unchecked;
      return index;
    }
    if (const Ramp* ramp = index.as<Ramp>()) {
      // The lanes span [base + min(0, (L-1)·stride), base + max(0, (L-1)·stride)].
      Type t = ramp->base.type();
      Expr low, high;
      if (const int64_t* stride = asConstInt(ramp->stride)) {
        const int64_t span = *stride * (ramp->lanes - 1);
        low = IntImm::make(t, std::min<int64_t>(0, span));
        high = IntImm::make(t, std::max<int64_t>(0, span));
      } else {
        Expr span = ramp->stride * IntImm::make(t, ramp->lanes - 1), zero = IntImm::make(t, 0);
        low = min(zero, span);
        high = max(zero, span);
      }
      ++m_stats.checked;
      return Ramp::make(check(buffer, ramp->base, low, high), ramp->stride, ramp->lanes);
    }
    if (const Broadcast* b = index.as<Broadcast>()) {
      ++m_stats.checked;
      Type t = b->value.type();
      return Broadcast::make(check(buffer, b->value, IntImm::make(t, 0), IntImm::make(t, 0)), b->lanes);
    }
    if (index.type().isVector() || !index.type().isInt()) {
      ++m_stats.unchecked;
      return index;
    }
    ++m_stats.checked;
    Type t = index.type();
    return check(buffer, index, IntImm::make(t, 0), IntImm::make(t, 0));
  }

  Expr check(const Buffer& buffer, const Expr& x, const Expr& low, const Expr& high) {
    Type t = x.type();
    return Call::make("bounds_check", {x, low, high, IntImm::make(t, buffer->numel()),
                                       IntImm::make(t, site(buffer))});
  }

  int64_t site(const Buffer& buffer) {
    auto [it, inserted] = m_sites.emplace(buffer.get(), static_cast<int64_t>(m_siteNames.size()));
    if (inserted) m_siteNames.push_back(buffer->name);
    return it->second;
  }

  BoundsCheckStats& m_stats;
  std::map<const BufferNode*, int64_t> m_sites;
  std::vector<std::string> m_siteNames;
};

}  // namespace

PrimFunc insertBoundsChecks(const PrimFunc& func, BoundsCheckStats* stats) {
  if (hasBoundsChecks(func)) return func;
  BoundsCheckStats local;
  BoundsChecker checker(stats ? *stats : local);
  PrimFunc out = func;
  if (func.body.defined()) out.body = checker.mutate(func.body);
  out.attrs[kAttr] = checker.siteTable();
  return out;
}

bool hasBoundsChecks(const PrimFunc& func) { return func.attrs.count(kAttr) != 0; }

bool boundsCheckRequested() {
  const char* v = std::getenv("KILN_BOUNDS_CHECK");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::string boundsCheckBufferName(const PrimFunc& func, int64_t site) {
  auto it = func.attrs.find(kAttr);
  if (it == func.attrs.end() || site < 0) return "?";
  size_t begin = 0;
  for (int64_t k = 0; k < site; ++k) {
    begin = it->second.find(',', begin);
    if (begin == std::string::npos) return "?";
    ++begin;
  }
  size_t end = it->second.find(',', begin);
  return it->second.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace kiln::core::tir
