"""kiln.torch.optimize: torch.compile with Kiln as the backend; unsupported parts run in PyTorch."""
import pytest
import torch
import torch.nn as nn

import kiln
from conftest import assert_close
from test_compile import ConvBnRelu, live_bn, reference


class WithCumsum(nn.Module):
    """Kiln refuses aten::cumsum; everything else here it compiles."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = live_bn(nn.BatchNorm2d(8))
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        z = torch.cumsum(y, dim=-1)
        return self.fc(y.mean((2, 3)) + z.mean((2, 3)))


class WithFft(nn.Module):
    """A complex intermediate: a dtype Kiln does not compile."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(9, 5)

    def forward(self, x):
        spectrum = torch.fft.rfft(torch.tanh(x), dim=-1).abs()
        return torch.sigmoid(self.fc(spectrum))


class DataDependent(nn.Module):
    """A branch on a tensor's value: dynamo breaks the graph there; each side is compiled."""

    def __init__(self):
        super().__init__()
        self.net = ConvBnRelu()

    def forward(self, x):
        y = self.net(x)
        if y.mean() > 0.1:
            return y * 2
        return y - 1


def test_supported_module_is_compiled_whole():
    m = ConvBnRelu()
    opt = kiln.torch.optimize(m, threads=2)
    x = torch.randn(1, 3, 12, 12)
    assert_close(opt(x), reference(m, x))
    report = opt.report()
    assert len(report.graphs) == 1 and not report.fallbacks
    (sub,) = report.graphs[0].subgraphs
    assert sub.compiled and sub.calls == 1
    assert_close(opt(x), reference(m, x))
    assert sub.calls == 2  # Kiln's code ran, not PyTorch
    assert "f32[1,3,12,12]" in report.text()


def test_unsupported_operator_falls_back_and_the_rest_is_compiled():
    m = WithCumsum()
    opt = kiln.torch.optimize(m, threads=2)
    x = torch.randn(1, 3, 10, 10)
    assert_close(opt(x), reference(m, x))
    report = opt.report()
    (graph,) = report.graphs
    (fallback,) = report.fallbacks
    assert fallback.ops == ["aten::cumsum"]
    assert "aten::cumsum is not supported" in fallback.reason
    compiled = report.compiled
    assert len(compiled) == 2  # before and after the cumsum
    assert "aten::_convolution" in compiled[0].ops and "aten::linear" in compiled[1].ops
    assert all(s.calls == 1 for s in compiled)
    assert graph.compiled_ops == graph.total_ops - 1
    text = report.text()
    assert "pytorch  aten::cumsum: aten::cumsum is not supported" in text


def test_whole_graph_fallback_without_partitioning():
    m = WithCumsum()
    opt = kiln.torch.optimize(m, partition=False)
    x = torch.randn(1, 3, 6, 6)
    assert_close(opt(x), reference(m, x))
    (fallback,) = opt.report().fallbacks
    assert "aten::cumsum is not supported" in fallback.reason
    assert not opt.report().compiled


def test_complex_dtype_falls_back():
    m = WithFft()
    opt = kiln.torch.optimize(m)
    x = torch.randn(3, 16)
    assert_close(opt(x), reference(m, x))
    report = opt.report()
    assert any("complex64" in s.reason for s in report.fallbacks)
    compiled_ops = [op for s in report.compiled for op in s.ops]
    assert "aten::linear" in compiled_ops and "aten::sigmoid" in compiled_ops


def test_a_new_input_shape_compiles_again():
    m = WithCumsum()
    opt = kiln.torch.optimize(m)
    a, b = torch.randn(1, 3, 8, 8), torch.randn(2, 3, 11, 7)
    assert_close(opt(a), reference(m, a))
    assert_close(opt(b), reference(m, b))
    assert_close(opt(a), reference(m, a))
    sigs = [g.signature for g in opt.report().graphs]
    assert sigs == ["f32[1,3,8,8]", "f32[2,3,11,7]"]


def test_graph_breaks_run_in_python_and_both_sides_compile():
    m = DataDependent()
    opt = kiln.torch.optimize(m)
    x = torch.randn(1, 3, 8, 8)
    assert_close(opt(x), reference(m, x))
    report = opt.report()
    assert len(report.graphs) >= 2  # the graph break
    assert report.compiled and report.compiled[0].calls == 1


def test_changed_weights_are_compiled_in():
    m = ConvBnRelu()
    opt = kiln.torch.optimize(m)
    x = torch.randn(1, 3, 12, 12)
    assert_close(opt(x), reference(m, x))
    with torch.no_grad():  # an in-place update, as an optimizer step makes
        m.conv1.weight.mul_(-0.5)
        m.bn2.running_mean.add_(0.3)
    assert_close(opt(x), reference(m, x))
    other = ConvBnRelu()  # load_state_dict copies into the same tensors
    m.load_state_dict(other.state_dict())
    assert_close(opt(x), reference(m, x))
    assert_close(opt(x), reference(m, x))
    (sub,) = opt.report().compiled
    assert sub.calls == 4 and sub.recompiles == 2
    assert "compiled again for new weights 2x" in opt.report().text()


def test_not_a_module():
    with pytest.raises(kiln.KilnError, match="takes an nn.Module") as e:
        kiln.torch.optimize(lambda x: x)
    assert e.value.kind == "usage"
