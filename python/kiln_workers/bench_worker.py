"""Kiln's Python bench worker: today's PyTorch, torch.compile, ONNX Runtime and OpenVINO, one
backend per process, serving the bench protocol of profiler/bench.h on stdin/stdout.

    python bench_worker.py          (started by `kiln compare` / `kiln sweep`, never by hand)

Protocol (JSON lines; see profiler/bench.h):

    -> {"op":"setup","backend":B,"path":MODEL,"threads":T,"inputs":[npy...],"output_dir":DIR,
        "python_ref":"file.py:fn"?,"state_dict":PATH?,"onnx_cache":DIR?}
    <- {"ok":true,"result":{"outputs":[npy...],"first_ms":T,"pid":P,...backend facts}}
     | {"ok":false,"status":"unavailable"|"failed"|"out-of-memory","error":"one line"}
    -> {"op":"run","warm":W,"number":N}   <- {"ok":true,"ms":total of the N calls}
    -> {"op":"exit"}

Backends (setup field "backend"):
    pytorch-eager               the nn.Module under torch.inference_mode()
    torch-compile               torch.compile(module) (inductor, default mode, freezing on)
    torch-compile-max-autotune  torch.compile(module, mode="max-autotune") (freezing on)
    onnxruntime                 an InferenceSession, all graph optimizations, CPU provider
    openvino                    OpenVINO's CPU plugin, latency hint, f32

The module comes from (in this order) a Python reference ("python_ref", a function returning
(nn.Module, example_inputs), with "state_dict" loaded into it), a sample model's torchvision
architecture (kiln.json "source": "torchvision NAME ...") with the file's weights, or the
TorchScript file itself (labelled "module": "torchscript"). ONNX Runtime and OpenVINO run the
user's .onnx, else an export of the module by today's torch.onnx.export (dynamo, opset 18),
cached under $XDG_CACHE_HOME/kiln/onnx keyed by the model's bytes and the input shapes.

Between requests the worker blocks reading stdin; every backend gets the thread count it is told.
"""
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import time

ONNX_OPSET = 18
TORCH_BACKENDS = ("pytorch-eager", "torch-compile", "torch-compile-max-autotune")
ONNX_BACKENDS = ("onnxruntime", "openvino")


class Unavailable(Exception):
    """The backend cannot run here (not installed, too old, no module for this model)."""


class Failed(Exception):
    """The backend was tried and failed (an export that did not work)."""


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def first_line(e):
    text = str(e).strip().splitlines()
    return type(e).__name__ + (": " + text[0] if text else "")


# ---- modules -----------------------------------------------------------------------------------

def _torch(backend):
    """Today's torch, or Unavailable with the reason."""
    try:
        import torch
    except ImportError:
        raise Unavailable("%s needs torch >= 2.0; %s has no torch module (choose another interpreter with "
                          "--python)" % (backend, sys.executable))
    if int(torch.__version__.split(".")[0]) < 2:
        raise Unavailable("%s needs torch >= 2.0, found %s at %s (choose another interpreter with --python)"
                          % (backend, torch.__version__, sys.executable))
    return torch


def _kiln_json(path):
    import torch
    extra = {"kiln.json": ""}
    scripted = torch.jit.load(path, map_location="cpu", _extra_files=extra)
    try:
        meta = json.loads(extra["kiln.json"] or "{}")
    except ValueError:
        meta = {}
    return scripted, meta if isinstance(meta, dict) else {}


