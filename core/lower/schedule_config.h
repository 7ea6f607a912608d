// Schedule configurations: the knob values the autotuner (core/tune) found for a workload, and
// the tuning keys that name workloads independently of how a build lays them out.
//
// A tuning key describes the computation a tunable kernel performs, not the graph it came
// from: "conv2d_nchwc:n=1,c=64,h=56,w=56,o=64,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32".
// Kernels with equal keys take the same knobs whatever their fused epilogue, their weight
// packing or the model they belong to, so records from one model apply to every other model
// with the same layer shapes. The key is also complete: core/tune rebuilds a standalone task
// from it.
//
// Knobs of a packed convolution (conv2d_nchwc, or conv2d_winograd_nchwc after alter-layout), the
// annotation of its sketch (core/lower/conv_search.h; with algo 2 or 4 core/lower/winograd_search.h,
// whose mi counts output tiles of its batched GEMM):
//   algo      only for Winograd-eligible convolutions (3×3, stride 1, dilation 1, groups 1):
//             0 direct, 2 Winograd F(2×2, 3×3), 4 Winograd F(4×4, 3×3) — the output tile size.
//             It decides the weight transform, so alter-layout reads it (schedule.h)
//   oc_vecs   output-channel vectors per register tile (fixes the weight packing, so the
//             alter-layout pass reads it as well as the lowering)
//   mi        pixels (or Winograd tiles) per register tile
//   po        1: weight groups outermost (their weights stay in cache); 0: pixel tiles outermost
//   par_chunks  chunks per thread of the parallel loops (runtime launch granularity; left out at
//             the runtime's default)
// Its record stores the trace beside them. A record of the retired hand-written builders' knobs
// (ow_block, oc_outer, flatten, unroll, vec_lanes, par_chunks; no mi) is read as the annotation
// it stands for: ow_block as mi, oc_outer as po (conv_search.h convAnnotationOf,
// winograd_search.h winogradAnnotationOf).
// Knobs of a plain NCHW convolution ("conv2d:n=1,c=64,...:f32", conv_search.h "NCHW"): mi, the
// vectors of output columns per register tile, and oc_vecs, its output channels (which fix the
// plain nest's weight groups); par_chunks as above.
// Knobs of dense ("dense:m=1,k=768,n=768:f32"): mi, nc, par annotate its sketch (gemm_search.h),
// which is also its default, with the trace stored beside them; a record of the former
// hand-written tile's rows/cols is read as mi/nc.
// Knobs of matmul ("matmul:ra=3,a0=12,a1=128,a2=64,rb=3,b0=12,b1=64,b2=128:f32", both operand
// shapes, a vector operand as the row or column it is lowered as): mi, nv, kt, par annotate the
// sketch of core/lower/gemm_search.h (also the untuned default; mi, par for one output column),
// whose trace a record stores beside its knobs; a record of the former hand-written lowering's
// rows/cols is read as mi/nv.
// Knobs of dense_packed ("dense_packed:m=128,k=256,n=1024,p=64,b=1:f32", p the panel width
// pack-dense chose): mi, nv, po annotate its sketch (gemm_search.h), which is also its default;
// a record of the former hand-written kernel's rows/cols builds that default.
// Knobs of an element nest ("nest:fused[transpose{perm=[0,2,1,3]}($0:f32[1,4,128,64])->f32[...];
// reshape{...}(%0)->f32[1,128,256]]", the fused group's workload key: its ops, attributes and
// types): vl, un, par annotate its sketch (nest_search.h), which is also its default. A row nest
// (a reduction or softmax, "reduce:fused[mean{axes=[-1],keepdims=1}($0:f32[1,128,256])->...]")
// has the same knobs on its own sketch (nest_search.h).
//
// Lowerings validate a configuration against the workload and the target and fall back to the
// heuristic when it does not fit, so a stale record can never produce a wrong kernel.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::core::lower {

/// Knob values by name.
using Knobs = std::map<std::string, int64_t>;
/// "a=1,b=2" in name order; "" for no knobs.
std::string knobsText(const Knobs& knobs);
/// Parses knobsText's form; throws kiln::Error (InvalidInput) on malformed text.
Knobs parseKnobs(std::string_view text);
/// The value of `name`, or `fallback`.
int64_t knob(const Knobs& knobs, const std::string& name, int64_t fallback);

/// The chosen configuration per tuning key.
struct ScheduleConfigs {
  std::map<std::string, Knobs> byKey;
  /// Schedule traces (core/tir/trace.h text) by key, for kernels scheduled by primitives
  /// (matmul, core/lower/gemm_search.h): the lowering replays the trace on its plain nest.
  std::map<std::string, std::string> traces;
  const Knobs* find(const std::string& key) const;
  const std::string* findTrace(const std::string& key) const;
};

/// A convolution's geometry in logical NCHW terms.
struct ConvGeometry {
  int64_t n = 1, c = 1, h = 1, w = 1, o = 1, kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t outHeight() const;
  int64_t outWidth() const;
  double flops() const;  // multiply-adds × 2
};

/// The parts of a key: "conv2d_nchwc", the parameters, the dtype name. A key of an element or row
/// nest or a pool ("nest:", "reduce:" or "pool:" + the fused group's workload key,
/// core/lower/nest_search.h, conv_search.h) has no parameters: its workload is the whole rest of
/// the key, and its dtype f32 (only f32 nests have keys).
struct TuneKeyParts {
  std::string kind;
  Knobs params;
  std::string dtype;
  std::string workload;  // a nest's group workload ("fused[...]"); empty for other kinds
};
/// Splits a key; throws kiln::Error (InvalidInput) when it is not one.
TuneKeyParts parseTuneKey(std::string_view key);

std::string packedConvTuneKey(const ConvGeometry& g, DType dtype);
/// A plain NCHW conv2d's key (O0–O2, or a convolution alter-layout leaves alone): the same
/// parameters, "conv2d:n=1,c=64,...,g=1:f32".
std::string planarConvTuneKey(const ConvGeometry& g, DType dtype);
/// A qnn.conv2d_nchwc key: packedConvTuneKey's parameters and its blocks, the input's (ib) and the
/// output's (ob), "conv2d_nchwc:n=1,c=64,...,g=1,ib=16,ob=16:u8".
std::string quantizedConvTuneKey(const ConvGeometry& g, int64_t inBlock, int64_t outBlock);
/// The geometry a conv2d_nchwc key's parameters describe (the inverse of packedConvTuneKey).
ConvGeometry convGeometryOfKey(const Knobs& params);
/// The geometry of a conv2d (NCHW input, OIHW weight), conv2d_nchwc or qnn.conv2d_nchwc node's
/// types and attrs.
ConvGeometry convGeometry(const std::string& op, const Attrs& attrs, const std::vector<TensorType>& in);
std::string denseTuneKey(int64_t m, int64_t k, int64_t n, DType dtype);

/// The tuning key of a kernel anchored by `op` with these attributes and types: "" when its
/// schedule has no knobs to tune.
std::string tuneKeyOf(const std::string& op, const Attrs& attrs, const std::vector<TensorType>& in,
                      const std::vector<TensorType>& out);

}  // namespace kiln::core::lower
