"""kiln.compile against the modules' own outputs (today's torch), and its errors."""
import os
import time

import numpy as np
import pytest
import torch
import torch.nn as nn

import kiln
from conftest import assert_close


def live_bn(bn):
    """BatchNorm with non-trivial statistics (fresh ones are the identity)."""
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
    return bn


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = live_bn(nn.BatchNorm2d(16))
        self.conv2 = nn.Conv2d(16, 8, 3, stride=2, padding=1, bias=False)
        self.bn2 = live_bn(nn.BatchNorm2d(8))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)))


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 6)

    def forward(self, x, bias):
        h = self.fc(x) + bias
        return torch.softmax(h, dim=-1), h.sum(dim=0)


class Cumsum(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1) * 2


def reference(module, *inputs):
    with torch.no_grad():
        return module.eval()(*inputs)


def test_conv_bn_relu_matches_the_module():
    m = ConvBnRelu()
    x = torch.randn(1, 3, 20, 20)
    fast = kiln.compile(m, (x,), opt_level=3, threads=2)
    assert_close(fast(x), reference(m, x))
    x2 = torch.randn(1, 3, 20, 20)  # another input of the same shape: not a replay of the example
    assert_close(fast(x2), reference(m, x2))
    assert "kernels" in fast.compile_log
    assert fast.inputs == [{"name": "x", "dtype": "f32", "shape": (1, 3, 20, 20)}]


@pytest.mark.parametrize("opt_level", [0, 2, 4])
def test_opt_levels_match(opt_level):
    m = ConvBnRelu()
    x = torch.randn(2, 3, 9, 13)  # odd sizes: no tile divides them
    assert_close(kiln.compile(m, x, opt_level=opt_level)(x), reference(m, x), rtol=1e-3 if opt_level == 4 else 1e-4)


@pytest.mark.parametrize("winograd", [2, 0])
def test_winograd_tiles_match(winograd):
    # A 3x3 conv with 32 channels on 14x14 (196 outputs): F(4x4) by default, F(2x2) or direct here.
    m = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
    x = torch.randn(1, 32, 14, 14)
    assert_close(kiln.compile(m, x, winograd=winograd, cache=False)(x), reference(m, x))


def test_mlp_matches_the_module():
    m = mlp()
    x = torch.randn(4, 32)
    fast = kiln.compile(m, (x,))
    assert_close(fast(x), reference(m, x))


def test_numpy_inputs_give_torch_outputs():
    m = mlp()
    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    fast = kiln.compile(m, (x,))  # numpy example inputs too
    y = fast(x)
    assert isinstance(y, torch.Tensor)
    assert_close(y, reference(m, torch.from_numpy(x)))
    assert torch.equal(y, fast(torch.from_numpy(x)))
    # A non-contiguous tensor is made contiguous, not misread.
    xt = torch.from_numpy(np.ascontiguousarray(x.T)).t()
    assert not xt.is_contiguous()
    assert torch.equal(fast(xt), y)


def test_two_inputs_and_two_outputs():
    m = TwoOutputs()
    x, b = torch.randn(5, 12), torch.randn(6)
    fast = kiln.compile(m, (x, b))
    out = fast(x, b)
    assert isinstance(out, tuple) and len(out) == 2
    ref = reference(m, x, b)
    assert_close(out[0], ref[0])
    assert_close(out[1], ref[1])
    assert [d["name"] for d in fast.inputs] == ["x", "bias"]


def test_integer_inputs():
    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 8)

        def forward(self, ids):
            return self.emb(ids).mean(dim=1)

    m = Embed()
    ids = torch.randint(0, 50, (3, 7))
    fast = kiln.compile(m, ids)
    assert_close(fast(ids), reference(m, ids))


def test_a_second_input_shape_is_a_second_compile():
    m = ConvBnRelu()
    small, large = torch.randn(1, 3, 16, 16), torch.randn(3, 3, 24, 24)
    f_small, f_large = kiln.compile(m, small), kiln.compile(m, large)
    assert_close(f_small(small), reference(m, small))
    assert_close(f_large(large), reference(m, large))
    assert f_small.module_dir != f_large.module_dir
    with pytest.raises(kiln.KilnError) as e:
        f_small(large)
    assert e.value.kind == "invalid-input" and e.value.code == 5
    assert "shape [3,3,24,24], expected [1,3,16,16]" in e.value.message


def test_threads_set_the_runtime_pool():
    m = mlp()
    x = torch.randn(4, 32)
    one = kiln.compile(m, x, threads=1)
    y1 = one(x)
    assert kiln.num_threads() == 1
    two = kiln.compile(m, x, threads=2)
    assert torch.allclose(two(x), y1, rtol=1e-5, atol=1e-6)
    assert kiln.num_threads() == 2


def test_training_mode_is_compiled_as_eval_and_restored():
    m = ConvBnRelu().train()
    x = torch.randn(2, 3, 8, 8)
    fast = kiln.compile(m, x)
    assert m.training  # left as it was
    assert_close(fast(x), reference(m, x))  # the eval-mode function (running statistics)


