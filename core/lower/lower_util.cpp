// Loop-building helpers shared by the per-operator lowerings.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "core/lower/lower_internal.h"
#include "core/lower/schedule_config.h"
#include "core/tir/functor.h"
#include "core/tir/schedule.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

void OpContext::unsupported(const std::string& what) const {
  throw Error(op + ": " + what + " is not supported" + where, ErrorKind::Unsupported);
}

const Knobs* OpContext::tunedKnobs(const std::string& key) const {
  return options.schedules ? options.schedules->find(key) : nullptr;
}

void OpContext::requireFloat() const {
  for (const auto* types : {&inTypes, &outTypes}) {
    for (const TensorType& t : *types) {
      if (t.dtype != DType::Float32 && t.dtype != DType::Float64)
        unsupported("dtype " + std::string(runtime::dtypeName(t.dtype)));
    }
  }
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

LoopNest::LoopNest(std::vector<int64_t> extents, std::vector<std::string> names, bool parallel,
                   ParallelPolicy policy)
    : m_extents(std::move(extents)) {
  size_t rank = m_extents.size();
  for (size_t d = names.size(); d < rank; ++d) names.push_back("i" + std::to_string(d));
  for (size_t d = 0; d < rank; ++d) m_vars.push_back(Var::make(names[d]));
  m_index = m_vars;
  if (!parallel || rank == 0) return;

  // Fuse axes [0, k] until the fused extent is large enough to spread over threads.
  size_t limit = policy == ParallelPolicy::KeepInnermost && rank > 1 ? rank - 1 : rank;
  size_t k = 0;
  int64_t product = m_extents[0];
  while (product < kParallelMinExtent && k + 1 < limit) product *= m_extents[++k];
  if (product < kParallelMinExtent && limit < rank) {
    m_innermostParallel = true;
    return;
  }
  m_fuseEnd = k + 1;
  std::string fusedName;
  for (size_t d = 0; d < m_fuseEnd; ++d) {
    if (m_extents[d] == 1) {
      m_index[d] = i64(0);
      continue;
    }
    m_chain.push_back(d);
    fusedName += (fusedName.empty() ? "" : "_") + names[d];
  }
  if (m_chain.size() == 1) {
    m_fused = m_vars[m_chain[0]];
    return;
  }
  m_fused = Var::make(fusedName.empty() ? names[0] : fusedName);
  int64_t inner = 1;
  for (size_t j = m_chain.size(); j-- > 0;) {
    size_t d = m_chain[j];
    Expr e = inner == 1 ? m_fused : m_fused / i64(inner);
    if (j > 0) e = e % i64(m_extents[d]);
    m_index[d] = e;
    inner *= m_extents[d];
  }
}

Expr LoopNest::offset(const std::vector<int64_t>& strides) const {
  KILN_ASSERT(strides.size() == rank(), "LoopNest::offset: stride count differs from the rank");
  Expr sum;
  auto addTerm = [&sum](Expr term) { sum = sum.defined() ? sum + term : term; };
  std::vector<bool> done(rank(), false);
  if (m_chain.size() > 1) {
    bool contiguous = true;
    for (size_t j = 0; j + 1 < m_chain.size(); ++j)
      contiguous &= strides[m_chain[j]] == strides[m_chain[j + 1]] * m_extents[m_chain[j + 1]];
    if (contiguous) {
      if (strides[m_chain.back()] != 0) addTerm(m_fused * i64(strides[m_chain.back()]));
      for (size_t d : m_chain) done[d] = true;
    }
  }
  for (size_t d = 0; d < rank(); ++d) {
    if (!done[d] && strides[d] != 0 && m_extents[d] != 1) addTerm(m_index[d] * i64(strides[d]));
  }
  return sum.defined() ? sum : i64(0);
}

Stmt LoopNest::wrap(Stmt body, const std::vector<Buffer>& locals) const {
  auto allocate = [&locals](Stmt s) {
    for (size_t i = locals.size(); i-- > 0;) s = Allocate::make(locals[i], s);
    return s;
  };
  auto loop = [&](size_t d, ForKind kind, Stmt s) {
    return For::make(m_vars[d], i64(0), i64(m_extents[d]), kind, std::move(s));
  };
  size_t r = rank();
  if (m_innermostParallel) {
    body = loop(r - 1, ForKind::Parallel, allocate(body));
    for (size_t d = r - 1; d-- > 0;) body = loop(d, ForKind::Serial, body);
    return body;
  }
  for (size_t d = r; d > m_fuseEnd; --d) body = loop(d - 1, ForKind::Serial, body);
  if (m_fuseEnd == 0) return allocate(body);
  int64_t fusedExtent = 1;
  for (size_t d = 0; d < m_fuseEnd; ++d) fusedExtent *= m_extents[d];
  return For::make(m_fused, i64(0), i64(fusedExtent), ForKind::Parallel, allocate(body));
}

Buffer makeLocal(const std::string& name, Type type) { return makeBuffer(name, type, {1}); }

Expr loadLocal(const Buffer& local) { return Load::make(local, i64(0)); }

Stmt storeLocal(const Buffer& local, Expr value) { return Store::make(local, i64(0), std::move(value)); }

Stmt serialFor(const Expr& var, int64_t min, int64_t extent, Stmt body) {
  return For::make(var, i64(min), i64(extent), ForKind::Serial, std::move(body));
}

Expr literal(Type t, double value) {
  if (t.isFloat()) return FloatImm::make(t.element(), value);
  return IntImm::make(t.element(), static_cast<int64_t>(value));
}

namespace {

class ClashRenamer : public IRMutator {
 public:
  explicit ClashRenamer(std::set<std::string> taken) : m_taken(std::move(taken)) {}

 protected:
  using IRMutator::visit;

  Expr visit(const Var* op, const Expr& self) override {
    auto it = m_vars.find(op);
    return it == m_vars.end() ? self : it->second;
  }
  Expr visit(const Load* op, const Expr& self) override {
    Expr index = mutate(op->index);
    Buffer buffer = renamed(op->buffer);
    if (index.same(op->index) && buffer == op->buffer) return self;
    return Load::make(buffer, index);
  }
  Stmt visit(const Store* op, const Stmt& self) override {
    Expr index = mutate(op->index), value = mutate(op->value);
    Buffer buffer = renamed(op->buffer);
    if (index.same(op->index) && value.same(op->value) && buffer == op->buffer) return self;
    return Store::make(buffer, index, value);
  }
  Stmt visit(const For* op, const Stmt& self) override {
    Expr var = bind(op->var);
    if (var.same(op->var)) return IRMutator::visit(op, self);
    return For::make(var, mutate(op->min), mutate(op->extent), op->forKind, mutate(op->body));
  }
  Stmt visit(const LetStmt* op, const Stmt& self) override {
    Expr var = bind(op->var);
    if (var.same(op->var)) return IRMutator::visit(op, self);
    return LetStmt::make(var, mutate(op->value), mutate(op->body));
  }
  Stmt visit(const Allocate* op, const Stmt& self) override {
    if (!m_taken.count(op->buffer->name)) return IRMutator::visit(op, self);
    Buffer fresh = makeBuffer(freshName(op->buffer->name), op->buffer->elemType, op->buffer->shape);
    m_buffers[op->buffer.get()] = fresh;
    return Allocate::make(fresh, mutate(op->body));
  }

 private:
  std::string freshName(const std::string& name) {
    std::string candidate = name;
    for (int i = 1; m_taken.count(candidate); ++i) candidate = name + "_" + std::to_string(i);
    m_taken.insert(candidate);
    return candidate;
  }
  Expr bind(const Expr& var) {
    const auto* v = var.as<Var>();
    if (!m_taken.count(v->name)) return var;
    Expr fresh = Var::make(freshName(v->name), v->type);
    m_vars[v] = fresh;
    return fresh;
  }
  Buffer renamed(const Buffer& b) const {
    auto it = m_buffers.find(b.get());
    return it == m_buffers.end() ? b : it->second;
  }

  std::set<std::string> m_taken;
  std::map<const Var*, Expr> m_vars;
  std::map<const BufferNode*, Buffer> m_buffers;
};

}  // namespace

Stmt renameClashes(const Stmt& body, const std::vector<Buffer>& params) {
  std::set<std::string> names;
  for (const Buffer& b : params) names.insert(b->name);
  return ClashRenamer(std::move(names)).mutate(body);
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  KILN_ASSERT(a >= 0 && a < std::max<int64_t>(rank, 1), "axis out of range");
  return a;
}

ReductionAxes reductionAxes(const OpContext& ctx) {
  const Shape& xs = ctx.inTypes[0].shape;
  auto rank = static_cast<int64_t>(xs.size());
  ReductionAxes r;
  for (int64_t a : ctx.attrs.getInts("axes")) r.axes.insert(normalizeAxis(a, rank));
  r.inputShape = r.keptShape = xs;
  r.inputStrides = contiguousStrides(xs);
  r.offset = i64(0);
  for (int64_t d : r.axes) {
    r.keptShape[d] = 1;
    Expr v = Var::make("r" + std::to_string(d));
    r.vars.push_back(v);
    r.offset = r.offset + v * r.inputStrides[d];
    r.count *= xs[d];
  }
  return r;
}

Stmt ReductionAxes::wrap(Stmt body) const {
  size_t k = vars.size();
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    --k;
    body = serialFor(vars[k], 0, inputShape[static_cast<size_t>(*it)], body);
  }
  return body;
}

