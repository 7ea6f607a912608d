#!/usr/bin/python3
"""Export Kiln's sample models and op fixtures as TorchScript files.

Usage:
    /usr/bin/python3 resources/models/export_models.py OUTDIR [--only NAME,...] [--list]

Writes into OUTDIR:
  * <network>.pt        five torchvision networks with random weights (seed 0), BatchNorm
                        statistics calibrated and the final Linear layer rescaled so that the
                        logits have std ~= 1 (see README.md, "numerically alive");
  * ops/<name>.pt       small traced nn.Modules, one operator (or tiny block) each;
  * bad/<name>.pt       broken / unsupported fixtures for error-path tests;
  * manifest.json       {"models": [...], "bad": [...]} describing all of the above.

Every .pt file carries an extra file "kiln.json" ({"inputs": [...], "source": ...}) so that the
C++ side knows the input names, shapes and dtypes without Python.

Nothing is downloaded (weights=None). Requires Debian's python3-torch / python3-torchvision.
`--only` regenerates just the named entries and merges them into an existing manifest.json.
"""

import argparse
import io
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

NETWORK_TOL = 1e-3
OP_TOL = 1e-4
SEED = 0
# Seed for the random inputs used for checks (calibration uses its own generator too).
CHECK_SEED = 1234

NETWORKS = ["mobilenet_v2", "resnet18", "resnet50", "efficientnet_b0", "mobilenet_v3_small"]
NET_INPUT = [1, 3, 224, 224]
CALIB_BATCHES = 4
CALIB_BATCH_SIZE = 8


def _inputs_meta(shapes, names=None):
    names = names or (["x"] if len(shapes) == 1 else ["x", "y", "z"][: len(shapes)])
    return [{"name": n, "shape": list(s), "dtype": "float32"} for n, s in zip(names, shapes)]


def _save(module, path, inputs_meta, source):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    extra = {"kiln.json": json.dumps({"inputs": inputs_meta, "source": source}, sort_keys=True)}
    torch.jit.save(module, path, _extra_files=extra)


