"""Writes models the way users of today's PyTorch save them, for Kiln's import tests.

Run with Kiln's Python environment (scripts/install-deps.sh: a current torch), not Debian's torch
1.13 that export_models.py uses. For each model it writes, into OUTDIR (build/models/today/):

  NAME.pt               torch.jit.trace(...).save() with the default settings: today's archive
                        layout (traced_inputs.pkl, no kiln.json, so importers need the shapes)
  NAME.onnx (+ .data)   torch.onnx.export(..., dynamo=True): the dynamo exporter, opset >= 18,
                        weights as external data beside the model
  NAME.pt2              torch.export.save(torch.export.export(model, inputs)): the ExportedProgram
                        archive (static shapes)
  NAME.in0.npy ...      the inputs, and NAME.out0.npy ... today's torch's own outputs (eval mode,
                        inference_mode) on them: the reference Kiln is checked against

and manifest.json listing them with their input names, shapes and dtypes, the torch version and
the ONNX opset. Beside them, torch.export programs only ("programs" in the manifest, each with its
inputs and torch's outputs): a small transformer encoder (tiny_encoder.pt2) and two_input_net
exported with a dynamic batch (two_input_net_dynamic.pt2, Dim("batch") on dimension 0 of both
inputs, example batch 2) with inputs and outputs at batch 1 and 3; attention under a boolean mask
that hides every key from one query and under an additive causal mask (masked_attention.pt2, and
masked_attention_decomposed.pt2 after run_decompositions: bmm, and the safe softmax as _softmax,
any and where); and damaged copies of
two_input_net.pt2 for the error tests ("bad_programs": archive_version "1", schema version 99, a
weight record too short for its tensor), plus unmapped_op.pt2, a program with aten.cumsum, which
Kiln does not map. Random weights, fixed seed; BatchNorm statistics are set from random batches so
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


class TinyEncoder(nn.Module):
    """A two-layer transformer encoder on 8 tokens of 16 features, mean-pooled into 10 logits."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 32)
        layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


class MaskedAttention(nn.Module):
    """Self-attention on 8 tokens through F.scaled_dot_product_attention, twice: under a boolean
    padding mask in which the last query sees no key at all (PyTorch gives that row 0, not NaN),
    and under an additive float mask (-inf above the diagonal: causal)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 3 * 16)
        self.out = nn.Linear(16, 16)
        keep = torch.ones(8, 8, dtype=torch.bool)
        keep[:, 6:] = False  # the last two keys are padding
        keep[7, :] = False   # the last query is masked out entirely
        self.register_buffer("keep", keep)
        self.register_buffer("causal", torch.triu(torch.full((8, 8), float("-inf")), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.proj(x).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)  # each [b, 2 heads, n, 8]
        padded = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.keep)
        causal = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.causal)
        return self.out((padded + causal).transpose(1, 2).reshape(b, n, 16))


class CumsumNet(nn.Module):
    """A convolution, then aten.cumsum (which Kiln does not map), then a ReLU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(torch.cumsum(self.conv(x), dim=3))