std::vector<Expr> rowIndex(const Expr& m, const Shape& leading) {
  std::vector<Expr> idx(leading.size());
  Expr rest = m;
  for (size_t d = leading.size(); d-- > 0;) {
    idx[d] = d == 0 ? rest : rest % leading[d];
    if (d > 0) rest = rest / leading[d];
  }
  return idx;
}

// Primitive-scheduled kernels of tuning records (lower_internal.h).

PrimFunc plainFunc(std::string name, const Buffer& x, const Buffer& w, const Buffer& b, const Buffer& y, Stmt body) {
  PrimFunc f;
  f.name = std::move(name);
  f.params = {x, w};
  if (b) f.params.push_back(b);
  f.params.push_back(y);
  f.numOutputs = 1;
  f.body = std::move(body);
  return f;
}

Stmt tunedBySketch(const OpContext& ctx, PrimFunc plain, const std::function<bool(const Knobs&)>& fits,
                   const std::function<void(Schedule&, const Knobs&)>& sketch,
                   const std::function<bool(const Trace&)>& stale) {
  const ScheduleConfigs* configs = ctx.options.schedules.get();
  if (!configs) return Stmt();
  const std::string* traceText = configs->findTrace(ctx.tuneKey);
  const Knobs* knobs = configs->find(ctx.tuneKey);
  // A trace recorded on an older form of the plain nest gives way to its record's annotation.
  if (traceText && stale && knobs && knobs->count("mi")) {
    try {
      if (stale(Trace::parse(*traceText))) traceText = nullptr;
    } catch (const Error&) {
      // Not a trace at all: the replay below refuses it with one line.
    }
  }
  if (!traceText && (!knobs || !knobs->count("mi"))) return Stmt();
  // A sketch annotation made for another form of the kernel (e.g. Winograd's for the direct
  // convolution) selects neither its trace nor its knobs here.
  if (knobs && knobs->count("mi") && !fits(*knobs)) return Stmt();
  Schedule sched(std::move(plain));
  if (traceText) {
    try {
      Trace trace = Trace::parse(*traceText);
      for (const TraceStep& step : trace.steps()) sched.apply(step);
    } catch (const Error& e) {
      throw Error("tuning record of '" + ctx.tuneKey + "': its trace does not replay: " + e.what() + ctx.where,
                  ErrorKind::InvalidInput);
    }
  } else {
    try {
      sketch(sched, *knobs);
    } catch (const Error& e) {
      throw Error("tuned configuration '" + knobsText(*knobs) + "' of '" + ctx.tuneKey + "': " + e.what() + ctx.where,
                  ErrorKind::InvalidInput);
    }
  }
  ctx.schedule = knobs ? knobsText(*knobs) : "";
  ctx.trace = sched.trace().str();
  return sched.func().body;
}

