// Lowerings of the packed-layout operators introduced by alter-layout (O3): conv2d_nchwc and
// layout_transform.
//
// conv2d_nchwc (groups 1 or depthwise): input x [N, C/ib, H, W, ib], weight pre-packed at compile
// time to w [O/ob, C/ib, KH, KW, ib, ob] with ob = V·L (V output vectors of L lanes), output
// y [N, O/L, OH, OW, L]. The kernel is conv_search.h's plain nest scheduled by its sketch: a
// register tile of mi pixels × V vectors accumulated over the input channels and taps, each
// region of the output (interior, border rows and columns) a nest of its own so that no tap reads
// padding. The sketch's annotation comes from a tuning record (its trace, its annotation, or the
// annotation a record of the retired hand-written builder's knobs stands for) or, untuned, is its
// default. A fused epilogue is applied where the tile is written back.
//
// layout_transform copies between NCHW and NCHW[x]c (or two blocks) element by element in the
// output's order.
#include <optional>

#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// The channel block of a layout attribute: "NCHW" → 0, "NCHW16c" → 16.
int64_t layoutBlockOf(const std::string& layout) {
  if (layout == "NCHW") return 0;
  return std::stoll(layout.substr(4, layout.size() - 5));
}

}  // namespace

Stmt lowerConv2dNchwc(const OpContext& ctx) {
  ctx.requireFloat();
  if (ctx.inTypes[0].dtype != DType::Float32) ctx.unsupported("dtype other than f32");
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  const int64_t groups = ctx.attrs.getInt("groups", 1);
  if (groups != 1 && (xs[4] != ys[4] || ws[5] != ys[4]))
    ctx.unsupported("depthwise convolution with input block " + std::to_string(xs[4]) + ", weight block " +
                    std::to_string(ws[5]) + " and output block " + std::to_string(ys[4]));
  std::optional<ConvSketchShape> shape =
      convSketchShape(xs, ws, ys, ctx.attrs.getPair("stride", 1), ctx.attrs.getPair("padding", 0),
                      ctx.attrs.getPair("dilation", 1), groups, ctx.in.size() == 3);
  if (!shape) ctx.unsupported("convolution whose packed buffers disagree with its attributes");
  const ConvSketchShape& s = *shape;

  // The sketch (conv_search.h) of a record for this key made for the same packing: its trace,
  // its annotation, or the annotation a record of the former hand-written builder's knobs stands
  // for; else (untuned, or a record that does not fit) the default annotation. A record for a
  // Winograd algorithm (alter-layout did not transform this weight) does not fit.
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
  const int registers = ctx.options.vectorRegisters;
  const Buffer b = s.bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("conv2d_nchwc", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             convSketchPlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), tuned, [&](const Knobs& k) { return convSketchAnnotationFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyConvSketch(sched, s, k, registers); },
      [&](const Knobs& k) {
        return knob(k, "algo", 0) == 0 ? convAnnotationOf(s, k, registers) : std::nullopt;
      },
      convSketchDefaultKnobs(s, registers));
  return ctx.epilogue ? epilogueAtStores(ctx, nest, Shape(ys.begin(), ys.end() - 1), ys.back()) : nest;
}

Stmt lowerLayoutTransform(const OpContext& ctx) {
  int64_t src = layoutBlockOf(ctx.attrs.getString("src")), dst = layoutBlockOf(ctx.attrs.getString("dst"));
  const Shape& ys = ctx.outTypes[0].shape;
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t channels = src ? xs[1] * src : xs[1];
  int64_t h = xs[2], w = xs[3];
  LoopNest nest(ys, dst ? std::vector<std::string>{"n", "cb", "h", "w", "ci"} : std::vector<std::string>{"n", "c", "h", "w"},
                wantParallel(ctx.outTypes[0].numel()));
  Expr c = dst ? nest[1] * dst + nest[4] : nest[1];
  Expr spatial = nest[2] * w + nest[3];
  Expr xIndex = src ? (((nest[0] * (channels / src) + c / src) * h * w + spatial) * src + c % src)
                    : ((nest[0] * channels + c) * h * w + spatial);
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), Load::make(ctx.in[0], xIndex)));
}

}  // namespace kiln::core::lower
