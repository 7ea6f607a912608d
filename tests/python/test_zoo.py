"""Issue 18's breadth check under pytest: every classification and segmentation architecture the
installed torchvision lists (so new ones join by themselves), built with random weights and
calibrated batch norms, traced at batch 1, compiled by Kiln at -O3 and compared with the module's
own outputs (max |diff| / scale <= 1e-3). scripts/zoo.py does the work, one child process per
architecture; `scripts/zoo.sh` prints the same check as a table.

ctest runs the list in shards (python_zoo_K_of_N: KILN_ZOO_SHARD=K/N takes every N-th name)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import zoo  # noqa: E402

# Architectures Kiln does not compile or match yet: name -> (verdict, what stops it). Each still
# runs: if it passes, or fails differently, the test fails, so this list stays true.
KNOWN = {
    # Two dilated ResNet-101 segmentation nets with random weights end just over the bound:
    # fcn_resnet101 1.1e-3 and deeplabv3_resnet101 1.4e-3 of the output's scale from PyTorch.
    # Against an fp64 run of the same module PyTorch's own fp32 output is already 5-7e-4 off, so
    # the bound is about twice fp32's noise on these nets, and Winograd F(4x4, 3x3) (-O3's choice
    # for 3x3 convolutions with >= 196 outputs) rounds more than the direct kernel. Its points
    # 0, +-1, 1/2, -2 (+-1/2 before) brought resnet152 under the bound (1.07e-3
    # -> 9.3e-4) and these two closer (1.4e-3 -> 1.1e-3, 1.66e-3 -> 1.39e-3). Kiln keeps F(4x4)
    # by default (F(2x2) costs 4-18 % on the sample ResNets); with --winograd 0 they match
    # (test_deep_resnets_match_with_direct_convolutions below). Most of the gap comes from the
    # first stage (64 channels at 130x130): with F(2x2) for every layer above 64 channels it stays
    # 1.03e-3 / 1.43e-3; with F(2x2) everywhere (--winograd 2) it is 8.5e-4 / 1.02e-3, Kiln then
    # 5.4e-4 / 8.4e-4 from fp64 against PyTorch's 5.5e-4 / 7.4e-4 (2026-12-07).
    "deeplabv3_resnet101": ("wrong", "max |diff| / scale"),
    "fcn_resnet101": ("wrong", "max |diff| / scale"),
}


def _shard(items):
    spec = os.environ.get("KILN_ZOO_SHARD", "1/1")
    k, n = (int(v) for v in spec.split("/"))
    return [item for i, item in enumerate(items) if i % n == k - 1]


@pytest.mark.slow
@pytest.mark.parametrize("name,kind", _shard(zoo.architectures()), ids=lambda v: v if isinstance(v, str) else "")
def test_architecture_imports_and_matches_pytorch(name, kind):
    row = zoo.check_in_child(name, kind, timeout=900)
    message = row.get("message", "")
    if name in KNOWN:
        verdict, reason = KNOWN[name]
        assert row["status"] != "passed", f"{name} passes now: remove it from KNOWN"
        assert row["status"] == verdict and reason in message, (
            f"{name} fails differently than KNOWN says ({verdict}: {reason}): {row['status']}: {message}")
        pytest.xfail(f"{verdict}: {message}")
    assert row["status"] == "passed", f"{name}: {row['status']}: {message}"
    assert row["rel_diff"] <= zoo.TOLERANCE


# The KNOWN deep ResNets with direct convolutions only (kiln --winograd 0): their gap above is
# Winograd F(4x4)'s rounding (measured: fcn_resnet101 8.8e-4, deeplabv3_resnet101 9.6e-4 of the
# scale, against 1.1e-3 and 1.4e-3 with F(4x4)).
@pytest.mark.slow
@pytest.mark.parametrize("name,kind", [(n, k) for n, k in _shard(zoo.architectures()) if n in KNOWN],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_deep_resnets_match_with_direct_convolutions(name, kind):
    row = zoo.check_in_child(name, kind, timeout=900, winograd=0)
    assert row["status"] == "passed", f"{name} with --winograd 0: {row['status']}: {row.get('message', '')}"
