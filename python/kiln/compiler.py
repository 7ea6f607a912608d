"""kiln.compile: a PyTorch module → Kiln's compiled code, callable on torch tensors and numpy arrays.

How: the module is traced with this process's torch (eval mode, no autograd) and saved as
TorchScript with a "kiln.json" extra file naming its inputs' shapes and dtypes (as
resources/models/export_models.py does, so the importer needs no shapes flag). The `kiln` command
compiles that file into an exported module directory (`kiln compile MODEL -o DIR`) in a
subprocess, and kiln._runtime (runtime/ alone: no libtorch, which could not share this process
with today's torch) loads and runs it. Compiled modules are cached by what the traced module computes
(its graph, weights and inputs) and the build options (see cache_dir()), least recently used first out past a size bound
(prune_cache()).
"""

import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import warnings

import numpy as np
import torch
import torch.utils._pytree as pytree

from . import _runtime
from .errors import KilnError

# torch dtype → (kiln.json name, Kiln's short name).
_DTYPES = {
    torch.float32: ("float32", "f32"),
    torch.float64: ("float64", "f64"),
    torch.int64: ("int64", "i64"),
    torch.int32: ("int32", "i32"),
    torch.bool: ("bool", "bool"),
    torch.int8: ("int8", "i8"),
    torch.uint8: ("uint8", "u8"),
}
_NUMPY_OF = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32, "bool": np.bool_,
             "i8": np.int8, "u8": np.uint8}
_SHORT_OF_NUMPY = {np.dtype(v): k for k, v in _NUMPY_OF.items()}


def kiln_cli():
    """The `kiln` executable: $KILN_CLI, else the one of the build this package was built in."""
    path = os.environ.get("KILN_CLI")
    if not path:
        try:
            from ._paths import KILN_CLI as path
        except ImportError:
            path = shutil.which("kiln")
    if not path:
        raise KilnError("cannot find the kiln command: set KILN_CLI", "io", 6)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise KilnError(f"{path}: cannot run the kiln command: no such executable (set KILN_CLI)", "io", 6)
    return path


def cache_dir():
    """Where compiled modules are kept: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln/python."""
    path = os.environ.get("KILN_CACHE_DIR")
    if path:
        return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln", "python")


_DEFAULT_CACHE_MB = 2048
_STALE_STAGING_SECONDS = 3600


