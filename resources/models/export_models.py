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


def _save(module, path, inputs_meta, source, meta=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    extra = {"kiln.json": json.dumps({"inputs": inputs_meta, "source": source, **(meta or {})}, sort_keys=True)}
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

def _build_network(name, factory=None):
    import torchvision.models as tvm

    torch.manual_seed(SEED)
    model = (factory or getattr(tvm, name))(weights=None)

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


def _trace_save_reload(model, name, outdir, source, meta=None):
    """Traces a network on a random input, saves it as <name>.pt and loads the file back: returns
    (file, inputs metadata, example input, saved module's logits, eager logits, logits std) on the
    check input; fails if the saved module's logits are dead."""
    example = torch.randn(*NET_INPUT, generator=torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    rel = f"{name}.pt"
    path = os.path.join(outdir, rel)
    inputs = _inputs_meta([NET_INPUT])
    _save(traced, path, inputs, source, meta)
    x = torch.randn(*NET_INPUT, generator=torch.Generator().manual_seed(CHECK_SEED))
    loaded = torch.jit.load(path).eval()
    with torch.no_grad():
        y = loaded(x)
        y_ref = model(x)
    std = y.std().item()
    if not math.isfinite(std) or std < 0.1:
        raise SystemExit(f"error: {name}: logits std {std} (must be finite and >= 0.1)")
    return rel, inputs, example, y, y_ref, std


def export_network(name, outdir):
    t0 = time.time()
    model = _build_network(name)
    rel, meta, example, y, y_ref, std = _trace_save_reload(model, name, outdir,
                                                           f"torchvision {name}, random weights, seed {SEED}")
    diff = (y - y_ref).abs().max().item()
    print(f"  network {name:20s} logits std {std:.4f}  mean {y.mean().item():+.4f}  "
          f"|saved-eager| {diff:.2e}  ({time.time() - t0:.1f}s)", flush=True)
    entry = {"name": name, "file": rel, "kind": "network", "inputs": meta,
             "rtol": NETWORK_TOL, "atol": NETWORK_TOL}
    if name in ONNX_MODELS:
        entry["onnx"] = _export_onnx(model, example, outdir, name, ["x"])
    return entry


# --------------------------------------------------------------------------------------------
# Quantized networks (issue 9): torchvision's quantizable variants with the same random weights
# and liveness treatment as above, then fused, post-training quantized (static, per-channel
# symmetric int8 weights, uint8 activations) with random calibration batches and converted; the
# QAT ones are fused for training, fake-quantized and trained a few steps instead, then converted.
# Debian's torch has no fbgemm: the x86 engine available is oneDNN, recorded in the metadata.
# --------------------------------------------------------------------------------------------

QUANTIZED_NETWORKS = ["quantized_mobilenet_v2", "quantized_resnet18"]
# Quantization-aware trained networks: same preparation, then a few QAT steps instead of
# calibration (kind "quantized_network" too, "qat": true in their quantization metadata).
QAT_NETWORKS = ["qat_resnet18"]
QAT_STEPS = 3
QAT_LR = 1e-3
QENGINE = "onednn"
# Kiln must match PyTorch's quantized execution within this many output quantization steps on at
# least QUANT_MIN_SHARE of the elements.
QUANT_STEPS = 1
QUANT_MIN_SHARE = 0.99


def _quantizable_network(base):
    """torchvision's quantizable <base> (not yet fused or quantized) with _build_network's random
    weights, BatchNorm calibration and logit rescaling, in eval mode, on QENGINE."""
    import torchvision.models.quantization as tvq

    torch.backends.quantized.engine = QENGINE
    model = _build_network(base, lambda weights: getattr(tvq, base)(weights=weights, quantize=False))
    model.eval()
    return model


def _build_quantized_network(name):
    from torch.ao.quantization import convert, get_default_qconfig, prepare

    model = _quantizable_network(name[len("quantized_"):])
    model.fuse_model()
    model.qconfig = get_default_qconfig(QENGINE)
    prepare(model, inplace=True)
    gen = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for _ in range(CALIB_BATCHES):
            model(torch.randn(CALIB_BATCH_SIZE, *NET_INPUT[1:], generator=gen))
    convert(model, inplace=True)
    return model


def _build_qat_network(name):
    """Quantization-aware training: fused for QAT (conv+bn kept trainable), fake-quantized with
    get_default_qat_qconfig, QAT_STEPS SGD steps on random inputs and random labels (so weights,
    BatchNorm statistics and the fake-quant observers move), then converted in eval mode."""
    from torch.ao.quantization import convert, get_default_qat_qconfig, prepare_qat

    model = _quantizable_network(name[len("qat_"):])
    model.fuse_model(is_qat=True)
    model.qconfig = get_default_qat_qconfig(QENGINE)
    model.train()
    prepare_qat(model, inplace=True)
    torch.manual_seed(SEED + 3)
    gen = torch.Generator().manual_seed(SEED + 3)
    opt = torch.optim.SGD(model.parameters(), lr=QAT_LR, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(QAT_STEPS):
        x = torch.randn(CALIB_BATCH_SIZE, *NET_INPUT[1:], generator=gen)
        labels = torch.randint(0, model.fc.out_features, (CALIB_BATCH_SIZE,), generator=gen)
        opt.zero_grad()
        loss_fn(model(x), labels).backward()
        opt.step()
    model.eval()
    convert(model, inplace=True)
    return model


def export_quantized_network(name, outdir):
    t0 = time.time()
    if name in QAT_NETWORKS:
        model = _build_qat_network(name)
        qconfig = f"get_default_qat_qconfig('{QENGINE}'): FusedMovingAvgObsFakeQuantize with " \
                  "MovingAverageMinMaxObserver activations (quint8), MovingAveragePerChannelMinMaxObserver " \
                  "weights (qint8, per-channel symmetric)"
        quant = {"qengine": QENGINE, "qconfig": qconfig, "qat": True,
                 "training": f"{QAT_STEPS} SGD steps (lr {QAT_LR}, momentum 0.9) on {CALIB_BATCH_SIZE} randn inputs "
                 f"with random labels, cross-entropy, seed {SEED + 3}"}
        source = f"torchvision quantization.{name[len('qat_'):]}, random weights, seed {SEED}, QAT on {QENGINE}"
    else:
        model = _build_quantized_network(name)
        qconfig = f"get_default_qconfig('{QENGINE}'): HistogramObserver activations (quint8), " \
                  "PerChannelMinMaxObserver weights (qint8, per-channel symmetric)"
        quant = {"qengine": QENGINE, "qconfig": qconfig, "qat": False,
                 "calibration": f"{CALIB_BATCHES}x{CALIB_BATCH_SIZE} randn, seed {SEED + 2}"}
        source = f"torchvision quantization.{name[len('quantized_'):]}, random weights, seed {SEED}, PTQ on {QENGINE}"
    rel, meta, _, y, y_ref, std = _trace_save_reload(model, name, outdir, source, {"quantization": quant})
    # The output is the dequantized last layer: its quantization step is the fc's output scale.
    step = float(model.fc.scale if hasattr(model, "fc") else model.classifier[-1].scale)
    diff = (y - y_ref).abs().max().item()
    exact, agree = _exact_reference(model, name, outdir, step)
    print(f"  network {name:20s} logits std {std:.4f}  step {step:.4f}  |saved-eager| {diff:.2e}  "
          f"libtorch within 1 step of the exact reference: {agree:.3f}  ({time.time() - t0:.1f}s)", flush=True)
    return {"name": name, "file": rel, "kind": "quantized_network", "inputs": meta, "quantization": quant,
            "output_step": step, "steps": QUANT_STEPS, "min_share": QUANT_MIN_SHARE, "rtol": 0.0, "atol": step,
            "exact_reference": exact}


# An exact int8 reference for the quantized networks. libtorch's oneDNN int8 convolutions and
# linear layers are exact only on CPUs with VNNI: on AVX2 they sum u8·s8 pairs into int16
# (vpmaddubsw), which saturates, and a random network amplifies every step that flips (on the
# AMD EPYC Zen 3 these tests run on, libtorch's quantized MobileNetV2 agrees with an exact
# computation on about an eighth of its outputs). The reference swaps every quantized conv and
# linear for the same arithmetic done exactly: the integer accumulation in float64 (exact below
# 2^53), then the f32 requantization of PyTorch's oneDNN path (reciprocal scales, bias moved into
# the accumulator's units, ties to even, zero point added after the product). Every other op
# (quantize, add, pooling, ...) stays libtorch's own, which is exact on any CPU.

class _ExactQuantized(nn.Module):
    def __init__(self, mod, relu):
        super().__init__()
        self.mod, self.relu = mod, relu

    def forward(self, x):
        import numpy as np
        f32, m = np.float32, self.mod
        w = m.weight()
        if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            w_scales, w_zps = w.q_per_channel_scales(), w.q_per_channel_zero_points()
        else:
            w_scales = torch.full((w.shape[0],), w.q_scale(), dtype=torch.float64)
            w_zps = torch.full((w.shape[0],), w.q_zero_point(), dtype=torch.int64)
        w_int = w.int_repr().double() - w_zps.double().view(-1, *[1] * (w.dim() - 1))
        x_int = x.int_repr().double() - x.q_zero_point()
        if isinstance(m, torch.ao.nn.quantized.Conv2d):
            acc = F.conv2d(x_int, w_int, None, m.stride, m.padding, m.dilation, m.groups)
        else:
            acc = F.linear(x_int, w_int)
        inv_x, inv_y = f32(1) / f32(x.q_scale()), f32(1) / f32(m.scale)
        acc_scale = inv_x * (f32(1) / w_scales.numpy().astype(f32))
        mult = inv_y / acc_scale
        bias = m.bias()
        offset = (bias.detach().numpy().astype(f32) if bias is not None else np.zeros_like(mult)) * acc_scale
        per_channel = (1, -1) + (1,) * (acc.dim() - 2)
        v = (acc.numpy().astype(f32) + offset.reshape(per_channel)) * mult.reshape(per_channel)
        v = np.rint(v + f32(m.zero_point))
        q = np.clip(v, m.zero_point if self.relu else 0, 255).astype(np.uint8)
        return torch._make_per_tensor_quantized_tensor(torch.from_numpy(q), m.scale, m.zero_point)


def _swap_exact(module):
    import torch.ao.nn.quantized as nnq
    import torch.nn.intrinsic.quantized as nniq  # torch.ao.nn.intrinsic from torch 2.0 on

    for child_name, child in module.named_children():
        if isinstance(child, (nnq.Conv2d, nnq.Linear)):
            relu = isinstance(child, (nniq.ConvReLU2d, nniq.LinearReLU))
            setattr(module, child_name, _ExactQuantized(child, relu))
        else:
            _swap_exact(child)


def _exact_reference(model, name, outdir, step, shape=NET_INPUT, batches=(1, 2)):
    """Writes <name>.exact_{in,out}_b<batch>.npy: random inputs of `shape` with dimension 0 set to
    each batch, and the exact reference's outputs. Returns their manifest entry and the share of
    libtorch's outputs within one step of the exact ones."""
    import copy

    import numpy as np

    exact = copy.deepcopy(model)
    _swap_exact(exact)
    entry, within, total = {}, 0, 0
    for batch in batches:
        x = torch.randn(batch, *shape[1:], generator=torch.Generator().manual_seed(CHECK_SEED + batch))
        with torch.no_grad():
            y_exact, y_torch = exact(x), model(x)
        files = {"input": f"{name}.exact_in_b{batch}.npy", "output": f"{name}.exact_out_b{batch}.npy"}
        np.save(os.path.join(outdir, files["input"]), x.numpy())
        np.save(os.path.join(outdir, files["output"]), y_exact.numpy())
        entry[str(batch)] = files
        within += int(((y_exact - y_torch).abs() <= step * 1.001).sum())
        total += y_exact.numel()
    return entry, within / total


# Small quantized op modules (kind "quantized_op", file ops/<name>.pt) for the int8 kernel unit
# tests (tests/unit/quant): torch.ao.nn.quantized modules with random per-channel int8 weights,
# shapes that do not divide the kernels' tiles. (name, module factory, input shape, output scale)


class _QuantOp(nn.Module):
    def __init__(self, body, in_scale, in_zp, **mods):
        super().__init__()
        self.body, self.in_scale, self.in_zp = body, in_scale, in_zp
        for k, v in mods.items():
            setattr(self, k, v)

    def forward(self, x):
        q = torch.quantize_per_tensor(x, self.in_scale, self.in_zp, torch.quint8)
        return torch.dequantize(self.body(self, q))


def _qweight(shape, gen):
    w = torch.randn(*shape, generator=gen) * 0.2
    scales = (w.abs().flatten(1).amax(1) / 127.0).clamp_min(1e-6).double()
    return torch.quantize_per_channel(w, scales, torch.zeros(shape[0], dtype=torch.long), 0, torch.qint8)


def _qconv(cin, cout, k, stride=1, pad=0, dil=1, groups=1, relu=False, scale=0.05, zp=120):
    import torch.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq
    gen = torch.Generator().manual_seed(SEED + cin + 7 * cout + k)
    cls = nniq.ConvReLU2d if relu else nnq.Conv2d
    conv = cls(cin, cout, k, stride=stride, padding=pad, dilation=dil, groups=groups)
    conv.set_weight_bias(_qweight((cout, cin // groups, k, k), gen), torch.randn(cout, generator=gen) * 0.1)
    conv.scale, conv.zero_point = scale, (0 if relu else zp)
    return _QuantOp(lambda m, q: m.conv(q), 0.02, 130, conv=conv)


def _qlinear(k=100, n=37, relu=False, in_zp=128, seed=3):
    import torch.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq
    gen = torch.Generator().manual_seed(SEED + seed)
    lin = (nniq.LinearReLU if relu else nnq.Linear)(k, n)
    lin.set_weight_bias(_qweight((n, k), gen), torch.randn(n, generator=gen) * 0.1)
    lin.scale, lin.zero_point = 0.04, (0 if relu else 110)
    return _QuantOp(lambda m, q: m.lin(q), 0.03, in_zp, lin=lin)


def _qadd():
    import torch.ao.nn.quantized as nnq
    f1, f2 = nnq.QFunctional(), nnq.QFunctional()
    f1.scale, f1.zero_point, f2.scale, f2.zero_point = 0.03, 5, 0.04, 90

    def body(m, q):
        b = torch.quantize_per_tensor(torch.dequantize(q) * 0.5 + 0.25, 0.015, 100, torch.quint8)
        return m.f2.add(m.f1.add_relu(q, b), q)
    return _QuantOp(body, 0.02, 128, f1=f1, f2=f2)


def _qcat_pool():
    import torch.ao.nn.quantized as nnq
    f = nnq.QFunctional()
    f.scale, f.zero_point = 0.035, 125

    def body(m, q):
        b = torch.quantize_per_tensor(torch.dequantize(q) * 2.0, 0.03, 120, torch.quint8)
        c = m.f.cat([q, b], 1)
        d = F.max_pool2d(c, 3, 2, 1)
        return F.adaptive_avg_pool2d(F.relu(d), 2)
    return _QuantOp(body, 0.02, 128, f=f)


QUANTIZED_OPS = [
    ("q_conv_rgb_stem", lambda: _qconv(3, 16, 3, 2, 1, relu=True), [1, 3, 17, 19], 0.05),  # channels padded to 4
    ("q_conv3x3", lambda: _qconv(24, 40, 3, 1, 1), [1, 24, 13, 11], 0.05),
    ("q_conv_pointwise", lambda: _qconv(32, 48, 1, relu=True), [1, 32, 7, 9], 0.05),
    ("q_conv_dilated", lambda: _qconv(16, 32, 3, 1, 2, 2), [1, 16, 12, 12], 0.05),
    ("q_conv_depthwise", lambda: _qconv(48, 48, 3, 2, 1, groups=48, relu=True), [1, 48, 15, 14], 0.05),
    ("q_conv_depthwise5", lambda: _qconv(40, 40, 5, 1, 2, groups=40), [1, 40, 9, 9], 0.05),
    ("q_conv_odd_channels", lambda: _qconv(20, 12, 3, 1, 1), [1, 20, 6, 5], 0.05),
    ("q_linear", _qlinear, [3, 100], 0.04),
    # Input zero point 0 (the sums need no zero-point share at any level), and K = 50 (no dot4 steps).
    ("q_linear_relu_zp0", lambda: _qlinear(64, 40, relu=True, in_zp=0, seed=5), [2, 64], 0.04),
    ("q_linear_k50", lambda: _qlinear(50, 24, seed=7), [1, 50], 0.04),
    ("q_add", _qadd, [2, 8, 9, 7], 0.04),
    ("q_cat_pool", _qcat_pool, [1, 6, 11, 10], 0.035),
]


def export_quantized_op(name, factory, shape, step, outdir):
    torch.backends.quantized.engine = QENGINE
    torch.manual_seed(SEED)
    model = factory().eval()
    example = torch.randn(*shape, generator=torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    rel = f"ops/{name}.pt"
    meta = _inputs_meta([shape])
    quant = {"qengine": QENGINE}
    _save(traced, os.path.join(outdir, rel), meta, f"kiln quantized op {name}", {"quantization": quant})
    # At its own batch (tests/unit/quant) and at 3 (the end-to-end tests' larger batch for ops).
    exact, _ = _exact_reference(model, rel[:-len(".pt")], outdir, step, shape, batches=sorted({shape[0], 3}))
    return {"name": name, "file": rel, "kind": "quantized_op", "inputs": meta, "quantization": quant,
            "output_step": step, "steps": QUANT_STEPS, "min_share": QUANT_MIN_SHARE, "rtol": 0.0, "atol": step,
            "exact_reference": exact}


# --------------------------------------------------------------------------------------------
# ONNX versions (issue 8): the same module, same weights, exported with torch.onnx (opset 13,
# static shapes, constants folded), so Kiln's ONNX and TorchScript imports can be compared.
# --------------------------------------------------------------------------------------------

ONNX_MODELS = {"resnet18", "mobilenet_v2", "bert_encoder", "transformer_encoder", "compare_mask"}
ONNX_OPSET = 13


def _export_onnx(model, example, outdir, name, input_names):
    rel = f"onnx/{name}.onnx"
    os.makedirs(os.path.join(outdir, "onnx"), exist_ok=True)
    # Not under no_grad: with gradients enabled nn.TransformerEncoderLayer takes its composite
    # path, which has an ONNX form (its fused fast-path kernel has none).
    torch.onnx.export(model, example, os.path.join(outdir, rel), opset_version=ONNX_OPSET,
                      input_names=input_names, do_constant_folding=True)
    return rel


# --------------------------------------------------------------------------------------------
# Transformer encoders (issue 8): exported like the networks, random weights, seed 0
# --------------------------------------------------------------------------------------------

BERT_VOCAB, BERT_SEQ, BERT_HIDDEN, BERT_HEADS, BERT_LAYERS, BERT_FFN = 1000, 128, 256, 4, 4, 1024


class BertLayer(nn.Module):
    """Post-norm BERT layer: self-attention written with matmul/softmax, GELU feed-forward."""

    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=1e-12)
        self.ffn_in, self.ffn_out = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.ffn_norm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, mask_bias):
        b, n, d = x.size()
        hd = d // self.heads

        def split(t):
            return t.view(b, n, self.heads, hd).permute(0, 2, 1, 3)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + mask_bias
        ctx = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(b, n, d)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class BertEncoder(nn.Module):
    """A small BERT-style encoder: token + position + segment embeddings, LayerNorm, 4 layers,
    padding mask from the ids (id 0), and the tanh pooler over the first token."""

    def __init__(self):
        super().__init__()
        self.words = nn.Embedding(BERT_VOCAB, BERT_HIDDEN)
        self.positions = nn.Embedding(BERT_SEQ, BERT_HIDDEN)
        self.segments = nn.Embedding(2, BERT_HIDDEN)
        self.norm = nn.LayerNorm(BERT_HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(BERT_HIDDEN, BERT_HEADS, BERT_FFN) for _ in range(BERT_LAYERS))
        self.pooler = nn.Linear(BERT_HIDDEN, BERT_HIDDEN)
        self.register_buffer("position_ids", torch.arange(BERT_SEQ).unsqueeze(0))

    def forward(self, input_ids):
        n = input_ids.size(1)
        x = self.words(input_ids) + self.positions(self.position_ids[:, :n])
        x = self.norm(x + self.segments(torch.zeros_like(input_ids)))
        mask_bias = (input_ids == 0).float().unsqueeze(1).unsqueeze(2) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


def _build_transformer_encoder():
    layer = nn.TransformerEncoderLayer(BERT_HIDDEN, BERT_HEADS, BERT_FFN, activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, BERT_LAYERS, enable_nested_tensor=False)


# name -> (factory, inputs meta, example-input factory(generator))
TRANSFORMERS = [
    ("bert_encoder", BertEncoder,
     [{"name": "input_ids", "shape": [1, BERT_SEQ], "dtype": "int64"}],
     lambda gen: torch.randint(1, BERT_VOCAB, (1, BERT_SEQ), generator=gen)),
    ("transformer_encoder", _build_transformer_encoder,
     [{"name": "x", "shape": [1, BERT_SEQ, BERT_HIDDEN], "dtype": "float32"}],
     lambda gen: torch.randn(1, BERT_SEQ, BERT_HIDDEN, generator=gen)),
]


def export_transformer(name, factory, meta, make_input, outdir):
    t0 = time.time()
    torch.manual_seed(SEED)
    model = factory().eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, make_input(torch.Generator().manual_seed(SEED + 1)))
    rel = f"{name}.pt"
    path = os.path.join(outdir, rel)
    _save(traced, path, meta, f"kiln transformer {name}, random weights, seed {SEED}")
    x = make_input(torch.Generator().manual_seed(CHECK_SEED))
    loaded = torch.jit.load(path).eval()
    with torch.no_grad():
        y = loaded(x)
        y_ref = model(x)
    y0, r0 = (y[0], y_ref[0]) if isinstance(y, tuple) else (y, y_ref)
    _check_alive(f"transformer {name}", y, 0.1)
    print(f"  network {name:20s} output std {y0.std().item():.4f}  |saved-eager| "
          f"{(y0 - r0).abs().max().item():.2e}  ({time.time() - t0:.1f}s)", flush=True)
    entry = {"name": name, "file": rel, "kind": "network", "inputs": meta,
             "rtol": NETWORK_TOL, "atol": NETWORK_TOL}
    if name in ONNX_MODELS:
        entry["onnx"] = _export_onnx(model, (make_input(torch.Generator().manual_seed(SEED + 1)),), outdir, name,
                                     [m["name"] for m in meta])
    return entry


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



# --------------------------------------------------------------------------------------------
# Op modules for merge-parallel (O4) and fused reductions (O2): parallel branches that share an
# input, and reductions of elementwise chains.
# --------------------------------------------------------------------------------------------

class InceptionBranches(nn.Module):
    """Three 1x1 convolutions of one input (one without a bias), each with a relu, next to a 3x3
    branch, concatenated: the 1x1 convolutions merge into one at O4."""

    def __init__(self, cin=16):
        super().__init__()
        self.b1 = nn.Conv2d(cin, 16, 1)
        self.b2 = nn.Conv2d(cin, 8, 1, bias=False)
        self.b3 = nn.Conv2d(cin, 24, 1)
        self.b4 = nn.Conv2d(cin, 8, 3, padding=1)

    def forward(self, x):
        return torch.cat([torch.relu(self.b1(x)), torch.relu(self.b2(x)), torch.relu(self.b3(x)), self.b4(x)], 1)


class LinearHeads(nn.Module):
    """Two Linear heads on one input (one without a bias), joined on the feature axis: they
    merge into one dense at O4."""

    def __init__(self, k=32):
        super().__init__()
        self.a = nn.Linear(k, 10)
        self.b = nn.Linear(k, 6, bias=False)

    def forward(self, x):
        return torch.cat([self.a(x), torch.tanh(self.b(x))], -1)


OPS += [
    ("inception_parallel", lambda: InceptionBranches(), [[1, 16, 9, 9]]),
    ("linear_heads", lambda: LinearHeads(), [[5, 32]]),
    ("mean_relu_add", lambda: Binary(lambda m, x, y: torch.relu(x + y).mean(-1)), [[3, 5, 37], [3, 5, 37]]),
    ("sum_exp_broadcast", lambda: Binary(lambda m, x, y: torch.exp(x * 0.5 + y).sum([2, 3])),
     [[2, 3, 5, 7], [3, 1, 7]]),
]

# --- import breadth (issue 8): op families of transformer encoders and image models ---------

class Attention(nn.Module):
    """Scaled-dot-product attention written out by hand (as many models do), causal mask."""

    def __init__(self, d, heads, n_max=16):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.register_buffer("causal", torch.tril(torch.ones(n_max, n_max)))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(self.causal[:n, :n] == 0, float("-inf"))
        ctx = torch.matmul(F.softmax(scores, dim=-1), v)
        return self.out(ctx.transpose(1, 2).reshape(b, n, d))


def _chunk_split(m, x):
    a, b, c = x.chunk(3, -1)
    d, e = torch.split(x, [2, 3], 1)
    return torch.cat([a, b * 2.0, c], -1) + torch.cat([e, d], 1)


def _topk(m, x):
    v, i = torch.topk(x, 3, dim=1)
    w, j = torch.topk(x.transpose(1, 2), 2, dim=-1, largest=False)
    return torch.cat([v + i.float(), (w - j.float()).transpose(1, 2)], 1)


def _math_unary(m, x):
    return (torch.erf(x) + torch.exp(x * 0.5) + torch.log(x.abs() + 0.5) + torch.sqrt(x.abs())
            + torch.rsqrt(x.abs() + 1.0) - torch.neg(x) + torch.pow(x.abs() + 0.1, 1.7) + x.abs())


OPS += [
    ("slice_steps", lambda: Unary(lambda m, x: x[:, 1::2, ::3] * 2.0), [[2, 7, 11]]),
    ("select_narrow", lambda: Unary(lambda m, x: x[:, -1] + x.narrow(1, 2, 3).sum(1)), [[3, 6, 5]]),
    ("chunk_split", lambda: Unary(_chunk_split), [[2, 5, 10]]),
    ("embedding", lambda: Unary(lambda m, x: m.e((torch.sigmoid(x) * 9.99).long()), e=nn.Embedding(10, 6)), [[3, 5]]),
    ("index_select", lambda: Unary(lambda m, x: torch.index_select(x, 1, m.idx) + x[:, m.idx],
                                   idx=torch.tensor([4, 0, 2, 2, 1])), [[3, 5, 7]]),
    ("expand", lambda: Unary(lambda m, x: x.expand(3, -1, -1) + m.b.expand(3, 4, 5), b=torch.randn(4, 1)), [[1, 4, 5]]),
    ("repeat", lambda: Unary(lambda m, x: x.repeat(2, 2, 3)), [[1, 4, 5]]),
    ("masked_fill_where", lambda: Unary(lambda m, x: x.masked_fill(x > 0.5, -2.0) + torch.where(x < 0, x * 3.0, x)),
     [[3, 5, 7]]),
    ("compare_cast", lambda: Unary(lambda m, x: (x > 0.1).float() * x + (x <= -0.2).to(x.dtype)), [[4, 9]]),
    ("max_min", lambda: Unary(lambda m, x: torch.max(x, 1)[0] + torch.min(x, 1, keepdim=True)[0].squeeze(1)
                              + x.amax(1) * 0.5), [[3, 7, 5]]),
    ("argmax_argmin", lambda: Unary(lambda m, x: x.argmax(-1).float() + x.argmin(1).float() * 10.0), [[3, 5, 5]]),
    ("topk", lambda: Unary(_topk), [[2, 7, 5]]),
    # Integer and boolean outputs, which the end-to-end tests compare exactly.
    ("argmax_index", lambda: Unary(lambda m, x: x.argmax(-1)), [[3, 5, 7]]),
    ("compare_mask", lambda: Unary(lambda m, x: x > x.mean(-1, keepdim=True)), [[3, 5, 7]]),
    ("remainder", lambda: Unary(lambda m, x: torch.remainder(x * 5.0, 1.5) + torch.remainder(x * 5.0, -1.25)
                                + (x * 9.0).long().remainder(4).float()), [[3, 7]]),
    ("log_softmax", lambda: Unary(lambda m, x: F.log_softmax(x, dim=1) + F.log_softmax(x, 0)), [[4, 9, 3]]),
    ("softmax_dim0", lambda: Unary(lambda m, x: torch.softmax(x, dim=0)), [[5, 3, 4]]),
    ("layer_norm", lambda: Unary(lambda m, x: m.n(x), n=nn.LayerNorm(13)), [[3, 7, 13]]),
    ("group_norm", lambda: Unary(lambda m, x: m.n(x), n=nn.GroupNorm(3, 6)), [[2, 6, 5, 7]]),
    ("instance_norm", lambda: Unary(lambda m, x: m.n(x), n=nn.InstanceNorm2d(4, affine=True)), [[2, 4, 5, 6]]),
    ("gelu_tanh", lambda: Unary(lambda m, x: F.gelu(x * 2.0, approximate="tanh")), [S]),
    ("math_unary", lambda: Unary(_math_unary), [[3, 17]]),
    ("matmul_broadcast", lambda: Unary(lambda m, x: torch.matmul(x, m.w), w=torch.randn(7, 6)), [[2, 3, 5, 7]]),
    ("matmul_batch_broadcast", lambda: Binary(lambda m, x, y: torch.matmul(x, y)), [[2, 1, 4, 5], [3, 5, 6]]),
    ("conv1d", lambda: Unary(lambda m, x: m.c(x), c=nn.Conv1d(4, 6, 3, stride=2, padding=1)), [[2, 4, 15]]),
    ("conv_transpose2d", lambda: Unary(lambda m, x: m.c(x), c=nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                                                output_padding=1)), [[1, 4, 7, 9]]),
    ("conv_transpose2d_groups", lambda: Unary(lambda m, x: m.c(x), c=nn.ConvTranspose2d(
        4, 6, (3, 2), stride=(2, 1), padding=(1, 0), groups=2, dilation=(1, 2))), [[1, 4, 5, 6]]),
    ("upsample_nearest", lambda: Unary(lambda m, x: m.u(x), u=nn.Upsample(scale_factor=2, mode="nearest")),
     [[1, 3, 5, 7]]),
    ("upsample_nearest_size", lambda: Unary(lambda m, x: F.interpolate(x, size=(7, 4), mode="nearest")),
     [[1, 3, 5, 7]]),
    ("upsample_bilinear", lambda: Unary(lambda m, x: F.interpolate(x, size=(9, 11), mode="bilinear",
                                                                   align_corners=False)), [[1, 3, 5, 7]]),
    ("upsample_bilinear_corners", lambda: Unary(lambda m, x: F.interpolate(x, scale_factor=1.5, mode="bilinear",
                                                                           align_corners=True)), [[1, 3, 5, 7]]),
    ("pixel_shuffle", lambda: Unary(lambda m, x: m.p(x), p=nn.PixelShuffle(2)), [[1, 8, 3, 5]]),
    ("attention_causal", lambda: Unary(lambda m, x: m.a(x), a=Attention(32, 4)), [[2, 10, 32]]),
    ("mha_batch_first", lambda: Unary(lambda m, x: m.a(x, x, x, need_weights=False)[0],
                                      a=nn.MultiheadAttention(32, 4, batch_first=True)), [[2, 10, 32]]),
    ("mha_seq_first", lambda: Unary(lambda m, x: m.a(x, x, x)[0], a=nn.MultiheadAttention(32, 4)), [[10, 2, 32]]),
    ("transformer_layer", lambda: Unary(lambda m, x: m.l(x), l=nn.TransformerEncoderLayer(
        32, 4, 64, batch_first=True)), [[2, 10, 32]]),
    ("transformer_layer_norm_first_gelu", lambda: Unary(lambda m, x: m.l(x), l=nn.TransformerEncoderLayer(
        32, 4, 64, activation="gelu", batch_first=True, norm_first=True)), [[2, 9, 32]]),
    ("transformer_layer_seq_first", lambda: Unary(lambda m, x: m.l(x), l=nn.TransformerEncoderLayer(
        32, 4, 64, activation="gelu")), [[9, 2, 32]]),
]


class BranchOnValue(nn.Module):
    """Scripted: a branch on a tensor's value (prim::If on aten::Bool), compiled as an `if` node."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        if bool(x.sum() > 0):
            return torch.relu(self.a(x))
        return torch.sigmoid(self.b(x)) - x


class LoopOnValue(nn.Module):
    """Scripted: a trip count read from a tensor (prim::Loop), compiled as a `loop` node."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        n = int(x.abs().sum().item()) % 4 + 1
        h = x
        for _ in range(n):
            h = torch.tanh(self.l(h)) + x * 0.5
        return h


# Ops whose control flow tracing would lose: saved with torch.jit.script instead.
OPS += [
    ("branch_on_value", BranchOnValue, [[2, 8]]),
    ("loop_on_value", LoopOnValue, [[2, 8]]),
]
SCRIPTED_OPS = {"branch_on_value", "loop_on_value"}


def export_op(name, factory, shapes, outdir):
    torch.manual_seed(SEED)
    mod = factory().eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    example = tuple(torch.randn(*s, generator=gen) for s in shapes)
    with torch.no_grad():
        traced = torch.jit.script(mod) if name in SCRIPTED_OPS else torch.jit.trace(mod, example)
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
    entry = {"name": name, "file": rel, "kind": "op", "inputs": meta, "rtol": OP_TOL, "atol": OP_TOL}
    if name in ONNX_MODELS:
        entry["onnx"] = _export_onnx(mod, example, outdir, name, [m["name"] for m in meta])
    return entry


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


def _bad_unsupported_onnx(outdir, rel):
    """An ONNX file with an operator Kiln's ONNX importer does not map (CumSum)."""
    torch.manual_seed(SEED)
    mod = Unary(lambda m, x: torch.cumsum(m.c(x), dim=1), c=nn.Conv2d(4, 4, 3, padding=1)).eval()
    torch.onnx.export(mod, torch.randn(1, 4, 8, 8), os.path.join(outdir, rel), opset_version=ONNX_OPSET,
                      input_names=["x"])


class ShapeChangingIf(nn.Module):
    """Scripted: a branch on a tensor's value whose two sides return different shapes (the shape
    of the result depends on the data, which Kiln's static shapes cannot hold)."""

    def forward(self, x):
        if bool(x.sum() > 0):
            return torch.relu(x[:, :4])
        return -x


class GrowingLoop(nn.Module):
    """Scripted: a trip count read from a tensor (prim::Loop) whose carried tensor grows each step."""

    def forward(self, x):
        n = int(x.abs().sum().item()) % 4
        for _ in range(n):
            x = torch.cat([x, x[:, :1] * 0.5], 1)
        return x


def _bad_scripted(cls, marker):
    def write(outdir, rel):
        path = os.path.join(outdir, rel)
        _save(torch.jit.script(cls().eval()), path, _inputs_meta([[2, 8]]),
              f"kiln bad fixture: scripted {cls.__name__} (control flow with data-dependent shapes)")
        kinds = {n.kind() for n in torch.jit.load(path).graph.nodes()}
        if marker not in kinds:
            raise SystemExit(f"error: {rel} lacks {marker}: {sorted(kinds)}")
    return write


# "expect" is a substring the error message must contain. For files libtorch cannot open, the
# importer says why the file is not a TorchScript archive (empty, not a zip, truncated, a torch.save
# pickle, no constants.pkl/data.pkl).
BAD = [
    ("truncated", "bad/truncated.pt", _bad_truncated, "not a TorchScript archive"),
    ("not_a_model", "bad/not_a_model.pt", _bad_not_a_model, "not a TorchScript archive"),
    ("unsupported_op", "bad/unsupported_op.pt", _bad_unsupported, "aten::grid_sampler"),
    ("unsupported_onnx_op", "bad/unsupported_op.onnx", _bad_unsupported_onnx, "onnx::CumSum"),
    ("control_flow_if", "bad/control_flow_if.pt", _bad_scripted(ShapeChangingIf, "prim::If"), "prim::If"),
    ("control_flow_loop", "bad/control_flow_loop.pt", _bad_scripted(GrowingLoop, "prim::Loop"), "prim::Loop"),
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

    all_names = NETWORKS + QUANTIZED_NETWORKS + QAT_NETWORKS + [n for n, *_ in QUANTIZED_OPS] + [n for n, *_ in TRANSFORMERS] + [n for n, _, _ in OPS] + [n for n, *_ in BAD]
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
    for name in QUANTIZED_NETWORKS + QAT_NETWORKS:
        if wanted(name):
            models.append(export_quantized_network(name, outdir))
    for name, factory, shape, step in QUANTIZED_OPS:
        if wanted(name):
            models.append(export_quantized_op(name, factory, shape, step, outdir))
    for name, factory, meta, make_input in TRANSFORMERS:
        if wanted(name):
            models.append(export_transformer(name, factory, meta, make_input, outdir))
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
