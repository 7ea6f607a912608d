"""Kiln from Python: compile a PyTorch module with Kiln and run the compiled code.

    import kiln
    fast = kiln.compile(model, (x,), opt_level=3, threads=2)   # traced, compiled by `kiln compile`
    y = fast(x)                                                 # torch tensors in, torch tensors out

    opt = kiln.torch.optimize(model)   # torch.compile with Kiln as backend; unsupported parts stay in PyTorch
    y = opt(x)
    print(opt.report())

The extension kiln._runtime binds Kiln's runtime only (no libtorch, LLVM or compiler), so it shares
the process with today's torch; compiling runs the `kiln` command in a subprocess.
"""

from .errors import KilnError
from .compiler import CompiledModule, compile, cache_dir, clear_cache, kiln_cli, prune_cache
from . import _runtime
from . import torch

__all__ = ["KilnError", "CompiledModule", "compile", "cache_dir", "clear_cache", "prune_cache", "kiln_cli", "torch",
           "set_num_threads", "num_threads"]


def set_num_threads(threads):
    """The runtime thread pool's size for every compiled module (0: KILN_NUM_THREADS or all cores)."""
    _runtime.set_num_threads(int(threads))


def num_threads():
    return _runtime.num_threads()