def _resolve_ref(ref):
    """"file.py:fn" or "package.module:attr" -> the callable."""
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise Failed("python_ref %r: expected FILE.py:FUNCTION or package.module:attr" % ref)
    if target.endswith(".py"):
        path = os.path.abspath(target)
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        if spec is None:
            raise Failed("python_ref %r: cannot load %s" % (ref, path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    value = module
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def load_module(setup):
    """The PyTorch module a setup request names, in eval mode, and how it was obtained.

    Returns (module, facts): facts["module"] is "python" (setup["python_ref"], with
    setup["state_dict"] loaded into it), "torchvision" (a sample model rebuilt from its kiln.json
    source, the file's weights loaded), "torch.export" (a .pt2 program's module,
    torch.export.load) or "torchscript" (the file itself, torch.jit.load).
    Raises Unavailable for an .onnx model (it has no PyTorch module) or without torch >= 2."""
    torch = _torch(setup.get("backend", "pytorch"))
    ref = setup.get("python_ref") or ""
    if ref:
        made = _resolve_ref(ref)()
        module = made[0] if isinstance(made, (tuple, list)) else made
        state = setup.get("state_dict") or ""
        if state:
            module.load_state_dict(torch.load(state, map_location="cpu"))
        module.eval()
        return module, {"module": "python", "module_source": ref}
    path = setup["path"]
    if path.endswith(".onnx"):
        raise Unavailable("an ONNX model has no PyTorch module to run")
    if path.endswith(".pt2"):
        # A torch.export program: its module (the graph with the program's weights) runs as is.
        module = torch.export.load(path).module()
        return module, {"module": "torch.export", "module_source": path}
    scripted, meta = _kiln_json(path)
    source = str(meta.get("source", ""))
    qengine = (meta.get("quantization") or {}).get("qengine") if isinstance(meta.get("quantization"), dict) else None
    if qengine:
        # Quantized TorchScript runs on the engine it was quantized for (as torch_baseline.cpp does);
        # packed weights are re-packed for the current engine on load.
        if qengine not in torch.backends.quantized.supported_engines:
            raise Unavailable("the quantized engine '%s' is not available in torch %s" % (qengine, torch.__version__))
        torch.backends.quantized.engine = qengine
        scripted, meta = _kiln_json(path)
    if source.startswith("torchvision ") and not source.startswith("torchvision quantization"):
        import torchvision
        name = source.split()[1].rstrip(",")
        factory = getattr(torchvision.models, name, None)
        if factory is not None:
            model = factory(weights=None)
            model.load_state_dict(scripted.state_dict())
            model.eval()
            return model, {"module": "torchvision", "module_source": "torchvision.models." + name}
    scripted.eval()
    return scripted, {"module": "torchscript", "module_source": path}


def _is_script(module):
    import torch
    return isinstance(module, (torch.jit.ScriptModule, torch.jit.ScriptFunction))


def _read_inputs(setup):
    import numpy
    return [numpy.load(p) for p in setup["inputs"]]


def _flatten(value, out):
    if isinstance(value, dict):
        for v in value.values():
            _flatten(v, out)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _flatten(v, out)
    elif hasattr(value, "detach"):
        out.append(value.detach().contiguous().numpy())
    elif value is not None:
        import numpy
        out.append(numpy.asarray(value))
    return out


def _torch_facts(torch):
    config = torch.__config__.show()
    facts = {"torch_version": torch.__version__, "intra_op_threads": torch.get_num_threads(),
             "inter_op_threads": torch.get_num_interop_threads()}
    for line in config.splitlines():
        line = line.strip(" -")
        if "Math Kernel Library" in line:
            facts["mkl"] = line
        elif line.startswith("Intel(R) MKL-DNN") or line.startswith("oneDNN"):
            facts["onednn"] = line
        elif line.startswith("OpenMP"):
            facts["openmp"] = line
        elif line.startswith("Build settings:"):
            for item in line[len("Build settings:"):].split(","):
                key, _, value = item.strip().partition("=")
                if key == "BLAS_INFO":
                    facts["blas"] = value
        elif line.startswith("CPU capability usage:"):
            facts["cpu_capability"] = line.split(":", 1)[1].strip()
    return facts


# ---- ONNX --------------------------------------------------------------------------------------

def _cache_dir(setup):
    if setup.get("onnx_cache"):
        return setup["onnx_cache"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln", "onnx")


def _hash_file(h, path):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)


def _export_key(setup, inputs):
    """A hash of what the export depends on: the model's bytes (the reference's source file and
    state dict), the input shapes and dtypes, the exporter's torch version and the opset."""
    from importlib import metadata
    h = hashlib.sha256()
    ref = setup.get("python_ref") or ""
    if ref:
        h.update(b"ref:" + ref.encode())
        target = ref.rpartition(":")[0]
        if target.endswith(".py") and os.path.exists(target):
            _hash_file(h, target)
        if setup.get("state_dict"):
            _hash_file(h, setup["state_dict"])
    else:
        _hash_file(h, setup["path"])
    for a in inputs:
        h.update(("%s%s;" % (a.dtype.str, list(a.shape))).encode())
    try:
        h.update(("torch " + metadata.version("torch")).encode())
    except metadata.PackageNotFoundError:
        pass
    h.update(("opset %d" % ONNX_OPSET).encode())
    return h.hexdigest()[:32]


def onnx_model(setup, inputs):
    """The ONNX file a backend runs and its facts: the user's .onnx, or the module's export
    (cached; exported once per model and input shapes)."""
    path = setup["path"]
    if path.endswith(".onnx") and not setup.get("python_ref"):
        return path, {"onnx": path, "onnx_source": "the model file"}
    key = _export_key(setup, inputs)
    cache = _cache_dir(setup)
    target = os.path.join(cache, key + ".onnx")
    facts = {"onnx": target, "onnx_opset": ONNX_OPSET}
    if os.path.exists(target):
        facts["onnx_source"] = "export (cached)"
        return target, facts
    torch = _torch(setup["backend"])
    module, module_facts = load_module(dict(setup, backend="ONNX export"))
    facts["onnx_exported_from"] = module_facts["module"]
    args = tuple(torch.from_numpy(a) for a in inputs)
    os.makedirs(cache, exist_ok=True)
    partial = "%s.%d.tmp" % (target, os.getpid())
    start = time.perf_counter()
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if _is_script(module):
                # torch.export (the dynamo exporter) cannot trace a ScriptModule: the TorchScript
                # exporter of the same torch exports it, with Kiln's forms for ops it has none of.
                import onnx_symbolics  # beside this file, which runs as a script
                onnx_symbolics.register(torch, ONNX_OPSET)
                torch.onnx.export(module, args, partial, dynamo=False, opset_version=ONNX_OPSET)
                facts["onnx_exporter"] = "torch.onnx.export (TorchScript)"
            else:
                with torch.inference_mode(False), torch.no_grad():
                    program = torch.onnx.export(module, args, dynamo=True, opset_version=ONNX_OPSET,
                                                external_data=False, verbose=False)
                program.save(partial, external_data=False)
                facts["onnx_exporter"] = "torch.onnx.export (dynamo)"
    except ImportError as e:
        raise Unavailable("the ONNX export needs %s (pip install onnx onnxscript)" % first_line(e))
    except Exception as e:
        if os.path.exists(partial):
            os.remove(partial)
        raise Failed("ONNX export failed: " + first_line(e))
    os.replace(partial, target)  # whole or not at all: a concurrent worker never reads half a file
    facts["onnx_source"] = "export"
    facts["onnx_export_seconds"] = time.perf_counter() - start
    return target, facts


# ---- backends ----------------------------------------------------------------------------------

def setup_torch(q, inputs):
    backend = q["backend"]
    torch = _torch(backend)
    threads = int(q.get("threads", 0))
    if threads > 0:
        torch.set_num_threads(threads)
    module, facts = load_module(q)
    facts.update(_torch_facts(torch))
    args = [torch.from_numpy(a) for a in inputs]
    run = module
    if backend != "pytorch-eager":
        if _is_script(module):
            raise Unavailable("torch.compile needs the model's Python module; this file is TorchScript without "
                              "a torchvision architecture in its kiln.json (pass a Python reference)")
        mode = "max-autotune" if backend == "torch-compile-max-autotune" else None
        # Inference on CPU as PyTorch recommends it: with inductor's freezing, weights are
        # constants that inductor folds and pre-packs (oneDNN layouts). Without it every call
        # reorders the weights again; here that made MobileNetV2 2.6x slower than eager
        # (44.8 ms against 17.5), and 6x slower than with freezing (7.2 ms).
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
        run = torch.compile(module, mode=mode)
        facts["compile_mode"] = mode or "default"
        facts["compiler_backend"] = "inductor"
        facts["inductor_freezing"] = True
        with torch.inference_mode():
            start = time.perf_counter()
            run(*args)
            facts["compile_seconds"] = time.perf_counter() - start

    if _is_script(run):
        # Eager means operator by operator: the TorchScript interpreter with its graph optimizer
        # (profiling, fusion) off.
        facts["graph_executor_optimize"] = False

        def call():
            with torch.inference_mode(), torch.jit.optimized_execution(False):
                return run(*args)
    else:
        def call():
            with torch.inference_mode():
                return run(*args)
    return call, lambda value: _flatten(value, []), facts


def _onnx_engine(q, inputs, package):
    """What both ONNX engines start from: their package (Unavailable when it is not installed),
    the ONNX file they run (onnx_model), its facts so far and the thread count."""
    import importlib
    try:
        engine = importlib.import_module(package)
    except ImportError:
        raise Unavailable("%s is not installed for %s" % (package, sys.executable))
    path, facts = onnx_model(q, inputs)
    return engine, path, facts, int(q.get("threads", 0))


def _check_input_count(takes, inputs):
    if takes != len(inputs):
        raise Failed("the ONNX model takes %d inputs, Kiln has %d" % (takes, len(inputs)))


def setup_onnxruntime(q, inputs):
    ort, path, facts, threads = _onnx_engine(q, inputs, "onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    _check_input_count(len(names), inputs)
    feeds = dict(zip(names, inputs))
    facts.update({"onnxruntime_version": ort.__version__, "providers": session.get_providers(),
                  "graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_SEQUENTIAL",
                  "intra_op_threads": threads, "inter_op_threads": 1})
    if hasattr(ort, "get_build_info"):
        facts["build"] = ort.get_build_info()

    def call():
        return session.run(None, feeds)
    return call, list, facts


def setup_openvino(q, inputs):
    ov, path, facts, threads = _onnx_engine(q, inputs, "openvino")
    core = ov.Core()
    model = core.read_model(path)
    config = {"PERFORMANCE_HINT": "LATENCY",
              # Same precision as every other row: on CPUs with AVX512-BF16 or AMX the plugin's
              # default is bf16.
              "INFERENCE_PRECISION_HINT": "f32"}
    if threads > 0:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = core.compile_model(model, "CPU", config)
    _check_input_count(len(compiled.inputs), inputs)
    request = compiled.create_infer_request()
    facts["openvino_version"] = ov.get_version()
    facts["device"] = core.get_property("CPU", "FULL_DEVICE_NAME")
    for key in ("PERFORMANCE_HINT", "INFERENCE_NUM_THREADS", "NUM_STREAMS", "INFERENCE_PRECISION_HINT",
                "ENABLE_HYPER_THREADING", "ENABLE_CPU_PINNING"):
        try:
            value = compiled.get_property(key)
        except Exception:
            continue
        facts[key.lower()] = value.to_string() if hasattr(value, "to_string") else str(value)

    def call():
        request.infer(inputs)
        return request

    def outputs(req):
        import numpy
        return [numpy.array(req.get_output_tensor(i).data) for i in range(len(compiled.outputs))]
    return call, outputs, facts


SETUPS = {"pytorch-eager": setup_torch, "torch-compile": setup_torch, "torch-compile-max-autotune": setup_torch,
          "onnxruntime": setup_onnxruntime, "openvino": setup_openvino}


def setup(q):
    backend = q.get("backend", "")
    if backend not in SETUPS:
        raise Failed("unknown backend '%s' (expected %s)" % (backend, ", ".join(SETUPS)))
    try:
        import numpy
    except ImportError:
        raise Unavailable("%s has no numpy module" % sys.executable)
    inputs = _read_inputs(q)
    call, outputs_of, facts = SETUPS[backend](q, inputs)
    start = time.perf_counter()
    value = call()
    first_ms = (time.perf_counter() - start) * 1000
    paths = []
    for i, array in enumerate(outputs_of(value)):
        path = os.path.join(q["output_dir"], "out%d.npy" % i)
        numpy.save(path, numpy.ascontiguousarray(array))
        paths.append(path)
    facts.update({"outputs": paths, "first_ms": first_ms, "pid": os.getpid(), "backend": backend,
                  "threads": int(q.get("threads", 0)), "python": sys.executable,
                  "python_version": sys.version.split()[0]})
    return call, {"ok": True, "result": facts}


def failure(e):
    if isinstance(e, Unavailable):
        return {"ok": False, "status": "unavailable", "error": str(e)}
    if isinstance(e, Failed):
        return {"ok": False, "status": "failed", "error": str(e)}
    reason = first_line(e)
    memory = isinstance(e, MemoryError) or "out of memory" in reason or "can't allocate" in reason
    return {"ok": False, "status": "out-of-memory" if memory else "failed", "error": reason}


def serve():
    call = None
    while True:
        line = sys.stdin.readline()  # blocks between requests: no thread of ours runs meanwhile
        if not line:
            break
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            op = q.get("op")
            if op == "exit":
                break
            if op == "setup":
                call, answer = setup(q)
            elif op == "run":
                if call is None:
                    raise Failed("run before a successful setup")
                start = time.perf_counter()
                for _ in range(int(q.get("warm", 0))):
                    call()
                warm_ms = (time.perf_counter() - start) * 1000
                start = time.perf_counter()
                for _ in range(int(q.get("number", 1))):
                    call()
                answer = {"ok": True, "ms": (time.perf_counter() - start) * 1000, "warm_ms": warm_ms}
            else:
                answer = {"ok": False, "status": "failed", "error": "unknown request %r" % op}
        except BaseException as e:  # noqa: B036 - a worker answers every request it can
            if isinstance(e, KeyboardInterrupt):
                raise
            answer = failure(e)
        reply(answer)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
