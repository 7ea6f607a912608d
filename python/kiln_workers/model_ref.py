"""Python model references: `file.py:build` or `package.module:attr` as a Kiln model source.

A reference names a callable that returns `(nn.Module, example_inputs)`, example_inputs being a
tensor or a tuple/list of tensors. Kiln (app/model_ref.cpp) runs this file with its Python
environment to trace the module once into a cache folder and then opens the traced file like any
`.pt`; the PyTorch backends call `load_reference` to get the same module with the same weights.

    python model_ref.py trace REF       traces REF (or reuses the cache) and prints one JSON line:
        {"ok": true, "model": ".../model.pt", "state_dict": ".../state_dict.pt",
         "inputs": [".../input0.npy", ...], "dir": ..., "torch_version": ..., "reused": bool}
      or {"ok": false, "kind": "io" | "invalid" | "unsupported", "error": "one line"}

The cache folder is $XDG_CACHE_HOME/kiln/refs/<sha256 of the file's bytes, the reference and the
torch version>/ (~/.cache when XDG_CACHE_HOME is unset), holding:
  model.pt        torch.jit.trace of the module in eval mode, with an extra file "kiln.json"
                  ({"inputs": [{"name", "shape", "dtype"}], "source"}) as Kiln's sample models
                  have, so no input shapes need to be given;
  state_dict.pt   torch.save(module.state_dict());
  input<i>.npy    the example inputs;
  manifest.json   {"ref", "file", "attr", "torch_version", "inputs", "created"}.
Only the named file's bytes are hashed: a change in a module it imports does not retrace (delete
the folder, or touch the file). torch's RNG is seeded (torch.manual_seed(0)) before the callable
runs, so random weights are the same every time.
"""

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
import warnings

SEED = 0

# torch >= 2.9 marks torch.jit as deprecated; Kiln reads TorchScript, so the warnings are noise.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.jit")

_DTYPES = None  # torch dtype -> Kiln's name, filled on first use (torch imported lazily)


