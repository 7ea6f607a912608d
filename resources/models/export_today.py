"""Writes models the way users of today's PyTorch save them, for Kiln's import tests.

Run with Kiln's Python environment (scripts/install-deps.sh: a current torch), not Debian's torch
1.13 that export_models.py uses. For each model it writes, into OUTDIR (build/models/today/):

  NAME.pt               torch.jit.trace(...).save() with the default settings: today's archive
                        layout (traced_inputs.pkl, no kiln.json, so importers need the shapes)
  NAME.onnx (+ .data)   torch.onnx.export(..., dynamo=True): the dynamo exporter, opset >= 18,
                        weights as external data beside the model
  NAME.in0.npy ...      the inputs, and NAME.out0.npy ... today's torch's own outputs (eval mode,
                        inference_mode) on them: the reference Kiln is checked against

and manifest.json listing them with their input names, shapes and dtypes, the torch version and
the ONNX opset. Random weights, fixed seed; BatchNorm statistics are set from random batches so
activations stay O(1) (ARCHITECTURE.md, "Sample models must be numerically alive").

Usage: python export_today.py OUTDIR
"""
import json
import os
import sys
import time

import warnings

import numpy
import torch
import torch.nn as nn
import torchvision

SEED = 20261126
warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit.trace is deprecated, and still what users run


class TwoInputNet(nn.Module):
    """A small custom network with two inputs and two outputs, written the way users write them."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=4), nn.BatchNorm2d(16), nn.GELU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16 + 8, 10)

    def forward(self, image, extra):
        x = self.stem(image)
        x = x + self.block(x)
        features = torch.flatten(self.pool(x), 1)
        logits = self.head(torch.cat([features, extra], dim=1))
        return logits, torch.softmax(logits, dim=1)


def _calibrate(model, inputs_of):
    """BatchNorm running statistics from a few random batches (cumulative average), then eval."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(*inputs_of(4))
    return model.eval()


MODELS = [
    # name, factory, input names, input shapes
    ("resnet18", lambda: torchvision.models.resnet18(weights=None), ["x"], [[1, 3, 224, 224]]),
    ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None), ["x"], [[1, 3, 224, 224]]),
    ("two_input_net", TwoInputNet, ["image", "extra"], [[2, 3, 32, 32], [2, 8]]),
]


def export(name, factory, names, shapes, outdir):
    t0 = time.time()
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    model = _calibrate(factory(), lambda n: [torch.randn(n, *s[1:], generator=gen) for s in shapes])
    inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
    with torch.inference_mode():
        outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    pt = os.path.join(outdir, name + ".pt")
    torch.jit.trace(model, inputs).save(pt)
    onnx_path = os.path.join(outdir, name + ".onnx")
    program = torch.onnx.export(model, inputs, input_names=names, dynamo=True, verbose=False)
    program.save(onnx_path, external_data=True)
    import onnx
    opset = next(o.version for o in onnx.load(onnx_path, load_external_data=False).opset_import if o.domain in ("", "ai.onnx"))

    files = {"inputs": [], "outputs": []}
    for kind, tensors in (("in", inputs), ("out", outputs)):
        for i, t in enumerate(tensors):
            path = f"{name}.{kind}{i}.npy"
            numpy.save(os.path.join(outdir, path), t.detach().numpy())
            files["inputs" if kind == "in" else "outputs"].append(path)
    print(f"  today {name:16s} .pt and .onnx (opset {opset})  ({time.time() - t0:.1f}s)", flush=True)
    return {"name": name, "pt": name + ".pt", "onnx": name + ".onnx", "opset": opset,
            "input_specs": [{"name": n, "shape": s, "dtype": "f32"} for n, s in zip(names, shapes)], **files}


def main(argv):
    if len(argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(2)
    entries = [export(*m, outdir) for m in MODELS]
    manifest = {"torch_version": torch.__version__, "models": entries}
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(f"wrote {outdir}/manifest.json: {len(entries)} models from torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
