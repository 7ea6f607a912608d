// Internal helpers shared by the per-operator lowerings (core/lower/ops_*.cpp). Not a public
// header: only core/lower includes it.
//
// Each lowering receives an OpContext (the operator, its attributes, input/output types and the
// PrimFunc's parameter buffers) and returns the function body. lower.cpp builds the context from
// a graph node, simplifies the body and fills in the PrimFunc.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/lower/lower.h"
#include "core/tir/stmt.h"

namespace kiln::core::tir {
class Schedule;
class Trace;
}

namespace kiln::core::lower {

/// Outputs with at least this many elements get a Parallel outermost loop.
inline constexpr int64_t kParallelMinElements = 4096;
/// Leading loops are fused until the fused (parallel) loop has at least this many iterations.
inline constexpr int64_t kParallelMinExtent = 16;

struct OpContext {
  std::string op;
  Attrs attrs;
  std::vector<TensorType> inTypes, outTypes;
  std::vector<tir::Buffer> in, out;  // parameter buffers, in the PrimFunc's order
  std::string where;                 // " (%y at model.py:3)", for diagnostics
  LowerOptions options;              // the target's vector width and caches (schedule knobs)
  /// Set by lowerings that pick schedule knobs ("mi=14,oc_vecs=2,po=1"); lower.cpp records it
  /// as PrimFunc::attrs["schedule"].
  mutable std::string schedule;
  /// Set by lowerings with tunable knobs: the kernel's tuning key (schedule_config.h); lower.cpp
  /// records it as PrimFunc::attrs["tune_key"].
  mutable std::string tuneKey;
  /// Set by lowerings scheduled with primitives (gemm_search.h): the trace (tir/trace.h) that
  /// made the body from the plain nest; lower.cpp records it as PrimFunc::attrs["trace"].
  mutable std::string trace;

  /// Set by the fused lowering (a reduction root, an anchor, or an op lowered as a group of one):
  /// the group's workload key, from which a row nest (nest_search.h) or a pool's window nest
  /// (conv_search.h) makes its tuning key.
  std::string nestWorkload;

  /// The tuned knobs for `key` from options.schedules, or nullptr.
  const std::map<std::string, int64_t>* tunedKnobs(const std::string& key) const;

  /// Fused epilogue (set by fused-function lowering, core/lower/fused.cpp; empty when the op is
  /// lowered alone). Anchor lowerings (conv2d, dense, matmul, pooling, ...) apply it to every
  /// computed output value right before the final store: `value` is the anchor's result (scalar
  /// or vector), `index` its output index, one Expr per axis of the anchor's output type (the
  /// innermost may be a Ramp when the store is vectorized). It returns the value to store; it may
  /// load other buffers (bias, residual) that the fused lowering appended to the parameters.
  std::function<tir::Expr(tir::Expr value, const std::vector<tir::Expr>& index)> epilogue;
  /// `epilogue(value, index)` when set, else `value`.
  tir::Expr applyEpilogue(tir::Expr value, const std::vector<tir::Expr>& index) const {
    return epilogue ? epilogue(std::move(value), index) : value;
  }
  /// The same epilogue given the output position as its flat row-major offset (a Ramp when the
  /// store is vectorized). Set beside `epilogue` only when every operand the epilogue reads has
  /// the output's element count and is read at that same offset (no broadcasting, transposes or
  /// per-channel parameters), as in conv + residual add + ReLU: a lowering that knows only its
  /// stores' offsets (epilogueAtStores) then needs no per-axis index rebuilt by division.
  std::function<tir::Expr(tir::Expr value, const tir::Expr& offset)> flatEpilogue;