Stmt defaultSketch(const OpContext& ctx, PrimFunc plain, const Knobs& knobs,
                   const std::function<void(Schedule&, const Knobs&)>& sketch) {
  Schedule sched(std::move(plain));
  sketch(sched, knobs);
  ctx.schedule = knobsText(knobs);
  ctx.trace = sched.trace().str();
  return sched.func().body;
}

Stmt kernelBySketch(const OpContext& ctx, PrimFunc plain, const Knobs* tuned,
                    const std::function<bool(const Knobs&)>& fits,
                    const std::function<void(Schedule&, const Knobs&)>& sketch,
                    const std::function<std::optional<Knobs>(const Knobs&)>& retired, const Knobs& defaults) {
  Stmt nest = tunedBySketch(ctx, plain, fits, sketch);
  if (nest.defined()) return nest;
  if (tuned && !tuned->count("mi"))
    if (std::optional<Knobs> k = retired(*tuned)) return defaultSketch(ctx, std::move(plain), *k, sketch);
  return defaultSketch(ctx, std::move(plain), defaults, sketch);
}

namespace {

bool readsBuffer(const Stmt& nest, const Buffer& buffer) {
  struct Reads : IRVisitor {
    const BufferNode* buffer;
    bool reads = false;
    using IRVisitor::visit;
    void visit(const Load* op) override {
      reads = reads || op->buffer.get() == buffer;
      IRVisitor::visit(op);
    }
  } check;
  check.buffer = buffer.get();
  check.visitStmt(nest);
  return check.reads;
}

/// Rewrites every store to `from` as a store to `to` of its value mapped by `flatAt(value, offset)`
/// when given, else by `at(value, axes)` with the axes of the element in [leading..., n].
struct AtStores : IRMutator {
  Buffer from, to;
  const Shape* leading = nullptr;
  int64_t n = 1;
  std::function<Expr(Expr, const std::vector<Expr>&)> at;
  std::function<Expr(Expr, const Expr&)> flatAt;
  std::map<const Var*, schedule_detail::Interval> ranges;  // the enclosing loops
  using IRMutator::visit;
  Stmt visit(const For* op, const Stmt& self) override {
    const int64_t *mn = asConstInt(op->min), *ext = asConstInt(op->extent);
    if (mn && ext && *ext > 0) ranges[op->var.as<Var>()] = {*mn, *mn + *ext - 1};
    Stmt out = IRMutator::visit(op, self);
    ranges.erase(op->var.as<Var>());
    return out;
  }
  /// The axis indices of element `flat` of [leading..., n]: each division by an axis taken
  /// apart by the loops' ranges where it can be (no integer division left in the code), else
  /// `/` and `%`.
  std::vector<Expr> axes(const Expr& flat, int64_t span) {
    std::vector<int64_t> dims(leading->begin(), leading->end());
    dims.push_back(n);
    std::vector<Expr> idx(dims.size());
    Expr rest = flat;
    for (size_t d = dims.size(); d-- > 0;) {
      if (d == 0) {
        idx[d] = rest;
        break;
      }
      const int64_t width = d + 1 == dims.size() ? span : 1;
      if (auto qr = schedule_detail::divideByRanges(rest, dims[d], ranges, width)) {
        idx[d] = qr->second, rest = qr->first;
      } else {
        idx[d] = rest % dims[d], rest = rest / dims[d];
      }
    }
    return idx;
  }
  Stmt visit(const Store* op, const Stmt& self) override {
    if (op->buffer != from) return IRMutator::visit(op, self);
    if (flatAt) return Store::make(to, op->index, flatAt(op->value, op->index));
    const auto* ramp = op->index.as<Ramp>();
    // The elements a vector store covers (a ramp of unknown stride is never divided by ranges).
    int64_t span = 1;
    if (ramp) {
      const int64_t* stride = asConstInt(ramp->stride);
      span = stride && *stride > 0 ? (ramp->lanes - 1) * *stride + 1 : std::numeric_limits<int32_t>::max();
    }
    std::vector<Expr> index = axes(ramp ? ramp->base : op->index, span);
    if (ramp) index.back() = Ramp::make(index.back(), ramp->stride, ramp->lanes);
    return Store::make(to, op->index, at(op->value, index));
  }
};

}  // namespace

