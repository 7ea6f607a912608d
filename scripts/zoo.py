#!/usr/bin/env python3
"""Imports every torchvision classification and segmentation architecture into Kiln and checks it
against PyTorch: the breadth check of issue 18.

The list comes from the installed torchvision itself (torchvision.models.list_models for the
classification and segmentation modules), so a new architecture joins by itself. Each model is
built with random weights (weights=None, torchvision's own initialisation), its batch-norm
statistics calibrated on random batches so that activations stay O(1) in eval mode (running
mean and variance set to what the layers really see, as a trained network's are), then traced
at batch 1 by kiln.compile (Kiln's Python package: `kiln compile` at -O3 in a subprocess) and
its outputs compared with the module's own under torch.inference_mode:
    max |Kiln - PyTorch| / max(max |PyTorch|, 1)  <=  1e-3.
Rows past a quarter of the tolerance also say how far PyTorch's f32 outputs and Kiln's are from
the model run in f64 (the exact answer up to f64 rounding), by the same measure.
Every model runs in a child process of its own (a crash, a hang or a huge model costs only its
row; --timeout seconds each) and gets one of these verdicts:
    passed       imported, compiled and matched
    refused      Kiln said it cannot compile it (kind "unsupported"): the message names the op
    wrong        compiled and ran, but the outputs differ beyond the tolerance
    error        anything else (Kiln's message, or the child's last line)
    untraceable  torch.jit.trace itself failed (not Kiln's to fix)
    timeout      over --timeout seconds

Usage (Kiln's Python environment, with build/python on PYTHONPATH; scripts/zoo.sh does both):
    scripts/zoo.py [--models a,b,...] [--json FILE] [--timeout S] [--opt-level N] [--tolerance T]
                   [--winograd 4|2|0]
    scripts/zoo.py --list
tests/python/test_zoo.py runs the same check per architecture under pytest (ctest: python_zoo).
"""
import argparse
import json
import os
import subprocess
import sys
import time

TOLERANCE = 1e-3
# Input sizes other than 224 × 224: what the architecture was designed for.
INPUT_SIZE = {"inception_v3": 299}


def architectures():
    """(name, kind) of every classification and segmentation model the installed torchvision lists."""
    import torchvision
    out = [(n, "classification") for n in sorted(torchvision.models.list_models(module=torchvision.models))]
    out += [(n, "segmentation") for n in sorted(torchvision.models.list_models(module=torchvision.models.segmentation))]
    return out


def _wake_zero_weights(model):
    """Gives every all-zero weight matrix or kernel random values (normal, std 1/sqrt(fan-in)):
    torchvision zero-initialises some heads (ViT's), and a zero head makes every output 0, so the
    comparison would prove nothing."""
    import torch
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(0.0, 1.0 / max(1, p[0].numel()) ** 0.5)
    return model


def _calibrate(model, size, batches=2):
    """Sets every batch norm's running statistics to the mean and variance of what it sees on random
    inputs (cumulative average over `batches` batches of 2), then eval mode. (Images with a contrast
    and brightness of their own each, tried so that deeplabv3's globally pooled branch would not
    see a variance near zero, left its error where it was and sent efficientnet_v2_l's outputs
    from O(1) to 1e5 on the plain noise it is checked on.)"""
    import torch
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a plain average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(2, 3, size, size))
    return model.eval()