  /// Fused prologue (set by fused-function lowering when a reduction is a group's root,
  /// core/lower/fused.cpp; empty when the op is lowered alone). Reduction lowerings (mean, sum)
  /// read their input through inputAt instead of loading in[0], which then is no parameter:
  /// the group's element ops producing the input are evaluated right there. `index` has one
  /// Expr per axis of the input type, `offset` is the same position as a flat row-major offset;
  /// when the read is vectorized, `offset` is a stride-1 Ramp and so is the innermost axis of
  /// `index` (the position runs along the last axis only).
  std::function<tir::Expr(const std::vector<tir::Expr>& index, const tir::Expr& offset)> prologue;
  /// The prologue reads every operand at the input's flat offset (no broadcasting or index
  /// remapping inside the group): `index` may then be left empty and vector reads may span axes.
  bool prologueFlat = true;
  /// Not flat, but every value the prologue evaluates is either of the input's shape (read at
  /// `offset`) or constant along the reduced axes: `index` then needs the kept axes only (the
  /// reduced ones may be anything), so vector reads may span the reduced axes too.
  bool prologueRowwise = false;
  /// The value of input 0 at (`index`, `offset`): prologue(index, offset) when set, else a load
  /// of in[0] at `offset` (a vector load when `offset` is a Ramp).
  tir::Expr inputAt(const std::vector<tir::Expr>& index, const tir::Expr& offset) const;

  /// Throws kiln::Error (Unsupported): "<op>: <what> is not supported (<where>)".
  [[noreturn]] void unsupported(const std::string& what) const;
  /// Unsupported unless every input and output has a floating-point dtype.
  void requireFloat() const;
};

using OpLowering = tir::Stmt (*)(const OpContext&);

// Per-operator lowerings (each returns the PrimFunc body before simplification).
tir::Stmt lowerUnary(const OpContext& ctx);          // ops_elementwise.cpp
tir::Stmt lowerBinary(const OpContext& ctx);         // ops_elementwise.cpp
tir::Stmt lowerBatchNorm(const OpContext& ctx);      // ops_elementwise.cpp
tir::Stmt lowerConv2d(const OpContext& ctx);         // ops_nn.cpp
tir::Stmt lowerDense(const OpContext& ctx);          // ops_gemm.cpp
tir::Stmt lowerDensePacked(const OpContext& ctx);    // ops_gemm.cpp
tir::Stmt lowerMatmul(const OpContext& ctx);         // ops_gemm.cpp
tir::Stmt lowerPool2d(const OpContext& ctx);         // ops_pool.cpp (max and avg)
tir::Stmt lowerAdaptiveAvgPool2d(const OpContext& ctx);  // ops_pool.cpp
tir::Stmt lowerCopy(const OpContext& ctx);           // ops_shape.cpp (copy, reshape)
tir::Stmt lowerTranspose(const OpContext& ctx);      // ops_shape.cpp
tir::Stmt lowerConcat(const OpContext& ctx);         // ops_shape.cpp
tir::Stmt lowerReduce(const OpContext& ctx);         // ops_reduce.cpp (mean, sum, max, min)
tir::Stmt lowerSoftmax(const OpContext& ctx);        // ops_reduce.cpp
tir::Stmt lowerConv2dNchwc(const OpContext& ctx);    // ops_conv_packed.cpp
tir::Stmt lowerLayoutTransform(const OpContext& ctx);  // ops_conv_packed.cpp
tir::Stmt lowerConv2dWinogradNchwc(const OpContext& ctx);  // ops_conv_winograd.cpp

// ---- per-element expressions (ops_elementwise.cpp), shared with fused lowering (fused.cpp) ---

/// Throw Unsupported when the unary/binary op `ctx.op` cannot run on its dtypes.
void checkUnary(const OpContext& ctx);
void checkBinary(const OpContext& ctx);
void checkComparison(const OpContext& ctx);  // ops_indexing.cpp
/// Unary op `ctx.op` (with ctx.attrs) applied to `x`, a scalar or vector value.
tir::Expr unaryExpr(const OpContext& ctx, const tir::Expr& x);
/// Binary op `op` on two values of equal type.
tir::Expr binaryExpr(const std::string& op, const tir::Expr& a, const tir::Expr& b);
/// Inference batch norm: gamma / sqrt(var + epsilon), and (x - mean) * scale + beta.
tir::Expr batchNormScale(const tir::Expr& gamma, const tir::Expr& var, double epsilon);
tir::Expr batchNormExpr(const tir::Expr& x, const tir::Expr& gamma, const tir::Expr& beta, const tir::Expr& mean,
                        const tir::Expr& var, double epsilon);
/// equal, not_equal, less, less_equal, greater or greater_equal.
bool isComparison(std::string_view op);
// Bool values are stored one byte per element (u8 0 or 1, ops_indexing.cpp).
/// A stored bool as a condition (byte != 0), and a condition as the stored bool.
tir::Expr boolCondition(const tir::Expr& stored);
tir::Expr storedBool(const tir::Expr& cond);
/// Comparison `op` of a and b (same type), as a stored bool.
tir::Expr compareExpr(const std::string& op, const tir::Expr& a, const tir::Expr& b);
/// `x` converted to dtype `to` by C rules (to bool: non-zero; a bool converts as its byte, 0 or 1).
tir::Expr castExpr(DType to, const tir::Expr& x);
/// take's row for index `raw` into an axis of `extent` rows: a negative index counts from the
/// end, and the result is clamped into the axis so a bad index cannot read outside the buffer.
tir::Expr takeIndex(tir::Expr raw, int64_t extent);
// The quantized element ops' expressions (ops_quant.cpp), for fused groups and their lowerings.
/// qnn.quantize of f32 `x`: u8(clamp(roundeven(x · (1 / output_scale)) + output_zero_point)).
tir::Expr qnnQuantizeExpr(const Attrs& attrs, const tir::Expr& x);
/// qnn.quantize to packed NCHW<block>c at output `index` (n, cb, h, w, c) of an NCHW input of
/// shape `xs`, read by `inputAt` at an NCHW index; channels past C are the zero point (real 0).
tir::Expr qnnQuantizePacked(const Attrs& attrs, const Shape& xs, int64_t block,
                            const std::vector<tir::Expr>& index,
                            const std::function<tir::Expr(const std::vector<tir::Expr>&)>& inputAt);
/// qnn.dequantize of u8 `x`: (x − zero_point) · scale.
tir::Expr qnnDequantizeExpr(const Attrs& attrs, const tir::Expr& x);
/// qnn.add of u8 `a` and `b`, requantized (with its fused relu's lower bound).
tir::Expr qnnAddExpr(const Attrs& attrs, const tir::Expr& a, const tir::Expr& b);
/// Strides (in elements, 0 along broadcast axes) to read an operand of shape `in` at the index
/// of a numpy-broadcast output of shape `out`.
std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out);

