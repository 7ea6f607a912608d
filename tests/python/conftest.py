"""pytest set-up for the `kiln` Python package (run by ctest's python_package tests, with
PYTHONPATH=build/python and Kiln's Python environment's interpreter)."""
import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: whole networks (run by the ctest test python_package_slow)")


@pytest.fixture(autouse=True, scope="session")
def _kiln_cache(tmp_path_factory):
    """Compiled modules go to a fresh cache: every test really compiles."""
    mp = pytest.MonkeyPatch()
    mp.setenv("KILN_CACHE_DIR", str(tmp_path_factory.mktemp("kiln-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def assert_close(actual, expected, rtol=1e-4, atol=1e-5):
    """Kiln's output against the module's own: relative tolerance against the output's scale."""
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    scale = max(float(expected.abs().max()), 1.0) if expected.numel() else 1.0
    diff = float((actual - expected).abs().max()) if expected.numel() else 0.0
    assert diff <= atol + rtol * scale, f"max |diff| {diff:.3g} for output scale {scale:.3g}"