def _bert_encoder():
    """Kiln's BERT-style sample (export_models.py: embeddings, a padding mask from the ids, four
    post-norm layers, the pooler), here exported by today's torch."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from export_models import BertEncoder

    return BertEncoder()


MODELS = [
    # name, factory, input names, input shapes[, input dtypes (default f32; i64 inputs are token ids)]
    ("resnet18", lambda: torchvision.models.resnet18(weights=None), ["x"], [[1, 3, 224, 224]]),
    ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None), ["x"], [[1, 3, 224, 224]]),
    ("two_input_net", TwoInputNet, ["image", "extra"], [[2, 3, 32, 32], [2, 8]]),
    ("bert_encoder", _bert_encoder, ["input_ids"], [[1, 128]], ["i64"]),
]
BERT_VOCAB = 1000


def _random_input(shape, dtype, gen):
    """Normal floats, or token ids in [1, vocab) (0 is the padding id)."""
    if dtype == "i64":
        return torch.randint(1, BERT_VOCAB, shape, generator=gen)
    return torch.randn(*shape, generator=gen)


def export(name, factory, names, shapes, dtypes=None, outdir=None):
    t0 = time.time()
    dtypes = dtypes or ["f32"] * len(shapes)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    model = _calibrate(factory(), lambda n: [_random_input([n, *s[1:]], d, gen) for s, d in zip(shapes, dtypes)])
    inputs = tuple(_random_input(s, d, gen) for s, d in zip(shapes, dtypes))
    with torch.inference_mode():
        outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    pt = os.path.join(outdir, name + ".pt")
    torch.jit.trace(model, inputs).save(pt)
    targets = save_program(model, inputs, os.path.join(outdir, name + ".pt2"))
    onnx_path = os.path.join(outdir, name + ".onnx")
    program = torch.onnx.export(model, inputs, input_names=names, dynamo=True, verbose=False)
    program.save(onnx_path, external_data=True)
    import onnx
    opset = next(o.version for o in onnx.load(onnx_path, load_external_data=False).opset_import if o.domain in ("", "ai.onnx"))

    files = save_arrays(outdir, name, inputs, outputs)
    print(f"  today {name:16s} .pt, .onnx (opset {opset}) and .pt2 ({len(targets)} aten targets)"
          f"  ({time.time() - t0:.1f}s)", flush=True)
    return {"name": name, "pt": name + ".pt", "onnx": name + ".onnx", "pt2": name + ".pt2", "opset": opset,
            "input_specs": [{"name": n, "shape": s, "dtype": d} for n, s, d in zip(names, shapes, dtypes)], **files}


def save_arrays(outdir, stem, inputs, outputs):
    """NAME.in0.npy ... and NAME.out0.npy ...; their file names."""
    files = {"inputs": [], "outputs": []}
    for kind, tensors in (("in", inputs), ("out", outputs)):
        for i, t in enumerate(tensors):
            path = f"{stem}.{kind}{i}.npy"
            numpy.save(os.path.join(outdir, path), t.detach().numpy())
            files["inputs" if kind == "in" else "outputs"].append(path)
    return files


def save_program(model, inputs, path, dynamic_shapes=None):
    """torch.export.export → torch.export.save, as a user does; the aten targets of its graph."""
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    torch.export.save(program, path)
    return sorted({str(n.target) for n in program.graph.nodes if n.op == "call_function"})


def run(model, inputs):
    with torch.inference_mode():
        outputs = model(*inputs)
    return outputs if isinstance(outputs, tuple) else (outputs,)


def export_programs(outdir):
    """The torch.export-only programs: a transformer encoder, a dynamic batch, a program Kiln cannot
    map, and damaged archives."""
    entries = []
    t0 = time.time()
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 2)
    encoder = TinyEncoder().eval()
    x = torch.randn(2, 8, 16, generator=gen)
    targets = save_program(encoder, (x,), os.path.join(outdir, "tiny_encoder.pt2"))
    entries.append({"name": "tiny_encoder", "pt2": "tiny_encoder.pt2", "targets": targets,
                    "input_specs": [{"name": "x", "shape": [2, 8, 16], "dtype": "f32"}],
                    **save_arrays(outdir, "tiny_encoder", (x,), run(encoder, (x,)))})

    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 3)
    shapes = [[2, 3, 32, 32], [2, 8]]
    net = _calibrate(TwoInputNet(), lambda n: [torch.randn(n, *s[1:], generator=gen) for s in shapes])
    example = tuple(torch.randn(*s, generator=gen) for s in shapes)
    batch = torch.export.Dim("batch", max=64)
    targets = save_program(net, example, os.path.join(outdir, "two_input_net_dynamic.pt2"),
                           dynamic_shapes={"image": {0: batch}, "extra": {0: batch}})
    cases = []
    for b in (1, 3):
        inputs = tuple(torch.randn(b, *s[1:], generator=gen) for s in shapes)
        cases.append({"batch": b, **save_arrays(outdir, f"two_input_net_dynamic.b{b}", inputs, run(net, inputs))})
    entries.append({"name": "two_input_net_dynamic", "pt2": "two_input_net_dynamic.pt2", "targets": targets,
                    "input_specs": [{"name": n, "shape": s, "dtype": "f32"} for n, s in zip(["image", "extra"], shapes)],
                    "dynamic_batch": {"max": 64, "cases": cases}})

    # Attention under masks, as exported, and decomposed (run_decompositions: the attention becomes
    # bmm, and its safe softmax _softmax, any and where).
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 4)
    attention = MaskedAttention().eval()
    x = torch.randn(2, 8, 16, generator=gen)
    program = torch.export.export(attention, (x,))
    for name, prog in (("masked_attention", program), ("masked_attention_decomposed", program.run_decompositions())):
        torch.export.save(prog, os.path.join(outdir, name + ".pt2"))
        targets = sorted({str(n.target) for n in prog.graph.nodes if n.op == "call_function"})
        entries.append({"name": name, "pt2": name + ".pt2", "targets": targets,
                        "input_specs": [{"name": "x", "shape": [2, 8, 16], "dtype": "f32"}],
                        **save_arrays(outdir, name, (x,), run(attention, (x,)))})

    torch.manual_seed(SEED)
    save_program(CumsumNet().eval(), (torch.randn(1, 3, 8, 8),), os.path.join(outdir, "unmapped_op.pt2"))
    bad = damaged_copies(outdir, "two_input_net.pt2")
    print(f"  today programs: tiny_encoder.pt2, two_input_net_dynamic.pt2, masked_attention(_decomposed).pt2, "
          f"unmapped_op.pt2 and "
          f"{len(bad)} damaged archives  ({time.time() - t0:.1f}s)", flush=True)
    return entries, dict(bad, unmapped="unmapped_op.pt2")


def damaged_copies(outdir, source):
    """Copies of a .pt2 with one record edited (the zip rewritten, so its checksums stay right)."""
    import zipfile

    def rewrite(target, edit):
        with zipfile.ZipFile(os.path.join(outdir, source)) as zin, \
                zipfile.ZipFile(os.path.join(outdir, target), "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                zout.writestr(info.filename, edit(info.filename, zin.read(info.filename)))
        return target

    def version(name, data):
        return b"1" if name.endswith("/archive_version") else data

    def schema(name, data):
        if not name.endswith("/models/model.json"):
            return data
        program = json.loads(data)
        program["schema_version"]["major"] = 99
        return json.dumps(program).encode()

    def weights(name, data):
        if not name.endswith("_weights_config.json"):
            return data
        config = json.loads(data)
        meta = next(iter(config["config"].values()))["tensor_meta"]
        meta["sizes"] = [{"as_int": 1 << 20}] + meta["sizes"][1:]
        return json.dumps(config).encode()

    return {"version": rewrite("bad_version.pt2", version), "schema": rewrite("bad_schema.pt2", schema),
            "weights": rewrite("bad_weights.pt2", weights)}


def main(argv):
    if len(argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(2)
    entries = [export(*m, outdir=outdir) for m in MODELS]
    programs, bad = export_programs(outdir)
    manifest = {"torch_version": torch.__version__, "models": entries, "programs": programs, "bad_programs": bad}
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(f"wrote {outdir}/manifest.json: {len(entries)} models from torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
