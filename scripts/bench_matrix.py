#!/usr/bin/python3
"""Kiln against today's engines: `kiln compare` over models x batch sizes, Kiln untuned and tuned.

For each model and batch size:
  1. `kiln tune MODEL --batch B --records OUT/MODEL_bB.jsonl` with a wall-clock limit (skipped when
     that records file exists: rerunning the script times again without tuning again);
  2. `kiln compare MODEL --batch B --records that-file`: every row in a worker process of its own,
     repeats alternating round-robin (README: how Kiln measures): pytorch-eager, torch-compile,
     torchscript-optimized, onnxruntime, openvino, kiln-untuned and kiln (tuned);
then prints one table (median ms, and each row's speed relative to pytorch-eager and to Kiln tuned)
and writes every compare's JSON to OUT.

Needs a built tree (scripts/build.sh) and Kiln's Python environment (scripts/install-deps.sh).

Usage: scripts/bench_matrix.py [--models a,b,...] [--batches 1,8] [--threads 2] [--repeat 15]
                               [--tune-seconds 150] [--out DIR] [--backends a,b,...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mobilenet_v2", "efficientnet_b0", "resnet18", "resnet50", "mobilenet_v3_small", "bert_encoder"]
BACKENDS = ["pytorch-eager", "torch-compile", "torchscript-optimized", "onnxruntime", "openvino", "kiln"]


def run(cmd, log):
    """Runs a kiln command; its output goes to `log`. A compare whose rows partly failed exits
    non-zero but still writes its JSON, which says per row what happened."""
    with open(log, "w") as f:
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--tune-seconds", type=float, default=150, help="wall-clock limit of each tuning run")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "app", "kiln"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-matrix"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    models = [m for m in a.models.split(",") if m]
    batches = [int(b) for b in a.batches.split(",") if b]
    common = ["--threads", str(a.threads), "--no-store"]
    results = {}
    started = time.time()
    for model in models:
        path = os.path.join(a.models_dir, model + ".pt")
        for batch in batches:
            name = f"{model}_b{batch}"
            records = os.path.join(a.out, name + ".jsonl")
            if not os.path.exists(records):
                t0 = time.time()
                partial = records + ".partial"
                if os.path.exists(partial):
                    os.remove(partial)
                rc = run([a.kiln, "tune", path, "--batch", str(batch), "--records", partial, "--time-limit",
                          str(a.tune_seconds), "--no-compare"] + common, os.path.join(a.out, name + ".tune.log"))
                if rc != 0:
                    print(f"{name}: kiln tune failed (exit {rc}); see {name}.tune.log", file=sys.stderr)
                    continue
                os.replace(partial, records)
                print(f"{name}: tuned in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
            out = os.path.join(a.out, name + ".json")
            rc = run([a.kiln, "compare", path, "--batch", str(batch), "--records", records, "--repeat", str(a.repeat),
                      "--backends", a.backends, "--json", out] + common, os.path.join(a.out, name + ".compare.log"))
            if not os.path.exists(out):
                print(f"{name}: kiln compare failed (exit {rc}); see {name}.compare.log", file=sys.stderr)
                continue
            with open(out) as f:
                results[(model, batch)] = json.load(f)
            print(f"{name}: compared", file=sys.stderr, flush=True)

    rows = []
    for result in results.values():
        for b in result["backends"]:
            if b["backend"] not in rows:
                rows.append(b["backend"])
    print(f"Median ms per call, {a.threads} threads (x: speed-up over pytorch-eager; "
          f"'kiln' is tuned with --records, 'kiln-untuned' is the same build without; "
          f"✗: outputs differ from eager's beyond 1e-3 of their scale).")
    print("| model | batch | " + " | ".join(rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    for (model, batch), result in results.items():
        by = {b["backend"]: b for b in result["backends"]}
        eager = by.get("pytorch-eager", {}).get("median_ms") if by.get("pytorch-eager", {}).get("available") else None
        cells = []
        for r in rows:
            b = by.get(r)
            if not b or not b.get("available") or b.get("status", "ok") != "ok":
                cells.append((b or {}).get("status", "-"))
                continue
            ms = b["median_ms"]
            # ✗: its outputs lie beyond tolerance from eager's (kiln compare's outputs_agree).
            cells.append(f"{ms:.2f}" + (f" ({eager / ms:.2f}x)" if eager else "") +
                         (" ✗" if b.get("outputs_agree") is False else ""))
        print(f"| {model} | {batch} | " + " | ".join(cells) + " |")
    print(f"\n{time.time() - started:.0f} s; JSON and logs in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
