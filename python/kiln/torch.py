"""kiln.torch.optimize: the torch_tvm-style drop-in. The supported parts of a module run as Kiln
code, the rest in PyTorch, with a report of which is which.

    opt = kiln.torch.optimize(model, threads=2)
    y = opt(x)              # the first call per input shape compiles
    print(opt.report())     # subgraphs compiled by Kiln, what fell back to PyTorch and why

How (the Python counterpart of the C++ kiln::torch::optimize in app/torch/):
- torch.compile(module, backend=<Kiln's>, dynamic=False): TorchDynamo captures the forward as FX
  graphs; what it cannot capture (graph breaks) runs as ordinary Python and PyTorch. Each new
  input shape re-captures (dynamo's guards), so every graph is compiled for static shapes.
- The backend first compiles the whole FX graph with kiln.compile. The module's parameters and
  buffers, which dynamo passes as graph inputs, are frozen into the traced graph as constants;
  a call whose weights changed since (their version counter or storage) compiles again first.
- If Kiln refuses the graph, it is partitioned: every node is judged (its inputs' and outputs'
  dtypes, and the aten:: operators a trace of the node alone records, against the operators Kiln's
  importer maps, `kiln doctor --list-ops`); torch.fx's CapabilityBasedPartitioner groups the
  supported nodes into maximal subgraphs, each compiled by Kiln, and the other nodes stay in the
  FX graph, run by PyTorch. A subgraph that Kiln still refuses has the refused operator's nodes
  taken out and the graph partitioned again (a few rounds), else it runs in PyTorch with Kiln's
  message as the reason.
"""

import functools
import re
import subprocess
import threading

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import compiler
from .errors import KilnError

__all__ = ["optimize", "OptimizedModule", "Report", "GraphReport", "SubgraphReport", "supported_aten_ops"]

_CALLABLE_OPS = ("call_function", "call_method", "call_module")
_MAX_PARTITION_ROUNDS = 4


