// Loop-IR kernels that measure the machine rather than compute a model: the FMA peak (used by
// the roofline's ceilings, profiler/ceilings.h, and by bench_kernels' fma_peak rows) and the
// STREAM-style triad for memory bandwidth. Both run one parallel task per thread.
#pragma once

#include <cstdint>

#include "core/tir/stmt.h"

namespace kiln::core::lower {

/// `chains` independent accumulators of `lanes` f32 lanes, acc = acc·a + b `iters` times in
/// registers, one parallel task per thread (`tasks` of them); each task stores the sum of its
/// accumulators into out[t·lanes .. t·lanes + lanes) so nothing is dead code.
/// FLOPs per call: 2 · lanes · chains · iters · tasks. Parameter: out (tasks · lanes floats).
tir::PrimFunc fmaPeakKernel(int lanes, int chains, int64_t iters, int tasks);

/// The triad a = b + s·c over one buffer holding, per task, three arrays of `m` floats (a, b, c),
/// `passes` times with s changing per pass (so no pass is redundant). One buffer, so that code
/// generation cannot treat the arrays as unrelated and drop the earlier passes.
/// Bytes per call, as STREAM counts them: 12 · m · passes · tasks. Parameter: mem (tasks · 3m floats).
tir::PrimFunc triadKernel(int lanes, int64_t m, int64_t passes, int tasks);

}  // namespace kiln::core::lower