def test_bad_inputs_raise_clear_errors():
    m = TwoOutputs()
    x, b = torch.randn(5, 12), torch.randn(6)
    fast = kiln.compile(m, (x, b))
    cases = [
        ((x.double(), b), "input 0 ('x') has dtype f64, expected f32"),
        ((x, torch.randn(7)), "input 1 ('bias') has shape [7], expected [6]"),
        ((x,), "the module takes 2 input(s), got 1"),
        ((x, [1.0] * 6), "input 1 ('bias') is a list, expected a tensor or numpy array"),
        ((x.numpy().astype(np.int64), b), "input 0 ('x') has dtype i64, expected f32"),
    ]
    for args, message in cases:
        with pytest.raises(kiln.KilnError) as e:
            fast(*args)
        assert e.value.message == message
        assert e.value.kind == "invalid-input"
    # The extension checks too (what reaches it without the Python checks).
    rt = fast._rt
    with pytest.raises(kiln.KilnError, match="has dtype f64, expected f32"):
        rt.run([x.double().numpy(), b.numpy()])
    with pytest.raises(kiln.KilnError, match="is not C-contiguous"):
        rt.run([np.asfortranarray(np.zeros((5, 12), np.float32)), b.numpy()])
    with pytest.raises(kiln.KilnError, match="is a str, not an array"):
        rt.run(["nope", b.numpy()])
    with pytest.raises(kiln.KilnError, match="takes 2 input"):
        rt.run([x.numpy()])
    # Still usable afterwards.
    assert_close(fast(x, b)[0], reference(m, x, b)[0])


def test_unsupported_operator_is_a_kiln_error():
    with pytest.raises(kiln.KilnError) as e:
        kiln.compile(Cumsum(), torch.randn(2, 5))
    assert e.value.kind == "unsupported" and e.value.code == 4
    assert e.value.message.startswith("Cumsum: aten::cumsum is not supported (")
    assert "test_compile.py" in e.value.message  # where, in the user's source


def test_usage_errors():
    m = mlp()
    x = torch.randn(4, 32)
    with pytest.raises(kiln.KilnError, match="opt_level must be 0-4") as e:
        kiln.compile(m, x, opt_level=7)
    assert e.value.kind == "usage"
    with pytest.raises(kiln.KilnError, match="winograd must be 4, 2 or 0") as e:
        kiln.compile(m, x, winograd=3)
    assert e.value.kind == "usage"
    with pytest.raises(kiln.KilnError, match="no such file") as e:
        kiln.compile(m, x, records="/nonexistent/records.jsonl")
    assert e.value.kind == "io"
    with pytest.raises(kiln.KilnError) as e:
        kiln.compile(m, x, target="llvm -mcpu=nosuchcpu")
    assert e.value.kind == "unknown-target" and e.value.code == 8
    with pytest.raises(kiln.KilnError, match="example input 0 is a str"):
        kiln.compile(m, ("x",))
    with pytest.raises(kiln.KilnError, match="complex64"):
        kiln.compile(m, torch.randn(4, 32, dtype=torch.complex64))


def test_missing_kiln_command(monkeypatch):
    monkeypatch.setenv("KILN_CLI", "/nonexistent/kiln")
    with pytest.raises(kiln.KilnError, match="cannot run the kiln command") as e:
        kiln.compile(mlp(), torch.randn(2, 32), cache=False)
    assert e.value.kind == "io"


def test_the_cache_keeps_the_recently_used_modules_within_its_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    m, x1, x2, x3 = mlp(), torch.randn(1, 32), torch.randn(2, 32), torch.randn(3, 32)
    first = kiln.compile(m, x1)
    size_mb = sum(f.stat().st_size for f in (tmp_path / "cache").rglob("*") if f.is_file()) / 2**20
    # Room for about two such modules: the third compile evicts the least recently used one.
    monkeypatch.setenv("KILN_CACHE_MAX_MB", str(size_mb * 2.5))
    second = kiln.compile(m, x2)
    assert os.path.isdir(first.module_dir) and os.path.isdir(second.module_dir)
    os.utime(second.module_dir, (1, 1))  # used long ago; `first` is used again now:
    again = kiln.compile(m, x1)
    assert again.module_dir == first.module_dir
    third = kiln.compile(m, x3)
    assert os.path.isdir(first.module_dir) and os.path.isdir(third.module_dir)
    assert not os.path.exists(second.module_dir)
    # A module whose files were evicted keeps running (its kernels stay mapped).
    assert_close(second(x2), reference(m, x2))
    # A staging directory a killed compile left behind goes once it is an hour old.
    stale = tmp_path / "cache" / ".compiling-stale"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200,) * 2)
    kiln.prune_cache()
    assert not stale.exists()
    assert kiln.clear_cache() == 2
    assert [p for p in (tmp_path / "cache").iterdir()] == []
    # Compiling after a clear works and caches again.
    assert_close(kiln.compile(m, x1)(x1), reference(m, x1))


def test_not_a_module_directory(tmp_path):
    with pytest.raises(kiln.KilnError) as e:
        kiln._runtime.Module(str(tmp_path))
    assert e.value.kind in ("invalid-model", "io")


@pytest.mark.slow
def test_resnet18_matches_the_module():
    torchvision = pytest.importorskip("torchvision")
    m = torchvision.models.resnet18(weights=None, num_classes=10)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            live_bn(mod)
    x = torch.randn(1, 3, 64, 64)
    fast = kiln.compile(m, x, threads=2)
    assert_close(fast(x), reference(m, x), rtol=1e-3)