def _entry_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def prune_cache(max_mb=None, keep=()):
    """Bounds the compiled-module cache: removes the least recently used modules until the cache
    holds at most `max_mb` MiB ($KILN_CACHE_MAX_MB, default 2048), never one in `keep`; and removes
    staging directories a killed compile left behind (older than an hour). A module already loaded
    keeps running: its kernels stay mapped after the files are gone. Returns the removed paths.
    Called after every compile into the cache."""
    if max_mb is None:
        max_mb = float(os.environ.get("KILN_CACHE_MAX_MB", _DEFAULT_CACHE_MB))
    root = cache_dir()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    keep = {os.path.abspath(k) for k in keep}
    removed, entries = [], []
    now = time.time()
    for name in names:
        path = os.path.join(root, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if name.startswith(".compiling-"):
            if now - st.st_mtime > _STALE_STAGING_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            continue
        if os.path.isdir(path):
            entries.append((st.st_mtime, path, _entry_bytes(path)))
    total = sum(size for _, _, size in entries)
    for _, path, size in sorted(entries):
        if total <= max_mb * 1024 * 1024:
            break
        if os.path.abspath(path) in keep:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
        total -= size
    return removed


def clear_cache():
    """Removes every compiled module from the cache (cache_dir()). Returns how many."""
    return len(prune_cache(max_mb=0))


def _shape_str(shape):
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _as_tuple(example_inputs):
    if isinstance(example_inputs, (torch.Tensor, np.ndarray)):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise KilnError("example_inputs must be a tensor or a tuple of tensors, got "
                        f"{type(example_inputs).__name__}", "usage", 2)
    out = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(np.ascontiguousarray(x))
        if not isinstance(x, torch.Tensor):
            raise KilnError(f"example input {i} is a {type(x).__name__}, not a tensor", "usage", 2)
        if x.device.type != "cpu":
            raise KilnError(f"example input {i} is on {x.device}; Kiln compiles for the CPU", "usage", 2)
        if x.dtype not in _DTYPES:
            raise KilnError(f"example input {i} has dtype {x.dtype}, which Kiln does not compile",
                            "unsupported", 4)
        out.append(x.detach())
    return tuple(out)


def _input_names(module, count):
    """The forward's parameter names when they fit, else x0, x1, ..."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params]
        if len(names) >= count and len(set(names[:count])) == count:
            return names[:count]
    except (TypeError, ValueError, AttributeError):
        pass
    return [f"x{i}" for i in range(count)]


def _trace(module, inputs, path):
    """Traces `module` on `inputs` into TorchScript at `path`; returns its eager outputs and the
    traced module's digest (_module_digest)."""
    was_training = module.training if isinstance(module, torch.nn.Module) else False
    if isinstance(module, torch.nn.Module):
        module.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = module(*inputs)
            if isinstance(module, torch.jit.ScriptModule):
                traced = module
            else:
                # Example inputs are not stored: the archive stays small and libtorch 1.13 reads it.
                traced = torch.jit.trace(module, inputs, check_trace=False, strict=False, _store_inputs=False)
            names = _input_names(module, len(inputs))
            spec = {"inputs": [{"name": n, "shape": list(x.shape), "dtype": _DTYPES[x.dtype][0]}
                               for n, x in zip(names, inputs)],
                    "source": f"kiln.compile({type(module).__name__})"}
            torch.jit.save(traced, path, _extra_files={"kiln.json": json.dumps(spec, sort_keys=True)})
            digest = _module_digest(traced, spec)
    except KilnError:
        raise
    except Exception as e:  # tracing failed: data-dependent Python, unsupported arguments, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise KilnError(f"cannot trace {type(module).__name__}: {first}", "unsupported", 4) from e
    finally:
        if was_training:
            module.train()
    return reference, digest


_MANGLE = re.compile(r"[./]___torch_mangle_[0-9]+")


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    try:
        return t.reshape(-1).view(torch.uint8).numpy().tobytes()
    except (RuntimeError, TypeError):  # quantized and other dtypes without a byte view
        return repr(t.tolist()).encode()


def _module_digest(traced, spec):
    """A digest of what a traced module computes, equal for two traces of one module (the saved
    files differ from trace to trace: a random serialization id, and class names torch numbers
    per process, `linear.___torch_mangle_N.Linear`, which also move code between files). Hashed:
    the inlined graph with those numbers removed, every parameter, buffer and tensor constant
    (name, dtype, shape, bytes) and the inputs' description."""
    h = hashlib.sha256()
    h.update(_MANGLE.sub("", str(traced.inlined_graph)).encode())
    tensors = list(traced.state_dict().items())
    try:
        tensors += sorted(traced.code_with_constants[1].const_mapping.items())
    except (AttributeError, RuntimeError):
        pass
    for name, t in tensors:
        if isinstance(t, torch.Tensor):
            h.update(f"\0{name}:{t.dtype}:{list(t.shape)}\0".encode())
            h.update(_tensor_bytes(t))
    h.update(json.dumps(spec, sort_keys=True).encode())
    return h.hexdigest()


def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run_cli(args):
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise KilnError(f"{args[0]}: cannot run the kiln command: {e.strerror or e} (set KILN_CLI)", "io", 6) from e
    if proc.returncode == 0:
        return proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
    message = lines[-1][len("error: "):] if lines else (proc.stderr.strip().splitlines() or ["kiln failed"])[-1]
    code = proc.returncode if proc.returncode > 0 else 70
    if proc.returncode < 0:
        message = f"`kiln compile` was killed by signal {-proc.returncode}: {message}"
    raise KilnError.from_code(message, code)


def compile_traced(pt_path, opt_level=3, records=None, target="llvm", cache=True, digest=None, winograd=4):
    """Compiles a TorchScript file (with its kiln.json) and returns the module directory. The cache
    key is `digest` (what the file computes: _module_digest) or else the file's bytes, with the
    build options."""
    cli = kiln_cli()
    st = os.stat(cli)
    key = {"opt": opt_level, "target": target, "kiln": [cli, st.st_size, st.st_mtime_ns],
           "runtime_format": _runtime.format_version()}
    if winograd != 4:
        key["winograd"] = winograd
    if records is not None:
        rst = os.stat(records) if os.path.exists(records) else None
        key["records"] = [os.path.abspath(records), rst and rst.st_size, rst and rst.st_mtime_ns]
    root = cache_dir() if cache else tempfile.mkdtemp(prefix="kiln-")
    key["content"] = digest or _file_digest(pt_path)
    out = os.path.join(root, hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32])
    if cache and os.path.exists(os.path.join(out, "graph.txt")) and os.path.exists(os.path.join(out, "kernels.so")):
        try:
            os.utime(out)  # its last use: the cache keeps the most recently used modules
        except OSError:
            pass
        return out, ""
    os.makedirs(root, exist_ok=True)
    # Compiled into a fresh directory, then renamed into place: another process compiling the same
    # model meanwhile never sees a half-written module.
    staging = tempfile.mkdtemp(prefix=".compiling-", dir=root)
    try:
        args = [cli, "compile", pt_path, "-o", os.path.join(staging, "m"), "-O", str(int(opt_level)),
                "--target", target]
        if records is not None:
            args += ["--records", str(records)]
        if winograd != 4:
            args += ["--winograd", str(int(winograd))]
        log = _run_cli(args).splitlines()[0:1]  # "compiled ... in 0.05 s: 3 kernels, 3 calls"
        log = log[0] if log else ""
        if os.path.exists(out):
            shutil.rmtree(out, ignore_errors=True)
        try:
            os.rename(os.path.join(staging, "m"), out)
        except OSError:
            if not os.path.exists(os.path.join(out, "graph.txt")):
                raise
        if cache:
            os.utime(out)
            prune_cache(keep=(out,))
        return out, log
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class CompiledModule:
    """A module compiled by Kiln for fixed input shapes and dtypes. Call it like the module."""

    def __init__(self, module_dir, output_spec, threads=None, compile_log=""):
        self._rt = _runtime.Module(module_dir)
        self._spec = output_spec
        self._threads = int(threads) if threads else 0
        self._lock = threading.Lock()
        self.module_dir = module_dir
        self.compile_log = compile_log
        self.inputs = self._rt.inputs     # [{'name', 'dtype', 'shape'}]
        self.outputs = self._rt.outputs

    def _array(self, i, x):
        want = self.inputs[i]
        what = f"input {i} ('{want['name']}')"
        if isinstance(x, torch.Tensor):
            if x.device.type != "cpu":
                raise KilnError(f"{what} is on {x.device}, expected a CPU tensor", "invalid-input", 5)
            if x.dtype not in _DTYPES:
                raise KilnError(f"{what} has dtype {x.dtype}, expected {want['dtype']}", "invalid-input", 5)
            x = x.detach()
            if x.is_conj() or x.is_neg():
                x = x.resolve_conj().resolve_neg()
            x = x.contiguous().numpy()
        elif not isinstance(x, np.ndarray):
            raise KilnError(f"{what} is a {type(x).__name__}, expected a tensor or numpy array", "invalid-input", 5)
        short = _SHORT_OF_NUMPY.get(x.dtype)
        if short != want["dtype"]:
            raise KilnError(f"{what} has dtype {short or x.dtype}, expected {want['dtype']}", "invalid-input", 5)
        if tuple(x.shape) != tuple(want["shape"]):
            raise KilnError(f"{what} has shape {_shape_str(x.shape)}, expected {_shape_str(want['shape'])}",
                            "invalid-input", 5)
        return np.ascontiguousarray(x)

    def run_numpy(self, *args):
        """Runs on the inputs and returns the flat list of outputs as numpy arrays (no copies)."""
        if len(args) != len(self.inputs):
            raise KilnError(f"the module takes {len(self.inputs)} input(s), got {len(args)}", "invalid-input", 5)
        arrays = [self._array(i, x) for i, x in enumerate(args)]
        with self._lock:  # a loaded module runs one call at a time
            buffers = self._rt.run(arrays, self._threads)
        return [np.asarray(b) for b in buffers]

    def __call__(self, *args):
        outs = [torch.from_numpy(a) for a in self.run_numpy(*args)]
        if self._spec is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        return pytree.tree_unflatten(outs, self._spec)

    def __repr__(self):
        sig = ", ".join(f"{d['name']}:{d['dtype']}{_shape_str(d['shape'])}" for d in self.inputs)
        return f"<kiln.CompiledModule ({sig}) from {self.module_dir}>"