def _check_alive(name, out, min_std):
    """Fail loudly if an output is not finite or (numerically) dead."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not torch.isfinite(o).all():
            raise SystemExit(f"error: {name}: output is not finite")
        s = o.float().std().item() if o.numel() > 1 else o.abs().item()
        if not (s >= min_std):
            raise SystemExit(f"error: {name}: output std {s:.3g} < {min_std} (numerically dead)")


# --------------------------------------------------------------------------------------------
# Networks
# --------------------------------------------------------------------------------------------

def _build_network(name):
    import torchvision.models as tvm

    torch.manual_seed(SEED)
    model = getattr(tvm, name)(weights=None)

    # (a) BatchNorm calibration: cumulative running stats from a few random batches. Only the
    # BatchNorm layers are put in train mode; dropout / stochastic depth stay in eval mode so the
    # calibration forward passes see the same network as inference.
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    model.eval()
    for bn in bns:
        bn.momentum = None
        bn.reset_running_stats()
        bn.train()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for _ in range(CALIB_BATCHES):
            model(torch.randn(CALIB_BATCH_SIZE, *NET_INPUT[1:], generator=gen))
    model.eval()

    # (b) rescale the final Linear layer so the logits have std ~= 1.
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    last = linears[-1]
    x = torch.randn(*NET_INPUT, generator=gen)
    with torch.no_grad():
        std = model(x).std().item()
        if not (std > 0 and math.isfinite(std)):
            raise SystemExit(f"error: {name}: logits std {std} before rescaling")
        last.weight.mul_(1.0 / std)
        if last.bias is not None:
            last.bias.mul_(1.0 / std)
    return model


def export_network(name, outdir):
    t0 = time.time()
    model = _build_network(name)
    example = torch.randn(*NET_INPUT, generator=torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    rel = f"{name}.pt"
    path = os.path.join(outdir, rel)
    meta = _inputs_meta([NET_INPUT])
    _save(traced, path, meta, f"torchvision {name}, random weights, seed {SEED}")

    # Load the saved file back and measure.
    x = torch.randn(*NET_INPUT, generator=torch.Generator().manual_seed(CHECK_SEED))
    loaded = torch.jit.load(path).eval()
    with torch.no_grad():
        y = loaded(x)
        y_ref = model(x)
    std = y.std().item()
    diff = (y - y_ref).abs().max().item()
    print(f"  network {name:20s} logits std {std:.4f}  mean {y.mean().item():+.4f}  "
          f"|saved-eager| {diff:.2e}  ({time.time() - t0:.1f}s)", flush=True)
    if not math.isfinite(std) or std < 0.1:
        raise SystemExit(f"error: {name}: logits std {std} (must be finite and >= 0.1)")
    return {"name": name, "file": rel, "kind": "network", "inputs": meta,
            "rtol": NETWORK_TOL, "atol": NETWORK_TOL}


# --------------------------------------------------------------------------------------------
# Op modules
# --------------------------------------------------------------------------------------------

class Unary(nn.Module):
    """forward(x) = fn(self, x); keyword arguments become submodules / parameters / buffers."""

    def __init__(self, fn, **attrs):
        super().__init__()
        for k, v in attrs.items():
            if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter):
                self.register_buffer(k, v)
            else:
                setattr(self, k, v)
        self._fn = fn

    def forward(self, x):
        return self._fn(self, x)


class Binary(Unary):
    def forward(self, x, y):
        return self._fn(self, x, y)


def _random_bn(c):
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(c) * 0.5)
        bn.running_var.copy_(torch.rand(c) + 0.5)
        bn.weight.copy_(torch.randn(c) * 0.5 + 1.0)
        bn.bias.copy_(torch.randn(c) * 0.5)
    return bn


class ConvBnRelu(nn.Module):
    def __init__(self, cin, cout, k=3, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        self.bn = _random_bn(cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn1 = _random_bn(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = _random_bn(c)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + x
        return self.relu(out)


class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.relu = nn.ReLU()
        self.fc2 = nn.Conv2d(c // r, c, 1)
        self.sig = nn.Sigmoid()

    def forward(self, x):
        s = self.sig(self.fc2(self.relu(self.fc1(self.pool(x)))))
        return x * s


class FlattenHead(nn.Module):
    """The classifier-head pattern of torchvision networks: pool -> flatten -> linear."""

    def __init__(self, c, n):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(c, n)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(x), 1))


S = [1, 8, 16, 16]  # default small activation shape

# name -> (factory, input shapes). Factories run right after torch.manual_seed(SEED).
OPS = [
    # --- convolution ---
    ("conv2d_plain", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3)), [S]),
    ("conv2d_bias", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 16, 3, padding=1, bias=True)), [S]),
    ("conv2d_nobias", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 16, 3, padding=1, bias=False)), [S]),
    ("conv2d_stride2", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3, stride=2, padding=1)), [S]),
    ("conv2d_padding", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3, padding=(2, 1))), [S]),
    ("conv2d_dilation2", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3, padding=2, dilation=2)), [S]),
    ("conv2d_groups2", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 12, 3, padding=1, groups=2)), [S]),
    ("conv2d_depthwise", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3, padding=1, groups=8)), [S]),
    ("conv2d_depthwise_stride2", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)), [S]),
    ("conv2d_1x1", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 16, 1)), [S]),
    ("conv2d_nonsquare", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(3, 8, 3, stride=2, padding=1)), [[1, 3, 17, 23]]),
    ("conv2d_5x5", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 5, padding=2)), [S]),
    ("conv2d_5x5_stride2_nonsquare", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(4, 6, 5, stride=2, padding=2)), [[1, 4, 13, 19]]),
    ("conv2d_batch2", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv2d(3, 8, 3, padding=1)), [[2, 3, 8, 8]]),
    # --- normalization ---
    ("batch_norm2d", lambda: Unary(lambda m, x: m.bn(x), bn=_random_bn(8)), [S]),
    # --- activations ---
    ("relu", lambda: Unary(lambda m, x: torch.relu(x)), [S]),
    ("relu_module_inplace", lambda: Unary(lambda m, x: m.a(x * 1.0), a=nn.ReLU(inplace=True)), [S]),
    ("relu6", lambda: Unary(lambda m, x: F.relu6(x * 4.0)), [S]),
    ("hardtanh", lambda: Unary(lambda m, x: F.hardtanh(x * 2.0, -2.0, 3.0)), [S]),
    ("leaky_relu", lambda: Unary(lambda m, x: F.leaky_relu(x, 0.1)), [S]),
    ("sigmoid", lambda: Unary(lambda m, x: torch.sigmoid(x)), [S]),
    ("tanh", lambda: Unary(lambda m, x: torch.tanh(x)), [S]),
    ("silu", lambda: Unary(lambda m, x: F.silu(x)), [S]),
    ("hardswish", lambda: Unary(lambda m, x: F.hardswish(x * 3.0)), [S]),
    ("hardsigmoid", lambda: Unary(lambda m, x: F.hardsigmoid(x * 3.0)), [S]),
    ("gelu", lambda: Unary(lambda m, x: F.gelu(x)), [S]),
    # --- elementwise binary, broadcasting ---
    ("add_broadcast", lambda: Binary(lambda m, x, y: x + y), [[2, 3, 4, 5], [3, 1, 5]]),
    ("sub_broadcast", lambda: Binary(lambda m, x, y: x - y), [[2, 3, 4, 5], [3, 1, 5]]),
    ("mul_broadcast", lambda: Binary(lambda m, x, y: x * y), [[2, 3, 4, 5], [3, 1, 5]]),
    # Denominator kept in [0.5, 1.5] so random inputs never divide by ~0.
    ("div_broadcast", lambda: Binary(lambda m, x, y: x / (torch.sigmoid(y) + 0.5)), [[2, 3, 4, 5], [3, 1, 5]]),
    ("div_broadcast_const", lambda: Unary(lambda m, x: x / m.d, d=torch.rand(3, 1, 5) + 0.5), [[2, 3, 4, 5]]),
    ("add_same_shape", lambda: Binary(lambda m, x, y: x + y), [S, S]),
    ("add_channel_bias", lambda: Unary(lambda m, x: x + m.b, b=torch.randn(1, 8, 1, 1)), [S]),
    # --- with python scalars ---
    ("add_scalar", lambda: Unary(lambda m, x: x + 0.5), [S]),
    ("sub_scalar", lambda: Unary(lambda m, x: x - 0.25), [S]),
    ("mul_scalar", lambda: Unary(lambda m, x: x * 2.5), [S]),
    ("div_scalar", lambda: Unary(lambda m, x: x / 3.0), [S]),
    ("rsub", lambda: Unary(lambda m, x: 1.0 - x), [S]),
    # --- linear algebra ---
    ("linear_bias", lambda: Unary(lambda m, x: m.l(x), l=nn.Linear(16, 10)), [[4, 16]]),
    ("linear_nobias", lambda: Unary(lambda m, x: m.l(x), l=nn.Linear(16, 10, bias=False)), [[4, 16]]),
    ("linear_3d", lambda: Unary(lambda m, x: m.l(x), l=nn.Linear(16, 10)), [[2, 5, 16]]),
    ("addmm", lambda: Unary(lambda m, x: torch.addmm(m.b, x, m.w),
                             b=torch.randn(6), w=torch.randn(8, 6)), [[4, 8]]),
    ("matmul_2d", lambda: Binary(lambda m, x, y: torch.matmul(x, y)), [[4, 8], [8, 6]]),
    ("matmul_3d", lambda: Binary(lambda m, x, y: torch.matmul(x, y)), [[2, 4, 8], [2, 8, 6]]),
    ("bmm", lambda: Binary(lambda m, x, y: torch.bmm(x, y)), [[2, 4, 8], [2, 8, 6]]),
    # --- shape manipulation ---
    ("flatten", lambda: Unary(lambda m, x: torch.flatten(x, 1)), [S]),
    ("flatten_module", lambda: Unary(lambda m, x: m.f(x), f=nn.Flatten()), [[2, 4, 3, 3]]),
    ("reshape", lambda: Unary(lambda m, x: x.reshape(1, 32, 8, 8)), [S]),
    ("reshape_infer", lambda: Unary(lambda m, x: x.reshape(x.size(0), -1)), [S]),
    ("view", lambda: Unary(lambda m, x: x.view(8, 256)), [S]),
    ("permute", lambda: Unary(lambda m, x: x.permute(0, 2, 3, 1)), [[1, 4, 5, 6]]),
    ("transpose", lambda: Unary(lambda m, x: x.transpose(1, 2)), [[2, 3, 4]]),
    ("squeeze_unsqueeze", lambda: Unary(lambda m, x: x.squeeze(0).unsqueeze(2)), [[1, 4, 5, 6]]),
    ("squeeze_all", lambda: Unary(lambda m, x: x.squeeze()), [[1, 8, 1, 1]]),
    ("contiguous_transpose", lambda: Unary(lambda m, x: x.transpose(2, 3).contiguous().view(1, 4, -1)), [[1, 4, 5, 6]]),
    ("cat_dim1", lambda: Binary(lambda m, x, y: torch.cat([x, y], dim=1)), [[1, 4, 8, 8], [1, 3, 8, 8]]),
    ("cat_last", lambda: Binary(lambda m, x, y: torch.cat([x, y], dim=-1)), [[1, 4, 8, 5], [1, 4, 8, 3]]),
    ("cat_three", lambda: Unary(lambda m, x: torch.cat([x, torch.relu(x), x * 2.0], dim=1)), [[1, 4, 6, 6]]),
    # --- pooling / reductions ---
    ("max_pool2d", lambda: Unary(lambda m, x: m.p(x), p=nn.MaxPool2d(3, 2, 1)), [S]),
    ("max_pool2d_ceil", lambda: Unary(lambda m, x: m.p(x), p=nn.MaxPool2d(3, 2, ceil_mode=True)), [[1, 4, 14, 15]]),
    ("max_pool2d_2x2", lambda: Unary(lambda m, x: F.max_pool2d(x, 2)), [S]),
    ("avg_pool2d", lambda: Unary(lambda m, x: F.avg_pool2d(x, 2)), [S]),
    ("avg_pool2d_pad_count", lambda: Unary(lambda m, x: m.p(x), p=nn.AvgPool2d(3, 2, 1, count_include_pad=True)), [[1, 4, 15, 15]]),
    ("avg_pool2d_pad_nocount", lambda: Unary(lambda m, x: m.p(x), p=nn.AvgPool2d(3, 2, 1, count_include_pad=False)), [[1, 4, 15, 15]]),
    ("adaptive_avg_pool2d_1x1", lambda: Unary(lambda m, x: m.p(x), p=nn.AdaptiveAvgPool2d(1)), [[1, 8, 7, 10]]),
    ("adaptive_avg_pool2d_2x3", lambda: Unary(lambda m, x: m.p(x), p=nn.AdaptiveAvgPool2d((2, 3))), [[1, 8, 7, 10]]),
    ("mean_keepdim", lambda: Unary(lambda m, x: x.mean([2, 3], keepdim=True)), [[2, 16, 3, 5]]),
    ("mean_nokeep", lambda: Unary(lambda m, x: x.mean([2, 3])), [[2, 16, 3, 5]]),
    ("softmax_dim1", lambda: Unary(lambda m, x: torch.softmax(x, dim=1)), [[2, 10, 3]]),
    ("softmax_last", lambda: Unary(lambda m, x: F.softmax(x * 2.0, dim=-1)), [[2, 3, 10]]),
    # --- misc ---
    ("dropout_eval", lambda: Unary(lambda m, x: m.d(x) * 1.0, d=nn.Dropout(0.5)), [S]),
    ("clamp", lambda: Unary(lambda m, x: torch.clamp(x, -0.5, 0.75)), [S]),
    ("clamp_min", lambda: Unary(lambda m, x: torch.clamp_min(x, 0.25)), [S]),
    # --- blocks ---
    ("conv_bn_relu", lambda: ConvBnRelu(8, 16), [S]),
    ("residual_block", lambda: Residual(8), [S]),
    ("se_block", lambda: SqueezeExcite(16), [[1, 16, 8, 8]]),
    ("classifier_head", lambda: FlattenHead(16, 10), [[1, 16, 7, 7]]),
]


def export_op(name, factory, shapes, outdir):
    torch.manual_seed(SEED)
    mod = factory().eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    example = tuple(torch.randn(*s, generator=gen) for s in shapes)
    with torch.no_grad():
        traced = torch.jit.trace(mod, example)
    rel = f"ops/{name}.pt"
    path = os.path.join(outdir, rel)
    meta = _inputs_meta(shapes)
    _save(traced, path, meta, f"kiln op module {name}, seed {SEED}")

    gen = torch.Generator().manual_seed(CHECK_SEED)
    xs = tuple(torch.randn(*s, generator=gen) for s in shapes)
    loaded = torch.jit.load(path).eval()
    with torch.no_grad():
        y = loaded(*xs)
        y_ref = mod(*xs)
    if not torch.allclose(y, y_ref, rtol=1e-6, atol=1e-6):
        raise SystemExit(f"error: op {name}: saved module disagrees with eager")
    _check_alive(f"op {name}", y, 0.05)
    return {"name": name, "file": rel, "kind": "op", "inputs": meta, "rtol": OP_TOL, "atol": OP_TOL}


# --------------------------------------------------------------------------------------------
# Bad fixtures
# --------------------------------------------------------------------------------------------

class GridSample(nn.Module):
    """Uses aten::grid_sampler, which a CNN compiler is not expected to support."""

    def __init__(self):
        super().__init__()
        theta = torch.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.05]]])
        self.register_buffer("grid", F.affine_grid(theta, [1, 4, 8, 8], align_corners=False))
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        y = F.grid_sample(x, self.grid, align_corners=False)
        return torch.relu(self.conv(y))


def _valid_model_bytes():
    torch.manual_seed(SEED)
    mod = ConvBnRelu(8, 16).eval()
    traced = torch.jit.trace(mod, torch.randn(*S))
    buf = io.BytesIO()
    torch.jit.save(traced, buf, _extra_files={"kiln.json": json.dumps(
        {"inputs": _inputs_meta([S]), "source": "kiln bad fixture (truncated conv_bn_relu)"},
        sort_keys=True)})
    return buf.getvalue()


def _bad_truncated(outdir, rel):
    data = _valid_model_bytes()
    with open(os.path.join(outdir, rel), "wb") as f:
        f.write(data[: len(data) // 2])


def _bad_not_a_model(outdir, rel):
    with open(os.path.join(outdir, rel), "wb") as f:
        f.write(b"This is not a TorchScript model, just some text bytes.\n" * 4)


def _bad_unsupported(outdir, rel):
    torch.manual_seed(SEED)
    mod = GridSample().eval()
    with torch.no_grad():
        traced = torch.jit.trace(mod, torch.randn(1, 4, 8, 8))
    _save(traced, os.path.join(outdir, rel), _inputs_meta([[1, 4, 8, 8]]),
          "kiln bad fixture: grid_sample (unsupported op)")
    kinds = {n.kind() for n in torch.jit.freeze(torch.jit.load(os.path.join(outdir, rel)).eval()).graph.nodes()}
    if "aten::grid_sampler" not in kinds:
        raise SystemExit(f"error: unsupported_op fixture lacks aten::grid_sampler: {sorted(kinds)}")


# "expect" is a substring the error message must contain. For files libtorch cannot open, the
# message of torch::jit::load's PytorchStreamReader is used ("PytorchStreamReader failed reading
# zip archive: ..."); importers that rewrap the error should keep that text.
BAD = [
    ("truncated", "bad/truncated.pt", _bad_truncated, "PytorchStreamReader"),
    ("not_a_model", "bad/not_a_model.pt", _bad_not_a_model, "PytorchStreamReader"),
    ("unsupported_op", "bad/unsupported_op.pt", _bad_unsupported, "aten::grid_sampler"),
]


def export_bad(name, rel, fn, expect, outdir):
    os.makedirs(os.path.join(outdir, os.path.dirname(rel)), exist_ok=True)
    fn(outdir, rel)
    print(f"  bad     {name:20s} -> {rel} (expect {expect!r})", flush=True)
    return {"name": name, "file": rel, "expect": expect}


def _format_manifest(models, bad):
    """Valid JSON with one entry per line (easy to read and to diff)."""
    def block(key, rows):
        body = ",\n".join("  " + json.dumps(r) for r in rows)
        return f' "{key}": [\n{body}\n ]' if rows else f' "{key}": []'
    return "{\n" + block("models", models) + ",\n" + block("bad", bad) + "\n}\n"


# --------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--only", help="comma-separated names to (re)export; merged into manifest.json")
    ap.add_argument("--list", action="store_true", help="list exportable names and exit")
    args = ap.parse_args(argv)

    all_names = NETWORKS + [n for n, _, _ in OPS] + [n for n, *_ in BAD]
    if len(set(all_names)) != len(all_names):
        raise SystemExit("error: duplicate names in export tables")
    if args.list:
        print("\n".join(all_names))
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")

    only = None
    if args.only:
        only = {s.strip() for s in args.only.split(",") if s.strip()}
        unknown = only - set(all_names)
        if unknown:
            raise SystemExit(f"error: unknown names in --only: {', '.join(sorted(unknown))}")

    def wanted(n):
        return only is None or n in only

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    outdir = args.outdir
    os.makedirs(outdir, exist_ok=True)
    t_start = time.time()

    models, bad = [], []
    for name in NETWORKS:
        if wanted(name):
            models.append(export_network(name, outdir))
    n_ops = 0
    t_ops = time.time()
    for name, factory, shapes in OPS:
        if wanted(name):
            models.append(export_op(name, factory, shapes, outdir))
            n_ops += 1
    if n_ops:
        print(f"  ops     {n_ops} op modules written to {os.path.join(outdir, 'ops')} "
              f"({time.time() - t_ops:.1f}s)", flush=True)
    for name, rel, fn, expect in BAD:
        if wanted(name):
            bad.append(export_bad(name, rel, fn, expect, outdir))

    manifest_path = os.path.join(outdir, "manifest.json")
    if only is not None and os.path.exists(manifest_path):
        # Merge: keep entries not regenerated now, replace the others; keep table order.
        with open(manifest_path) as f:
            old = json.load(f)
        new_models = {m["name"]: m for m in old.get("models", [])}
        new_models.update({m["name"]: m for m in models})
        new_bad = {b["name"]: b for b in old.get("bad", [])}
        new_bad.update({b["name"]: b for b in bad})
        order = {n: i for i, n in enumerate(all_names)}
        models = sorted(new_models.values(), key=lambda m: order.get(m["name"], len(order)))
        bad = sorted(new_bad.values(), key=lambda b: order.get(b["name"], len(order)))
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(_format_manifest(models, bad))
    os.replace(tmp, manifest_path)
    print(f"wrote {manifest_path}: {len(models)} models, {len(bad)} bad fixtures "
          f"in {time.time() - t_start:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