class RefError(Exception):
    """A problem with the reference, reported as one line with a kind Kiln maps to an exit code."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def _one_line(e):
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return type(e).__name__ + (": " + first if first else "")


def parse_ref(ref):
    """(file or None, module or None, attr) of 'path/to/file.py:attr' or 'pkg.mod:attr'."""
    if ":" not in ref:
        raise RefError("invalid", f"{ref}: not a Python reference (expected file.py:function or package.module:function)")
    left, attr = ref.rsplit(":", 1)
    if not left or not attr:
        raise RefError("invalid", f"{ref}: not a Python reference (expected file.py:function or package.module:function)")
    if left.endswith(".py") or os.sep in left:
        path = os.path.abspath(left)
        if not os.path.isfile(path):
            raise RefError("io", f"{left}: no such file")
        return path, None, attr
    return None, left, attr


def _import(file, module):
    """The module object of a file path (its folder put first on sys.path) or a dotted name."""
    try:
        if file is not None:
            folder = os.path.dirname(file)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            name = os.path.splitext(os.path.basename(file))[0]
            spec = importlib.util.spec_from_file_location(name, file)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            return mod
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if file is None and e.name and module.startswith(e.name):
            raise RefError("io", f"no module named '{module}' (not a file either)")
        raise RefError("invalid", f"cannot import {file or module}: {_one_line(e)}")
    except RefError:
        raise
    except BaseException as e:  # SyntaxError, SystemExit, anything the module's top level raises
        raise RefError("invalid", f"cannot import {file or module}: {_one_line(e)}")


def _resolve(mod, attr, where):
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(mod) if not n.startswith("_") and callable(getattr(mod, n, None)))
            listed = ", ".join(public[:12]) + (", ..." if len(public) > 12 else "")
            raise RefError("invalid", f"{where} has no attribute '{attr}' (its callables: {listed or 'none'})")
        obj = getattr(obj, part)
    return obj


def _source_bytes(file, module):
    if file is not None:
        with open(file, "rb") as f:
            return f.read()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return module.encode()
    with open(spec.origin, "rb") as f:
        return f.read()


def call_reference(ref):
    """Imports `ref`, seeds torch's RNG, calls it and checks what it returns: (module in eval mode,
    tuple of example input tensors). Raises RefError."""
    import torch

    file, module, attr = parse_ref(ref)
    mod = _import(file, module)
    fn = _resolve(mod, attr, os.path.basename(file) if file else module)
    torch.manual_seed(SEED)
    try:
        result = fn() if callable(fn) and not isinstance(fn, torch.nn.Module) else fn
    except BaseException as e:
        raise RefError("invalid", f"{attr}() raised {_one_line(e)}")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise RefError("invalid", f"{attr}() must return (nn.Module, example_inputs), got {type(result).__name__}")
    net, inputs = result
    if not isinstance(net, torch.nn.Module):
        raise RefError("invalid", f"{attr}() must return (nn.Module, example_inputs); the first item is a {type(net).__name__}")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise RefError("invalid", f"{attr}() must return example inputs as a tensor or a tuple of tensors")
    net.eval()
    return net, tuple(t.detach().cpu().contiguous() for t in inputs)


def load_reference(ref, state_dict_path=None):
    """The module `ref` builds, in eval mode, with the weights saved at `state_dict_path` (the
    ones Kiln traced and compiled) when given."""
    import torch

    net, _ = call_reference(ref)
    if state_dict_path:
        net.load_state_dict(torch.load(state_dict_path, map_location="cpu"))
    net.eval()
    return net


def _dtype_name(t, index):
    import torch

    global _DTYPES
    if _DTYPES is None:
        _DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.int32: "int32",
                   torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}
    if t.dtype not in _DTYPES:
        raise RefError("unsupported", f"example input {index} is {t.dtype}; Kiln takes {', '.join(_DTYPES.values())}")
    return _DTYPES[t.dtype]


def _input_names(net, count):
    try:
        params = [p for p in inspect.signature(net.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params][:count]
    except (TypeError, ValueError):
        names = []
    return names + [f"input{i}" for i in range(len(names), count)]


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln", "refs")


def trace(ref):
    """Traces `ref` into its cache folder, or reuses it; returns the JSON answer (a dict)."""
    import numpy as np
    import torch

    file, module, attr = parse_ref(ref)
    key = hashlib.sha256()
    key.update(_source_bytes(file, module))
    key.update(b"\0" + (file or module).encode() + b":" + attr.encode() + b"\0" + torch.__version__.encode())
    folder = os.path.join(cache_root(), key.hexdigest()[:32])
    manifest_path = os.path.join(folder, "manifest.json")
    if os.path.isfile(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
        return _answer(folder, manifest, reused=True)

    net, inputs = call_reference(ref)
    specs = [{"name": n, "shape": list(t.shape), "dtype": _dtype_name(t, i)}
             for i, (n, t) in enumerate(zip(_input_names(net, len(inputs)), inputs))]
    options = {"check_trace": False}
    # torch >= 2.1 stores the example inputs in the archive (traced_inputs.pkl) by default; Kiln's
    # archive checks and libtorch 1.13 expect the classic layout, and the inputs are saved as .npy.
    if "_store_inputs" in inspect.signature(torch.jit.trace).parameters:
        options["_store_inputs"] = False
    try:
        with torch.no_grad():
            traced = torch.jit.trace(net, inputs, **options)
    except BaseException as e:
        raise RefError("unsupported", f"torch.jit.trace failed: {_one_line(e)}")

    os.makedirs(cache_root(), exist_ok=True)
    work = tempfile.mkdtemp(prefix=".tracing-", dir=cache_root())
    try:
        source = f"python reference {ref}"
        extra = {"kiln.json": json.dumps({"inputs": specs, "source": source}, sort_keys=True)}
        try:
            torch.jit.save(traced, os.path.join(work, "model.pt"), _extra_files=extra)
        except BaseException as e:
            raise RefError("unsupported", f"torch.jit.save failed: {_one_line(e)}")
        torch.save(net.state_dict(), os.path.join(work, "state_dict.pt"))
        for i, t in enumerate(inputs):
            np.save(os.path.join(work, f"input{i}.npy"), t.numpy())
        manifest = {"ref": ref, "file": file, "module": module, "attr": attr, "torch_version": torch.__version__,
                    "inputs": specs, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        with open(os.path.join(work, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        try:
            os.rename(work, folder)
        except OSError:
            if not os.path.isfile(manifest_path):  # not another run that finished first
                raise
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return _answer(folder, manifest, reused=False)


def _answer(folder, manifest, reused):
    count = len(manifest["inputs"])
    return {"ok": True, "dir": folder, "model": os.path.join(folder, "model.pt"),
            "state_dict": os.path.join(folder, "state_dict.pt"),
            "inputs": [os.path.join(folder, f"input{i}.npy") for i in range(count)],
            "torch_version": manifest["torch_version"], "reused": reused}


def main(argv):
    if len(argv) != 3 or argv[1] != "trace":
        print("usage: model_ref.py trace REF", file=sys.stderr)
        return 2
    out = sys.stdout
    try:
        # Whatever the user's code prints goes to stderr: stdout carries the answer only.
        with contextlib.redirect_stdout(sys.stderr):
            answer = trace(argv[2])
    except RefError as e:
        answer = {"ok": False, "kind": e.kind, "error": str(e)}
    except BaseException as e:
        answer = {"ok": False, "kind": "invalid", "error": _one_line(e)}
    out.write(json.dumps(answer) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