// ---- lowering table and naming (lower.cpp) ---------------------------------------------------

/// The lowering of `op`, or nullptr.
OpLowering findLowering(const std::string& op);
/// A C identifier derived from a graph value name (parameter buffer names).
std::string sanitizeName(const std::string& name);

// ---- fused groups (fused.cpp) -----------------------------------------------------------------

/// OpContext of node `n` of `graph` without buffers (types, attributes, diagnostics).
OpContext nodeContext(const Graph& graph, NodeId n);

// ---- loop-building helpers (lower_util.cpp) --------------------------------------------------

/// Row-major strides of `shape` in elements.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape);

/// How LoopNest picks its parallel loop.
enum class ParallelPolicy {
  /// The nest's last axis is the contiguous innermost loop: fuse only the leading axes; when they
  /// hold too little work, run them serially and make the innermost loop parallel instead.
  KeepInnermost,
  /// The nest covers outer axes only (its body holds more loops): fuse from the first axis on.
  FuseAll,
};

/// A rectangular loop nest over `extents` (outermost first). When `parallel`, leading loops are
/// fused into one Parallel loop until its extent reaches kParallelMinExtent (indices of fused
/// axes are recovered with / and %; extent-1 axes are skipped). Extent-1 loops disappear in
/// simplification. Every loop binds its own fresh Var.
class LoopNest {
 public:
  LoopNest(std::vector<int64_t> extents, std::vector<std::string> names, bool parallel,
           ParallelPolicy policy = ParallelPolicy::KeepInnermost);

