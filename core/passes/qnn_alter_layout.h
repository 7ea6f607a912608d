// qnn-alter-layout (O3): the quantized counterpart of alter-layout (alter_layout.h). Rewrites
// qnn.conv2d (groups 1 or depthwise, constant weights) to qnn.conv2d_nchwc on u8 activations in
// the packed NCHW[x]c layout, with weights packed at compile time for the int8 kernel
// (core/lower/ops_quant.cpp): [O/y, Cp/4, KH, KW, y, 4] so that four input channels of one output
// channel are one 32-bit word (the operand order of vpdpbusd / vpmaddubsw), depthwise
// [O/y, 1, KH, KW, y, 1]. The kernel sums x·w over the taps inside the image and subtracts the
// zero point's share there, zx·Σw[o] over those taps, before requantizing: a new i32 constant
// input [regions, O], one row per region of outputs whose windows reach the same taps (the
// interior, the border rows and columns; conv_search.h quantizedConvShares).
//
// A qnn.dense of constant weights and a non-zero input zero point gets the same share, zx·Σw[j],
// as a fifth input: its kernel then sums x·w as they are, four products per dot4 step.
//
// Which ops stay packed: qnn.conv2d as above; qnn.quantize feeding one (its out_layout packs
// and pads the channels to a multiple of 4 with the zero point, so RGB images need no
// transform); max_pool2d of a packed value; qnn.add of two packed values of one layout. Every other
// consumer reads plain NCHW through one `layout_transform` per value. Channel blocks depend only
// on the channel count (16, 8 or 4 lanes; `lanes` caps it), so producers and consumers agree.
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

struct QnnAlterLayoutOptions {
  int lanes = 16;  // the largest channel block (i32 lanes of a vector register)
};

/// Returns true when the graph changed. Counters: "convs" (convolutions packed), "packed-ops"
/// (pools, adds and quantizes kept packed), "transforms" (layout_transform nodes inserted),
/// "denses" (dense layers given their zero-point sum).
bool qnnAlterLayout(Graph& graph, const QnnAlterLayoutOptions& options = {}, PassCounters* counters = nullptr);

/// The channel block of a u8 tensor with `channels` channels: the largest of lanes, 8, 4 that
/// divides it, or 0 when none does.
int64_t qnnChannelBlock(int64_t channels, int lanes);

}  // namespace kiln::core::passes
