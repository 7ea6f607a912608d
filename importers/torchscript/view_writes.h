// Private to importers/torchscript: in-place writes through views, made functional at import.
//
// `mask = x.new_zeros(h, w); mask[0:4, 2:] = 1` (Swin's attention mask) and
// `b = bias.clone(); b[n:2 * n].zero_()` (Swin v2's qkv bias) write into a tensor through a chain
// of aten::slice / aten::select views. The walker hands such a write here before mapping it:
// - the view's region in the viewed ("base") tensor follows from the chain's constant arguments;
// - when the base, the chain's arguments and the write's other arguments are all import-time
//   constants, libtorch performs the write on a copy of the base, which becomes the base's new
//   constant value (the mask above folds away entirely);
// - otherwise the write's functional value (its operator handler) is put back into the base as
//   where(region mask, pad(value), base) and the base is rebound to that graph value.
// Later reads of the base then see the write. Refused with one line: a write into a model input,
// a view whose bounds are computed by the model, a strided slice (graph case), and any other
// value sharing the base's storage (a view taken before the write, what the base is a view of,
// a list holding it; followed through the operators' schemas) read after it: it would be stale.
#pragma once

#include <functional>

#include "importers/torchscript/context.h"

namespace kiln::importers::ts {

/// Imports `node` when it is an in-place write (its schema's first argument is written) into a
/// slice/select view; false (nothing done) for any other node. `mapWrite` runs the node's
/// operator handler, binding its output to the written view's new value.
bool importViewWrite(ImportContext& ctx, const jit::Node* node, const std::function<void()>& mapWrite);

}  // namespace kiln::importers::ts
