// Padding: F.pad in every mode (aten::pad, and the kernels older traces and scripted code name
// directly: constant_pad_nd, reflection_pad1d/2d/3d, replication_pad1d/2d/3d, _pad_circular,
// _pad_enum) onto Kiln's one `pad` operator (core/ir/op_registry.h).
//
// PyTorch lists pads from the last axis backwards, [before, after] per axis, for as many trailing
// axes as the list covers; Kiln's `pads` has a before and an after entry for every axis (ONNX's
// order). Negative pads crop. PyTorch's own limits are checked here so a model PyTorch could not
// run either fails with one line at import: a reflect pad must be smaller than its axis.
#include <ATen/ATen.h>

#include "importers/torchscript/aten_helpers.h"
#include "importers/torchscript/context.h"

namespace kiln::importers::ts {
namespace {

/// PyTorch's at::padding_mode numbering, used by aten::_pad_enum.
std::string modeOfEnum(N n, int64_t mode) {
  switch (mode) {
    case 0: return "constant";
    case 1: return "reflect";
    case 2: return "replicate";
    case 3: return "circular";
    default: break;
  }
  Ctx::fail(n, "padding mode " + std::to_string(mode) + " is not one of constant, reflect, replicate, circular");
}

/// aten::pad(self, pad, mode="constant", value=None)
void pad(Ctx& c, N n) {
  std::string mode = n->inputs().size() > 2 ? c.toString(n, 2) : "constant";
  double value = n->inputs().size() > 3 && !c.isNone(n, 3) ? c.toDouble(n, 3) : 0.0;
  c.setOutput(n, emitTorchPad(c, n, c.tensor(n, 0), c.toInts(n, 1), mode, value));
}

/// aten::_pad_enum(self, pad, mode: int, value=None)
void padEnum(Ctx& c, N n) {
  double value = n->inputs().size() > 3 && !c.isNone(n, 3) ? c.toDouble(n, 3) : 0.0;
  c.setOutput(n, emitTorchPad(c, n, c.tensor(n, 0), c.toInts(n, 1), modeOfEnum(n, c.toInt(n, 2)), value));
}

/// aten::constant_pad_nd(self, pad, value=0)
void constantPadNd(Ctx& c, N n) {
  double value = n->inputs().size() > 2 ? c.toDouble(n, 2) : 0.0;
  c.setOutput(n, emitTorchPad(c, n, c.tensor(n, 0), c.toInts(n, 1), "constant", value));
}

/// reflection_padNd / replication_padNd(self, padding: 2·N values): the last N axes.
auto fixedPad(const std::string& mode, size_t axes) {
  return [mode, axes](Ctx& c, N n) {
    std::vector<int64_t> pads = c.toInts(n, 1);
    if (pads.size() != 2 * axes)
      Ctx::fail(n, "expects " + std::to_string(2 * axes) + " padding values, got " + std::to_string(pads.size()),
                ErrorKind::InvalidModel);
    ValueId x = c.tensor(n, 0);
    int64_t rank = c.type(x).rank();
    if (rank != static_cast<int64_t>(axes) + 1 && rank != static_cast<int64_t>(axes) + 2)
      Ctx::fail(n, "expects a " + std::to_string(axes + 1) + "-D or " + std::to_string(axes + 2) + "-D input, got " +
                       c.type(x).str(), ErrorKind::InvalidModel);
    c.setOutput(n, emitTorchPad(c, n, x, pads, mode, 0.0));
  };
}

}  // namespace

ValueId emitTorchPad(Ctx& c, N n, ValueId x, const std::vector<int64_t>& pad, const std::string& mode, double value,
                     const std::string& stem) {
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    Ctx::fail(n, "padding mode '" + mode + "' is not supported (constant, reflect, replicate, circular)");
  const core::TensorType xt = c.type(x);
  int64_t rank = xt.rank();
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size() / 2) > rank)
    Ctx::fail(n, std::to_string(pad.size()) + " padding values do not pad whole axes of " + xt.str() +
                     " (two per axis, at most " + std::to_string(2 * rank) + ")",
              ErrorKind::InvalidModel);
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t axis = rank - 1 - static_cast<int64_t>(k);
    int64_t before = pad[2 * k], after = pad[2 * k + 1], size = xt.shape[axis];
    if (mode == "reflect" && (before >= size || after >= size))
      Ctx::fail(n, "reflect padding (" + std::to_string(before) + ", " + std::to_string(after) + ") of dimension " +
                       std::to_string(axis) + " must be less than its size " + std::to_string(size) + " in " + xt.str(),
                ErrorKind::InvalidModel);
    if (mode == "circular" && (before > size || after > size))
      Ctx::fail(n, "circular padding (" + std::to_string(before) + ", " + std::to_string(after) + ") of dimension " +
                       std::to_string(axis) + " wraps around more than once in " + xt.str(),
                ErrorKind::InvalidModel);
    pads[axis] = before;
    pads[rank + axis] = after;
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return x;
  Attrs attrs{{"pads", pads}, {"mode", mode}};
  if (mode == "constant") attrs.set("value", value);
  return c.emit(n, "pad", {x}, attrs, stem);
}

void registerPaddingOps(Table& t) {
  reg(t, "pad", pad);
  reg(t, "_pad_enum", padEnum);
  reg(t, "constant_pad_nd", constantPadNd);
  reg(t, "_pad_circular", [](Ctx& c, N n) {
    c.setOutput(n, emitTorchPad(c, n, c.tensor(n, 0), c.toInts(n, 1), "circular", 0.0));
  });
  for (size_t axes : {1, 2, 3}) {
    std::string suffix = std::to_string(axes) + "d";
    reg(t, "reflection_pad" + suffix, fixedPad("reflect", axes));
    reg(t, "replication_pad" + suffix, fixedPad("replicate", axes));
  }
}

}  // namespace kiln::importers::ts