Stmt epilogueAtStores(const OpContext& ctx, const Stmt& nest, const Shape& leading, int64_t n) {
  if (readsBuffer(nest, ctx.out[0])) return nest;
  AtStores apply;
  apply.from = apply.to = ctx.out[0];
  apply.leading = &leading, apply.n = n;
  apply.at = [&](Expr value, const std::vector<Expr>& index) {
    return ctx.applyEpilogue(std::move(value), index);
  };
  if (ctx.flatEpilogue) apply.flatAt = ctx.flatEpilogue;
  return apply.mutate(nest);
}

namespace {

/// Rewrites load and store indices as affine sums (see distributedIndices).
struct DistributeIndices : IRMutator {
  using IRMutator::visit;
  static Expr distributed(const Expr& index) {
    if (const auto* ramp = index.as<Ramp>())
      return Ramp::make(distributed(ramp->base), ramp->stride, ramp->lanes);
    if (index.type().lanes != 1) return index;
    std::optional<schedule_detail::Affine> form =
        schedule_detail::affineForm(index, schedule_detail::varsIn(index), schedule_detail::NonAffine::Atom);
    return form ? form->toExpr(index.type()) : index;
  }
  Expr visit(const Load* op, const Expr&) override {
    return Load::make(op->buffer, distributed(mutate(op->index)));
  }
  Stmt visit(const Store* op, const Stmt&) override {
    return Store::make(op->buffer, distributed(mutate(op->index)), mutate(op->value));
  }
};

}  // namespace

Stmt distributedIndices(const Stmt& nest) { return DistributeIndices().mutate(nest); }

Stmt storesInto(const Stmt& nest, const Buffer& from, const Buffer& to, const Shape& leading, int64_t n,
                const std::function<Expr(Expr value, const std::vector<Expr>& index)>& valueAt) {
  KILN_ASSERT(!readsBuffer(nest, from), "storesInto: the nest reads back the buffer " + from->name);
  AtStores apply;
  apply.from = from, apply.to = to;
  apply.leading = &leading, apply.n = n;
  apply.at = valueAt;
  return apply.mutate(nest);
}

}  // namespace kiln::core::lower