@functools.lru_cache(maxsize=None)
def supported_aten_ops():
    """The TorchScript operators Kiln's importer maps (`kiln doctor --list-ops`), e.g. "aten::conv2d"."""
    proc = subprocess.run([compiler.kiln_cli(), "doctor", "--list-ops"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise KilnError.from_code((proc.stderr.strip().splitlines() or ["kiln doctor failed"])[-1], proc.returncode)
    return frozenset(line.split()[0] for line in proc.stdout.splitlines() if line.startswith("aten::"))


# --- the report ----------------------------------------------------------------------------------

class SubgraphReport:
    """One part of a captured graph: compiled by Kiln, or run by PyTorch (with why)."""

    def __init__(self, compiled, ops, reason="", log=""):
        self.compiled = compiled
        self.ops = list(ops)      # its operators in graph order ("aten::conv2d", or the FX target)
        self.reason = reason      # PyTorch: why Kiln does not run it
        self.log = log            # compiled: `kiln compile`'s summary line
        self.calls = 0            # compiled: times Kiln's code ran
        self.recompiles = 0       # compiled: times changed weights were compiled in

    def __repr__(self):
        return f"SubgraphReport(compiled={self.compiled}, ops={self.ops}, reason={self.reason!r})"


class GraphReport:
    """One FX graph dynamo captured, for one input signature."""

    def __init__(self, index, signature):
        self.index = index
        self.signature = signature     # "f32[1,3,224,224], ..." (the graph's non-weight inputs)
        self.subgraphs = []
        self.calls = 0

    @property
    def compiled_ops(self):
        return sum(len(s.ops) for s in self.subgraphs if s.compiled)

    @property
    def total_ops(self):
        return sum(len(s.ops) for s in self.subgraphs)

    @property
    def fallbacks(self):
        return [s for s in self.subgraphs if not s.compiled]


class Report:
    """What kiln.torch.optimize made of the module: per captured graph, its subgraphs."""

    def __init__(self, graphs):
        self.graphs = list(graphs)

    @property
    def fallbacks(self):
        """Every subgraph that runs in PyTorch."""
        return [s for g in self.graphs for s in g.fallbacks]

    @property
    def compiled(self):
        return [s for g in self.graphs for s in g.subgraphs if s.compiled]

    def text(self):
        if not self.graphs:
            return "kiln.torch.optimize: nothing compiled yet (the first call per input shape compiles)\n"
        lines = []
        for g in self.graphs:
            lines.append(f"graph {g.index} ({g.signature}): {g.compiled_ops}/{g.total_ops} operators compiled "
                         f"by Kiln in {sum(1 for s in g.subgraphs if s.compiled)} subgraph(s), "
                         f"{len(g.fallbacks)} part(s) in PyTorch")
            for s in g.subgraphs:
                ops = _ops_text(s.ops)
                if s.compiled:
                    again = f", compiled again for new weights {s.recompiles}x" if s.recompiles else ""
                    lines.append(f"  kiln     {ops} ({s.calls} call(s){again})")
                else:
                    lines.append(f"  pytorch  {ops}: {s.reason}")
        return "\n".join(lines) + "\n"

    def __str__(self):
        return self.text()

    def __repr__(self):
        return f"<kiln.torch.Report: {len(self.graphs)} graph(s), {len(self.compiled)} compiled subgraph(s), " \
               f"{len(self.fallbacks)} fallback(s)>"


def _ops_text(ops):
    """The operators in order; a long list as counts in order of first use ("torch.conv2d x20, ...")."""
    if not ops:
        return "(no operators)"
    if len(ops) <= 8:
        return ", ".join(ops)
    counts = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


# --- judging nodes -------------------------------------------------------------------------------

def _node_name(node):
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        return str(node.target)
    t = node.target
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", None) or str(t)
    if module.startswith("torch._C._nn"):
        module = "torch.nn.functional"
    elif module.startswith("torch._C._fft"):
        module = "torch.fft"
    elif module.startswith("torch._C") or module == "torch":
        module = "torch"
    return f"{module}.{name}" if module else name


def _tensors_in(value):
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


class _Judge:
    """Per node of one FX graph: the aten:: operators a trace of it records, and whether Kiln
    takes it (with the reason when not)."""

    def __init__(self, gm, values):
        self.gm = gm
        self.values = values            # node -> its value on the example inputs
        self.kinds = {}                 # node -> [aten kinds] (None: could not trace it alone)
        self.refused = {}               # node -> reason (Kiln refused it in a compiled subgraph)
        self.reasons = {}               # node -> why it is not supported ("" when supported)
        self.known = supported_aten_ops()
        for node in gm.graph.nodes:
            if node.op in _CALLABLE_OPS:
                self.kinds[node] = self._trace_kinds(node)
                self.reasons[node] = self._reason(node)

    def _call(self, node, args, kwargs):
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        return self.gm.get_submodule(node.target)(*args, **kwargs)

    def _trace_kinds(self, node):
        args = torch.fx.node.map_arg(node.args, lambda n: self.values[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.values[n])
        flat, spec = pytree.tree_flatten((args, kwargs))
        where = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
        if not where or not _tensors_in(self.values.get(node)):
            return None

        def alone(*tensors):
            leaves = list(flat)
            for i, t in zip(where, tensors):
                leaves[i] = t
            a, k = pytree.tree_unflatten(leaves, spec)
            return self._call(node, a, k)

        try:
            import warnings
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                traced = torch.jit.trace(alone, tuple(flat[i] for i in where), check_trace=False, strict=False,
                                         _store_inputs=False)
        except Exception:
            return None
        return [n.kind() for n in traced.graph.nodes() if n.kind().startswith("aten::")]

    def _reason(self, node):
        value = self.values.get(node)
        outs = _tensors_in(value)
        if not outs:
            return "its result is not a tensor"
        ins = [self.values[n] for n in node.all_input_nodes]
        for t in outs + _tensors_in(ins):
            if t.dtype not in compiler._DTYPES:
                return f"dtype {str(t.dtype).replace('torch.', '')} is not compiled by Kiln"
            if t.device.type != "cpu":
                return f"a tensor on {t.device}"
        kinds = self.kinds.get(node)
        if kinds is None:
            return "it cannot be traced on its own"
        missing = [k for k in kinds if k not in self.known]
        if missing:
            return f"{missing[0]} is not supported by Kiln"
        return ""

    def supported(self, node):
        return not self.reasons.get(node, "x") and node not in self.refused

    def reason(self, node):
        return self.refused.get(node) or self.reasons.get(node, "")

    def ops(self, node):
        kinds = self.kinds.get(node)
        return list(kinds) if kinds else [_node_name(node)]

    def refuse(self, nodes, error):
        """Kiln refused a subgraph of `nodes` with `error`: take out the nodes of the named operator.
        Returns whether any node was taken out."""
        named = set(re.findall(r"aten::[A-Za-z0-9_]+", error.message))
        hit = [n for n in nodes if any(k in (self.kinds.get(n) or []) for k in named)]
        if not hit and len(nodes) == 1:
            hit = list(nodes)
        for n in hit:
            self.refused[n] = error.message
        return bool(hit)


class _Support(OperatorSupportBase):
    def __init__(self, judge):
        super().__init__()
        self.judge = judge

    def is_node_supported(self, submodules, node):
        return self.judge.supported(node)


def _run_recording(gm, inputs):
    """Runs `gm` on `inputs`; returns every node's value."""
    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n] = out
            return out

    with torch.no_grad():
        Recorder(gm).run(*inputs)
    return values


# --- the backend ---------------------------------------------------------------------------------

def _signature(tensors):
    return ", ".join(f"{compiler._DTYPES.get(t.dtype, (None, str(t.dtype)))[1]}{compiler._shape_str(t.shape)}"
                     for t in tensors)


class _FrozenGraph(torch.nn.Module):
    """`gm` with the inputs at `frozen` (index -> tensor) bound as constants: what Kiln traces."""

    def __init__(self, gm, frozen):
        super().__init__()
        self.gm = gm
        self.frozen = frozen
        for i, t in frozen.items():
            self.register_buffer(f"frozen_{i}", t.detach(), persistent=False)
        self.count = len([n for n in gm.graph.nodes if n.op == "placeholder"])

    def forward(self, *live):
        it = iter(live)
        args = [getattr(self, f"frozen_{i}") if i in self.frozen else next(it) for i in range(self.count)]
        return self.gm(*args)


def _stamp(t):
    """What changes when a weight does: an in-place update bumps the tensor's version counter,
    a new tensor in its place has other storage."""
    return t._version, t.data_ptr()


class _KilnCall(torch.nn.Module):
    """Runs Kiln's compiled code in place of a graph, dropping the frozen (weight) arguments.
    Dynamo hands the module's current weights in with every call: when one of them changed since
    the compile (an optimizer step, load_state_dict, an in-place edit), the graph is compiled
    again with the new values before it runs."""

    def __init__(self, compiled, live, frozen, rebuild):
        super().__init__()
        self.compiled = compiled
        self.live = live
        self.stamps = {i: _stamp(t) for i, t in frozen.items()}
        self.rebuild = rebuild  # args -> CompiledModule, the weights at their indices frozen
        self.report = None  # its SubgraphReport, which counts the calls and recompiles

    def forward(self, *args):
        if any(_stamp(args[i]) != stamp for i, stamp in self.stamps.items()):
            self.compiled = self.rebuild(args)
            self.stamps = {i: _stamp(args[i]) for i in self.stamps}
            if self.report is not None:
                self.report.recompiles += 1
        out = self.compiled(*[args[i] for i in self.live])
        if self.report is not None:
            self.report.calls += 1
        return out


class OptimizedModule:
    """A module whose supported parts run as Kiln code. Call it like the module."""

    def __init__(self, module, opt_level=3, records=None, threads=None, target="llvm", partition=True):
        if not isinstance(module, torch.nn.Module):
            raise KilnError(f"kiln.torch.optimize takes an nn.Module, got {type(module).__name__}", "usage", 2)
        self.module = module.eval()
        self.options = {"opt_level": opt_level, "records": records, "threads": threads, "target": target}
        self.partition = partition
        self._graphs = []
        self._lock = threading.Lock()
        self._weights = {id(t) for t in list(module.parameters()) + list(module.buffers())}
        self._compiled = torch.compile(module, backend=self._backend, dynamic=False)

    def __call__(self, *args, **kwargs):
        with torch.no_grad():
            return self._compiled(*args, **kwargs)

    forward = __call__

    def report(self):
        with self._lock:
            return Report(self._graphs)

    # The backend: called by dynamo with each captured FX graph and its example inputs.
    def _backend(self, gm, example_inputs):
        live = [i for i, x in enumerate(example_inputs)
                if not (isinstance(x, torch.Tensor) and id(x) in self._weights)]
        shown = [example_inputs[i] for i in live if isinstance(example_inputs[i], torch.Tensor)]
        with self._lock:
            graph = GraphReport(len(self._graphs), _signature(shown))
            self._graphs.append(graph)
        ops_of = lambda nodes: [_node_name(n) for n in nodes]
        nodes = [n for n in gm.graph.nodes if n.op in _CALLABLE_OPS]
        if not nodes:
            graph.subgraphs.append(SubgraphReport(False, [], "the graph has no operators"))
            return gm
        try:
            call = self._compile(gm, example_inputs)
            call.report = SubgraphReport(True, ops_of(nodes), log=call.compiled.compile_log)
            graph.subgraphs.append(call.report)
            return call
        except KilnError as e:
            whole_error = e
        if not self.partition:
            graph.subgraphs.append(SubgraphReport(False, ops_of(nodes), whole_error.message))
            return gm
        try:
            return self._partitioned(gm, example_inputs, graph)
        except KilnError as e:
            graph.subgraphs = [SubgraphReport(False, ops_of(nodes), e.message)]
            return gm

    def _compile(self, gm, inputs):
        """kiln.compile of `gm` on `inputs`, weights frozen; a callable taking all of gm's arguments."""
        if not all(isinstance(x, torch.Tensor) for x in inputs):
            raise KilnError("the graph takes non-tensor inputs", "unsupported", 4)
        frozen = {i: x for i, x in enumerate(inputs) if id(x) in self._weights}
        live = [i for i in range(len(inputs)) if i not in frozen]
        o = self.options

        def build(values):
            weights = {i: values[i] for i in frozen}
            return compiler.compile(_FrozenGraph(gm, weights), tuple(values[i] for i in live),
                                    opt_level=o["opt_level"], records=o["records"], threads=o["threads"],
                                    target=o["target"])

        return _KilnCall(build(inputs), live, frozen, build)

    def _partitioned(self, gm, inputs, graph):
        judge = _Judge(gm, _run_recording(gm, inputs))
        for round_ in range(_MAX_PARTITION_ROUNDS + 1):
            parts = CapabilityBasedPartitioner(gm, _Support(judge), allows_single_node_partition=True) \
                .propose_partitions()
            # Partitions in graph order, each with its nodes in graph order.
            order = {n: i for i, n in enumerate(gm.graph.nodes)}
            parts = sorted(([n for n in gm.graph.nodes if n in p.nodes] for p in parts if p.nodes),
                           key=lambda nodes: order[nodes[0]])
            compiled = self._try_partitions(gm, parts, judge, final=round_ == _MAX_PARTITION_ROUNDS)
            if compiled is not None:
                break
        self._describe(gm, compiled, judge, graph)
        return self._assemble(gm, compiled)

    def _try_partitions(self, gm, parts, judge, final):
        """Compiles every partition alone, on its inputs' example values. Returns [(call, nodes,
        number of inputs)] of the compiled ones, or None when Kiln refused an operator whose nodes
        were taken out (partition again)."""
        from torch.fx.passes.utils.fuser_utils import fuse_as_graphmodule
        done = []
        retry = False
        for nodes in parts:
            sub, ins, _ = fuse_as_graphmodule(gm, nodes, "kiln_probe")
            try:
                call = self._compile(sub, [judge.values[n] for n in ins])
                done.append((call, nodes, len(ins)))
            except KilnError as e:
                if not final and judge.refuse(nodes, e):
                    retry = True
                else:
                    for n in nodes:
                        judge.refused.setdefault(n, e.message)
        return None if retry else done

    @staticmethod
    def _describe(gm, compiled, judge, graph):
        """The report, in graph order: compiled partitions and the runs of PyTorch nodes between."""
        owner = {n: k for k, (_, nodes, _) in enumerate(compiled) for n in nodes}
        current = None
        by_partition = {}  # a partition interleaved with PyTorch nodes in graph order is one report
        for n in gm.graph.nodes:
            if n.op not in _CALLABLE_OPS:
                continue
            if n in owner:
                key = ("kiln", owner[n])
                if current is None or current[0] != key:
                    if owner[n] not in by_partition:
                        call = compiled[owner[n]][0]
                        call.report = SubgraphReport(True, [], log=call.compiled.compile_log)
                        by_partition[owner[n]] = call.report
                        graph.subgraphs.append(call.report)
                    current = (key, by_partition[owner[n]])
            else:
                reason = judge.reason(n) or "left out of the compiled subgraphs"
                key = ("torch", reason)
                if current is None or current[0] != key:
                    current = (key, SubgraphReport(False, [], reason))
                    graph.subgraphs.append(current[1])
            current[1].ops.extend(judge.ops(n))

    @staticmethod
    def _assemble(gm, compiled):
        """`gm` (changed in place) with each compiled partition replaced by a call of Kiln's code."""
        from torch.fx.passes.tools_common import stable_topological_sort
        from torch.fx.passes.utils.fuser_utils import erase_nodes, fuse_as_graphmodule, insert_subgm
        for k, (call, nodes, num_inputs) in enumerate(compiled):
            name = f"kiln_{k}"
            # The same extraction as when it was compiled: the same inputs, in the same order (an
            # input produced by an earlier fused partition is now that call's output).
            sub, ins, outs = fuse_as_graphmodule(gm, nodes, name)
            if len(ins) != num_inputs:
                raise KilnError(f"internal error: partition {k} has {len(ins)} inputs, compiled with {num_inputs}",
                                "internal", 70)
            insert_subgm(gm, sub, ins, outs, nodes[-1])
            erase_nodes(gm, nodes)
            setattr(gm, name, call)
        stable_topological_sort(gm)
        gm.graph.lint()
        gm.recompile()
        return gm


def optimize(module, opt_level=3, records=None, threads=None, target="llvm", partition=True):
    """Returns an OptimizedModule: `module` (put in eval mode) under torch.compile with Kiln as the
    backend. Supported graphs (or, with `partition`, their supported subgraphs) run as Kiln code
    compiled for each input shape on its first call; the rest runs in PyTorch. Weights are frozen
    at that first call. `report()` says what was compiled and what fell back, and why."""
    return OptimizedModule(module, opt_level=opt_level, records=records, threads=threads, target=target,
                           partition=partition)