  size_t rank() const { return m_extents.size(); }
  const tir::Expr& operator[](size_t d) const { return m_index.at(d); }
  /// Σ index[d]·strides[d]; uses the fused variable directly where the strides allow it, so a
  /// contiguous buffer is addressed without divisions.
  tir::Expr offset(const std::vector<int64_t>& strides) const;
  /// The loops around `body`. `locals` are allocated once per iteration of the parallel loop
  /// (private to a worker), or once around the whole nest when there is none.
  tir::Stmt wrap(tir::Stmt body, const std::vector<tir::Buffer>& locals = {}) const;

 private:
  std::vector<int64_t> m_extents;
  std::vector<tir::Expr> m_vars;   // one per axis (unused for fused axes)
  std::vector<tir::Expr> m_index;  // the index expression of each axis
  size_t m_fuseEnd = 0;            // axes [0, m_fuseEnd) are covered by the fused loop
  std::vector<size_t> m_chain;     // the non-unit axes among them
  tir::Expr m_fused;               // the fused loop's variable when m_fuseEnd > 0
  bool m_innermostParallel = false;  // the last axis alone is the parallel loop
};

/// Outputs with fewer elements still get a parallel loop when their total work (elements ×
/// work per element, e.g. the reduction length) reaches this: a 1×1000 dense layer over 2048
/// inputs is worth spreading over threads.
inline constexpr int64_t kParallelMinWork = int64_t{1} << 18;

/// True when an output of `numel` elements, each costing `workPerElement` inner iterations, is
/// worth a parallel loop.
inline bool wantParallel(int64_t numel, int64_t workPerElement = 1) {
  return numel >= kParallelMinElements || (numel >= 2 && numel * workPerElement >= kParallelMinWork);
}

/// A one-element local buffer (an accumulator).
tir::Buffer makeLocal(const std::string& name, tir::Type type);
/// buffer[0]
tir::Expr loadLocal(const tir::Buffer& local);
tir::Stmt storeLocal(const tir::Buffer& local, tir::Expr value);

/// A serial loop `for (var, min, extent) body`.
tir::Stmt serialFor(const tir::Expr& var, int64_t min, int64_t extent, tir::Stmt body);

/// A literal of the (scalar) buffer element type `t`.
tir::Expr literal(tir::Type t, double value);

/// `count` as a literal of float type `t` (divisors of mean/avg).
inline tir::Expr countLiteral(tir::Type t, int64_t count) { return literal(t, static_cast<double>(count)); }

/// Renames loop/let variables and local buffers whose names equal a parameter's name (e.g. a
/// loop `m` in a function whose output value is `%m`), so the printed IR is unambiguous.
tir::Stmt renameClashes(const tir::Stmt& body, const std::vector<tir::Buffer>& params);

/// Normalizes a possibly negative axis against `rank`.
int64_t normalizeAxis(int64_t axis, int64_t rank);

/// What a reduction over attrs "axes" of input 0 walks: the kept shape (reduced axes set to 1),
/// one loop variable per reduced axis, the input offset they add, and how many elements each
/// output combines.
struct ReductionAxes {
  std::set<int64_t> axes;            // normalized, ascending
  Shape inputShape, keptShape;
  std::vector<int64_t> inputStrides;  // contiguous strides of input 0
  std::vector<tir::Expr> vars;        // one per reduced axis, in axis order
  tir::Expr offset;                   // Σ var · stride over the reduced axes
  int64_t count = 1;
  /// `body` inside serial loops over the reduced axes (the last axis innermost).
  tir::Stmt wrap(tir::Stmt body) const;
};
ReductionAxes reductionAxes(const OpContext& ctx);

/// Unflattens row m of a [d0, ..., dr-1, N] output into index expressions.
std::vector<tir::Expr> rowIndex(const tir::Expr& m, const Shape& leading);

