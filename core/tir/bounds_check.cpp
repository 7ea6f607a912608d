// Bounds-checked loop IR: wraps every Load/Store index in bounds_check (see bounds_check.h).
#include "core/tir/bounds_check.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include "core/tir/functor.h"
#include "core/tir/schedule_analysis.h"

namespace kiln::core::tir {

namespace {

constexpr const char* kAttr = "bounds_check";

bool knownExtent(const Buffer& buffer) {
  for (int64_t d : buffer->shape)
    if (d < 0) return false;
  return true;
}

using schedule_detail::Interval;
using Ranges = std::map<const Var*, Interval>;

/// Every value the subexpressions of `e` take stays below 2^31 in magnitude (so neither the
/// kernel's own arithmetic nor the interval arithmetic wraps), and `e` lies in the returned
/// interval; nullopt when the ranges of the enclosing loops do not show it (a load, a select, a
/// Var bound by nothing known, ...).
std::optional<Interval> provenBounds(const Expr& e, const Ranges& ranges) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  auto within = [&](const Expr& x) {
    std::optional<Interval> b = schedule_detail::boundsOf(x, ranges);
    return b && b->lo > -kLimit && b->hi < kLimit ? b : std::nullopt;
  };
  auto children = [&](const Expr& a, const Expr& b) {
    return provenBounds(a, ranges).has_value() && provenBounds(b, ranges).has_value();
  };
  if (e.as<IntImm>() || e.as<Var>()) return within(e);
  if (const auto* cast = e.as<Cast>()) return provenBounds(cast->value, ranges) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Add>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Sub>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Mul>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Div>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Mod>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Min>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  if (const auto* op = e.as<Max>()) return children(op->a, op->b) ? within(e) : std::nullopt;
  return std::nullopt;
}

class BoundsChecker : public IRMutator {
 public:
  BoundsChecker(BoundsCheckStats& stats, BoundsCheckMode mode) : m_stats(stats), m_mode(mode) {}

  /// Comma-separated buffer names by site number.
  std::string siteTable() const {
    std::string s;
    for (const std::string& name : m_siteNames) s += (s.empty() ? "" : ",") + name;
    return s;
  }

 protected:
  using IRMutator::visit;

  Stmt visit(const For* op, const Stmt& self) override {
    const int64_t *lo = asConstInt(op->min), *n = asConstInt(op->extent);
    std::optional<Interval> range;
    if (lo && n && *n >= 1) range = Interval{*lo, *lo + *n - 1};
    return scoped(op->var, range, [&] { return IRMutator::visit(op, self); });
  }

  Stmt visit(const LetStmt* op, const Stmt& self) override {
    return scoped(op->var, provenBounds(op->value, m_ranges), [&] { return IRMutator::visit(op, self); });
  }

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
  /// mutate() of a For or LetStmt that binds `var`, with `var`'s range known (or unknown) inside.
  template <typename Mutate>
  Stmt scoped(const Expr& var, std::optional<Interval> range, Mutate mutate) {
    const Var* v = var.as<Var>();
    std::optional<Interval> outer;
    if (auto it = m_ranges.find(v); it != m_ranges.end()) outer = it->second;
    if (range)
      m_ranges[v] = *range;
    else
      m_ranges.erase(v);
    Stmt out = mutate();
    if (outer)
      m_ranges[v] = *outer;
    else
      m_ranges.erase(v);
    return out;
  }

  /// True when the enclosing loops' ranges show that every element from index + low to
  /// index + high lies in [0, extent).
  bool proven(const Expr& index, int64_t low, int64_t high, int64_t extent) {
    if (m_mode != BoundsCheckMode::Unproven) return false;
    std::optional<Interval> b = provenBounds(index, m_ranges);
    if (!b || b->lo + low < 0 || b->hi + high >= extent) return false;
    ++m_stats.proven;
    return true;
  }

  Expr checkIndex(const Buffer& buffer, const Expr& index) {
    if (!knownExtent(buffer)) {
      ++m_stats.unchecked;
      return index;
    }
    const int64_t extent = buffer->numel();
    if (const Ramp* ramp = index.as<Ramp>()) {
      // The lanes span [base + min(0, (L-1)·stride), base + max(0, (L-1)·stride)].
      Type t = ramp->base.type();
      Expr low, high;
      if (const int64_t* stride = asConstInt(ramp->stride)) {
        const int64_t span = *stride * (ramp->lanes - 1);
        if (proven(ramp->base, std::min<int64_t>(0, span), std::max<int64_t>(0, span), extent)) return index;
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
      if (proven(b->value, 0, 0, extent)) return index;
      ++m_stats.checked;
      Type t = b->value.type();
      return Broadcast::make(check(buffer, b->value, IntImm::make(t, 0), IntImm::make(t, 0)), b->lanes);
    }
    if (index.type().isVector() || !index.type().isInt()) {
      ++m_stats.unchecked;
      return index;
    }
    if (proven(index, 0, 0, extent)) return index;
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
  BoundsCheckMode m_mode;
  Ranges m_ranges;  // the enclosing loops with constant bounds, and lets of known range
  std::map<const BufferNode*, int64_t> m_sites;
  std::vector<std::string> m_siteNames;
};

}  // namespace

PrimFunc insertBoundsChecks(const PrimFunc& func, BoundsCheckStats* stats, BoundsCheckMode mode) {
  if (hasBoundsChecks(func)) return func;
  BoundsCheckStats local;
  BoundsChecker checker(stats ? *stats : local, mode);
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
