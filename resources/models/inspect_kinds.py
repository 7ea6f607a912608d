#!/usr/bin/python3
"""List the distinct TorchScript node kinds (aten::*, prim::*) in exported models.

Usage:
    /usr/bin/python3 resources/models/inspect_kinds.py OUTDIR [--kind network|op|all] [--per-model]

For each model in OUTDIR/manifest.json, two views are printed:
  raw   torch._C._freeze_module + inlining, no optimisation passes: what the C++ importer sees
        after torch::jit::freeze_module (no conv-bn folding, dropout still present, ...);
  opt   plain torch.jit.freeze (runs the frozen-graph optimisations: conv-bn folding, dropout
        removal, ...), for comparison only.
"""

import argparse
import json
import os
import sys

import torch


def kinds(path, optimized):
    mod = torch.jit.load(path).eval()
    if optimized:
        graph = torch.jit.freeze(mod).graph
    else:
        graph = torch._C._freeze_module(mod._c).forward.graph
    torch._C._jit_pass_inline(graph)
    out = set()

    def walk(block):
        for n in block.nodes():
            out.add(n.kind())
            for b in n.blocks():
                walk(b)

    walk(graph)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--kind", default="all", choices=["network", "op", "all"])
    ap.add_argument("--per-model", action="store_true")
    args = ap.parse_args()
    with open(os.path.join(args.outdir, "manifest.json")) as f:
        manifest = json.load(f)
    union = {False: set(), True: set()}
    for m in manifest["models"]:
        if args.kind != "all" and m["kind"] != args.kind:
            continue
        path = os.path.join(args.outdir, m["file"])
        for opt in (False, True):
            k = kinds(path, opt)
            union[opt] |= k
            if args.per_model:
                print(f"{m['name']} [{'opt' if opt else 'raw'}]: {' '.join(sorted(k))}")
    for opt in (False, True):
        print(f"UNION [{'opt' if opt else 'raw'}] ({args.kind}): {' '.join(sorted(union[opt]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
