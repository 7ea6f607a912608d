// Lowering of conv2d in plain NCHW (opt levels O0–O2, and convolutions alter-layout leaves
// alone): conv_search.h's regioned nest over the unpacked buffers ("NCHW"), scheduled by its
// sketch: a register tile of V output channels × mi vectors of output columns, accumulated over
// the group's input channels and the taps that each region of the output (interior, border rows
// and columns) reads inside the image, so no tap reads padding. The annotation comes from a
// tuning record of the kernel's key ("conv2d:n=...,g=1:f32"): its trace or its annotation; else
// (untuned, f64, or a record that does not fit) the default, the register tile of the hand-written
// builder this nest replaced. A fused epilogue is applied where the tile is written back.
#include <optional>

#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

Stmt lowerConv2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  const int64_t groups = ctx.attrs.getInt("groups", 1);
  const std::vector<int64_t> stride = ctx.attrs.getPair("stride", 1),
                             padding = ctx.attrs.getPair("padding", 0),
                             dilation = ctx.attrs.getPair("dilation", 1);
  const bool bias = ctx.in.size() == 3;
  // f64 gets half the lanes per register.
  const Type elem = ctx.out[0]->elemType;
  const int lanes = elem.bits == 64 ? std::max(1, ctx.options.vectorLanes / 2) : ctx.options.vectorLanes;
  const int registers = ctx.options.vectorRegisters;
  auto shapeFor = [&](int64_t vectors) {
    return planarConvSketchShape(xs, ws, ys, stride, padding, dilation, groups, bias, vectors, lanes);
  };
  std::optional<ConvSketchShape> shape = shapeFor(1);
  if (!shape) ctx.unsupported("convolution whose buffers disagree with its attributes");
  const Knobs defaults = convSketchDefaultKnobs(*shape, registers);

  // Only f32 kernels have a key: the tuner builds f32 tasks.
  if (elem == Type::f32()) ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tuneKey.empty() ? nullptr : ctx.tunedKnobs(ctx.tuneKey);
  const ConvSketchShape s = planarShapeOfRecord(shapeFor, tuned, defaults, registers);
  const Buffer b = bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("conv2d", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             convSketchPlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), tuned, [&](const Knobs& k) { return convSketchAnnotationFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyConvSketch(sched, s, k, registers); },
      [](const Knobs&) { return std::optional<Knobs>(); }, defaults);
  return ctx.epilogue ? epilogueAtStores(ctx, nest, Shape(ys.begin(), ys.end() - 1), ys.back()) : nest;
}

}  // namespace kiln::core::lower