/// The function a sketch schedules: `body`, a plain nest over the input x, the packed weight w,
/// the bias b (left out when null) and the output y, as parameters in that order.
tir::PrimFunc plainFunc(std::string name, const tir::Buffer& x, const tir::Buffer& w, const tir::Buffer& b,
                        const tir::Buffer& y, tir::Stmt body);

/// The kernel of `ctx.tuneKey` scheduled by primitives when options.schedules selects it: the
/// record's trace replayed on `plain` (the op's plain nest over the kernel's buffers), or a sketch
/// annotation (knobs with "mi") applied by `sketch`. A record whose annotation `fits` refuses
/// (made for another form of the kernel) selects neither. An undefined Stmt when no
/// configuration selects one, so the caller's default takes over. A trace that does not
/// replay, or fitting knobs a primitive refuses, throw one line naming the key; a trace `stale`
/// says was recorded on an older plain nest is rebuilt from its record's annotation instead.
/// Sets ctx.schedule and ctx.trace.
tir::Stmt tunedBySketch(
    const OpContext& ctx, tir::PrimFunc plain,
    const std::function<bool(const std::map<std::string, int64_t>&)>& fits,
    const std::function<void(tir::Schedule&, const std::map<std::string, int64_t>&)>& sketch,
    const std::function<bool(const tir::Trace&)>& stale = {});
/// `plain` scheduled by `sketch` with the default annotation `knobs` (an untuned kernel whose
/// default is its sketch); sets ctx.schedule and ctx.trace.
tir::Stmt defaultSketch(const OpContext& ctx, tir::PrimFunc plain, const std::map<std::string, int64_t>& knobs,
                        const std::function<void(tir::Schedule&, const std::map<std::string, int64_t>&)>& sketch);

/// A kernel by its sketch (a convolution, dense): a record's trace or annotation (tunedBySketch),
/// else the annotation `retired` reads from `tuned`, a record of a retired hand-written builder's
/// knobs (no mi; nullopt when it has none), else the default annotation `defaults`. Sets
/// ctx.schedule and ctx.trace.
tir::Stmt kernelBySketch(
    const OpContext& ctx, tir::PrimFunc plain, const std::map<std::string, int64_t>* tuned,
    const std::function<bool(const std::map<std::string, int64_t>&)>& fits,
    const std::function<void(tir::Schedule&, const std::map<std::string, int64_t>&)>& sketch,
    const std::function<std::optional<std::map<std::string, int64_t>>(const std::map<std::string, int64_t>&)>&
        retired,
    const std::map<std::string, int64_t>& defaults);

/// `nest` with the fused epilogue applied at every store of the output, for a nest that never
/// reads the output back (else `nest` unchanged, and the fused lowering applies the epilogue in a
/// pass of its own). The output is [leading..., n] row-major; vector stores stay within a row.
tir::Stmt epilogueAtStores(const OpContext& ctx, const tir::Stmt& nest, const Shape& leading, int64_t n);
/// `nest` with every load and store index (a ramp's base) a sum of loop variables times constants
/// plus a constant (the products of split loops distributed): an unrolled tile's offsets then fold
/// into its addresses instead of LLVM hoisting a partial sum per tile element out of the loops
/// around it (register spills in the int8 convolution).
tir::Stmt distributedIndices(const tir::Stmt& nest);
/// `nest` with every store to `from`, a buffer it never reads (checked), made a store to `to` of
/// `valueAt(value, index)`, index the element's axes in [leading..., n] as epilogueAtStores
/// gives them: a kernel scheduled on a plain nest of wider sums (a quantized dense's i32) that
/// its output stores converted.
tir::Stmt storesInto(
    const tir::Stmt& nest, const tir::Buffer& from, const tir::Buffer& to, const Shape& leading, int64_t n,
    const std::function<tir::Expr(tir::Expr value, const std::vector<tir::Expr>& index)>& valueAt);

}  // namespace kiln::core::lower
