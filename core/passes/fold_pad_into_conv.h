// fold-pad-into-conv (O2): a zero constant pad of the spatial axes that feeds a convolution becomes
// the convolution's own padding, so the padded copy of the input is never written:
//
//   y = conv2d(pad(x){mode="constant", value=0, pads: (ph, pw) on both sides of H and W}){padding=p}
//     ==>  y = conv2d(x){padding = p + (ph, pw)}
//
// Only what conv2d's symmetric padding can express folds: a rank-4 input, no padding of the batch
// and channel axes, equal non-negative pads before and after each spatial axis (an asymmetric
// pad, such as padding="same" with an even kernel, stays a pad node). The pad disappears when
// every use of it was folded and it is not a graph output; otherwise it stays for its other
// users. Results are bit-identical: the convolution reads the same zeros.
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when a pad was folded. Counters: "convolutions" (rewritten), "pads-removed".
bool foldPadIntoConv(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