class _Outputs:
    """Wraps a model whose forward returns a dict (segmentation: "out", "aux") or a named tuple
    (googlenet, inception) into one returning a plain tuple, which tracing keeps."""

    @staticmethod
    def wrap(model):
        import torch

        class Values(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                out = self.inner(x)
                if isinstance(out, dict):
                    return tuple(out.values())
                if isinstance(out, tuple):
                    return tuple(out)
                return out

        return Values(model).eval()


def check_one(name, kind, opt_level=3, tolerance=TOLERANCE, winograd=4):
    """Builds, calibrates, compiles and compares one architecture in this process; returns its row."""
    import torch
    import torchvision
    import kiln

    torch.manual_seed(0)
    size = INPUT_SIZE.get(name, 224)
    row = {"name": name, "kind": kind, "input": [1, 3, size, size]}
    started = time.time()
    # No pretrained weights anywhere (segmentation models would fetch their backbone's otherwise).
    extra = {"weights_backbone": None} if kind == "segmentation" else {}
    model = torchvision.models.get_model(name, weights=None, **extra)
    model = _Outputs.wrap(_calibrate(_wake_zero_weights(model), size))
    row["params_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
    x = torch.randn(1, 3, size, size)
    with torch.inference_mode():
        expected = model(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    try:
        compiled = kiln.compile(model, (x,), opt_level=opt_level, cache=False, winograd=winograd)
    except kiln.KilnError as e:
        row["seconds"] = round(time.time() - started, 1)
        if e.message.startswith("cannot trace"):
            return {**row, "status": "untraceable", "message": e.message}
        return {**row, "status": "refused" if e.kind == "unsupported" else "error", "message": e.message}
    actual = compiled(x)
    actual = list(actual) if isinstance(actual, (tuple, list)) else [actual]
    row["seconds"] = round(time.time() - started, 1)
    if len(actual) != len(expected):
        return {**row, "status": "wrong", "message": f"{len(actual)} outputs, PyTorch gives {len(expected)}"}
    if all(float(e.abs().max()) == 0.0 for e in expected):
        return {**row, "status": "wrong", "message": "PyTorch's outputs are all zero: the comparison proves nothing"}
    worst = 0.0
    for a, e in zip(actual, expected):
        if tuple(a.shape) != tuple(e.shape):
            return {**row, "status": "wrong", "message": f"output shape {list(a.shape)}, PyTorch gives {list(e.shape)}"}
        diff = _rel_diff(a, e)
        if diff != diff:
            return {**row, "status": "wrong", "message": "NaN in the output", "rel_diff": float("nan")}
        worst = max(worst, diff)
    row["rel_diff"] = worst
    if worst > tolerance / 4:
        row.update(_exact_diffs(model, x, expected, actual))
    if worst > tolerance:
        return {**row, "status": "wrong", "message": f"max |diff| / scale {worst:.3g} > {tolerance:g}"}
    return {**row, "status": "passed"}


def _rel_diff(output, reference):
    """max |output - reference| / max(max |reference|, 1): the zoo's one measure."""
    return float((output.double() - reference.double()).abs().max()) / max(float(reference.abs().max()), 1.0)


def _exact_diffs(model, x, expected, actual):
    """How far PyTorch's f32 outputs and Kiln's are from the exact ones (the model in f64), for rows
    near or over the tolerance: a deep network can magnify f32 rounding until PyTorch itself is
    several 1e-4 off, and then two f32 computations differ by the sum of their errors."""
    import copy
    import torch
    try:
        with torch.inference_mode():
            exact = copy.deepcopy(model).double()(x.double())
    except Exception:  # an op without f64 kernels: no exact reference
        return {}
    exact = list(exact) if isinstance(exact, tuple) else [exact]
    def worst(outputs):
        return max(_rel_diff(o, r) for o, r in zip(outputs, exact))
    return {"torch_vs_f64": worst(expected), "kiln_vs_f64": worst(actual)}


def check_in_child(name, kind, timeout=900, opt_level=3, tolerance=TOLERANCE, winograd=4):
    """check_one in a fresh process: a crash or hang costs only this row."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, kind, "--opt-level", str(opt_level),
           "--tolerance", str(tolerance), "--winograd", str(winograd)]
    started = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "kind": kind, "status": "timeout", "message": f"over {timeout} s",
                "seconds": round(time.time() - started, 1)}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    return {"name": name, "kind": kind, "status": "error", "message": last[:300],
            "seconds": round(time.time() - started, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated names (default: every listed architecture)")
    ap.add_argument("--json", help="write every row as JSON")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per model")
    ap.add_argument("--opt-level", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    ap.add_argument("--winograd", type=int, default=4, choices=(4, 2, 0),
                    help="largest Winograd tile of 3x3 convolutions (kiln --winograd)")
    ap.add_argument("--list", action="store_true", help="print the architectures and quit")
    ap.add_argument("--one", nargs=2, metavar=("NAME", "KIND"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        try:
            row = check_one(a.one[0], a.one[1], a.opt_level, a.tolerance, a.winograd)
        except Exception as e:  # a failure of PyTorch or of this script: the row says so
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            row = {"name": a.one[0], "kind": a.one[1], "status": "error", "message": f"{type(e).__name__}: {first}"[:300]}
        print(json.dumps(row), flush=True)
        return 0
    listed = architectures()
    if a.list:
        for name, kind in listed:
            print(f"{name} {kind}")
        return 0
    if a.models:
        wanted = a.models.split(",")
        kinds = dict(listed)
        unknown = [m for m in wanted if m not in kinds]
        if unknown:
            print(f"error: not in torchvision's lists: {', '.join(unknown)}", file=sys.stderr)
            return 2
        listed = [(m, kinds[m]) for m in wanted]
    rows = []
    started = time.time()
    for name, kind in listed:
        row = check_in_child(name, kind, a.timeout, a.opt_level, a.tolerance, a.winograd)
        rows.append(row)
        print(f"{name:<28} {row['status']:<12} {row.get('seconds', 0):7.1f} s  {row.get('message', '')}",
              file=sys.stderr, flush=True)
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n| architecture | kind | params (M) | verdict | max rel. diff | PyTorch f32 vs f64 | Kiln vs f64 | s | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    def fmt(r, key):
        return f"{r[key]:.2g}" if key in r else "-"
    for r in rows:
        print(f"| {r['name']} | {r['kind']} | {r.get('params_m', '-')} | {r['status']} | {fmt(r, 'rel_diff')} | "
              f"{fmt(r, 'torch_vs_f64')} | {fmt(r, 'kiln_vs_f64')} | {r.get('seconds', '-')} | "
              f"{r.get('message', '').replace('|', '/')} |")
    print(f"\n{len(rows)} tried: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) +
          f" ({time.time() - started:.0f} s, tolerance {a.tolerance:g}, -O{a.opt_level})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