def compile(module, example_inputs, opt_level=3, records=None, threads=None, target="llvm", cache=True, winograd=4):
    """Compiles `module` (an nn.Module or a traceable callable) for the shapes and dtypes of
    `example_inputs` (a tensor, numpy array, or a tuple of them) with Kiln.

    Returns a CompiledModule: call it with tensors or numpy arrays of those shapes and dtypes; it
    returns torch tensors in the structure the module returns (a tuple for several outputs).
    opt_level 0-4, `records` a tuning-records file (`kiln tune`), `threads` the runtime's thread
    count while it runs (None: KILN_NUM_THREADS or all cores), `target` an LLVM-style target string,
    `winograd` the largest Winograd tile of 3×3 convolutions (4, 2 or 0: `kiln --winograd`).
    Raises KilnError (kind "unsupported" naming the operator, "usage", ...) when Kiln refuses.
    """
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
        raise KilnError(f"opt_level must be 0-4, got {opt_level!r}", "usage", 2)
    if threads is not None and (not isinstance(threads, int) or threads < 0):
        raise KilnError(f"threads must be a non-negative int, got {threads!r}", "usage", 2)
    if winograd not in (0, 2, 4):
        raise KilnError(f"winograd must be 4, 2 or 0, got {winograd!r}", "usage", 2)
    if records is not None and not os.path.isfile(records):
        raise KilnError(f"{records}: no such file", "io", 6)
    inputs = _as_tuple(example_inputs)
    with tempfile.TemporaryDirectory(prefix="kiln-trace-") as tmp:
        pt = os.path.join(tmp, "model.pt")
        reference, digest = _trace(module, inputs, pt)
        try:
            module_dir, log = compile_traced(pt, opt_level=opt_level, records=records, target=target, cache=cache,
                                             digest=digest, winograd=winograd)
        except KilnError as e:
            # The traced file is temporary: name the module instead ("M: aten::cumsum is not supported (m.py:3)").
            if e.message.startswith(pt):
                e.message = type(module).__name__ + e.message[len(pt):]
                e.args = (e.message,)
            raise
    leaves, spec = pytree.tree_flatten(reference)
    if not all(isinstance(t, torch.Tensor) for t in leaves):
        spec = None
    compiled = CompiledModule(module_dir, spec, threads=threads, compile_log=log)
    if not cache:  # the kernels stay loaded; the files are no longer needed
        shutil.rmtree(os.path.dirname(module_dir), ignore_errors=True)
    if spec is not None and len(leaves) != len(compiled.outputs):
        spec = None
        compiled._spec = None
    return compiled
