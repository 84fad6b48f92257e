"""Compiled generation on PyTorch: the prefill and the loop step as aten graphs, then inductor kernels.

On PyTorch `keras.ops.while_loop` is a Python loop and every Keras op pays its
dispatch. `compile_function(fn, model, active)` returns `run(*tensors)`, which
runs the generation function `fn` (a `decoding` / `beam` / `sliding_window`
loop) in Python under `torch.no_grad()` while `active.compiler` is set, so that
two hooks of `generation.compiled` come here:

* `compiled.SharedStep` (the model's `decode_step`, a prefill): `call` captures
  the step once per input signature;
* `compiled.while_loop` (each cache segment of a loop): `while_loop` captures
  the loop's condition and body as a CHUNK of steps (`torch_loop.chunk`: up to
  16 steps while the condition holds, in one graph) that update the state's
  tensors in place (`torch_capture.write_back`: a step writes one cache slot
  instead of copying the caches), and calls it until the condition fails. What
  a step computes from the weights alone is computed once per chunk
  (`torch_loop.prepare`). Between two chunks the loop is Python, so Ctrl-C
  raises `KeyboardInterrupt` there.

Each captured function is a `Graph` with two tiers. Its aten graph
(`torch_capture.trace`, a few seconds) runs at once: the Keras dispatch is gone
and the values are those of the eager loop. Inductor compiles the same graph
in a background thread (`compile_fx`, tens of seconds on a small CPU); once it
is ready the next call of that graph runs the compiled kernels, so a first call
does not wait for the compiler. `wait()` blocks until the compilations started
so far are done. `KERAS_TFM_TORCH_COMPILE=sync` compiles in the calling thread
instead. A compilation takes the caller's intra-op thread count
(`torch.get_num_threads()`): the larger loops of the kernels it generates run on
that many threads. A call made while a compilation runs uses one thread
(`torch.set_num_threads`, restored after; per thread in PyTorch's OpenMP builds):
the compiler holds cores, and a team of threads would stall waiting for them.
The model's variables are *inputs* of every graph (`keras.StatelessScope`), so
training after capture is seen.

Where the compiler cannot run (inductor does not import, no C++ compiler for
CPU code, compiling fails) the aten graphs run uncompiled; where capturing
fails, PyTorch is older than the loops need (`torch_loop.unsupported`), or
`KERAS_TFM_TORCH_COMPILE=0`, the loop runs eagerly (Keras ops). Each
case gives ONE `RuntimeWarning` per reason naming it.
"""

import copy
import os
import queue
import threading
import warnings

import keras
import torch
from torch.utils import _pytree as pytree

from keras_tfm.generation import torch_capture as capture
from keras_tfm.generation import torch_loop

#: Environment variable: "0" eager, "sync" compile in the calling thread, else background.
ENV_SWITCH = "KERAS_TFM_TORCH_COMPILE"

#: Inductor options of every graph: no per-call size/stride assertions (every input is made
#: contiguous, `torch_capture.dense`); a generated loop nest runs on several threads only when
#: each thread gets at least `cpp.min_chunk_size` elements (an OpenMP fork/join costs more than
#: most of a decoding step's kernels; at batch 1 even the attention over the cache is too small
#: to split, at batch 8 it is worth splitting), with as many threads as the calling thread's
#: `torch.get_num_threads()` when it runs; compiled in this process (no pool of compile
#: workers to start); a C++ wrapper (one compiled module per graph, less Python per call);
#: `topk` and `sort` as in eager PyTorch (the same order of tied scores in beam search).
INDUCTOR_OPTIONS = {
    "size_asserts": False,
    "cpp.min_chunk_size": 32768,
    "compile_threads": 1,
    "cpp_wrapper": True,
    "triton.decompose_sort_ops": False,
}

_WARNED = set()  # reasons already warned about (one warning each per process)


def _mode():
    value = os.environ.get(ENV_SWITCH, "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        return "eager"
    return "sync" if value == "sync" else "background"


def compiler_problem(device_type: str = "cpu") -> str | None:
    """Why inductor cannot compile for `device_type` here, or None when it can:
    inductor's import, the C++ compiler."""
    try:
        from torch._inductor import compile_fx  # noqa: F401
        from torch._inductor.cpp_builder import get_cpp_compiler
    except Exception as error:  # ImportError, or a broken install raising anything
        return f"torch inductor does not import ({type(error).__name__}: {error})"
    if device_type == "cpu":
        try:
            get_cpp_compiler()
        except Exception as error:
            return f"no C++ compiler for inductor's CPU code ({type(error).__name__}: {error}; set CXX)"
    return None


def compile_graph(graph, example_inputs):
    """Inductor's compiled callable of a traced aten `graph` (`torch_capture.trace`)."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    with inductor_config.patch(INDUCTOR_OPTIONS):
        return compile_fx(graph, list(example_inputs))


def _warn_once(reason, what="uncompiled"):
    if reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(
            f"keras_tfm generation runs {what} on PyTorch (slower): {reason}.", RuntimeWarning, stacklevel=5
        )


def _first_line(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"


class _Worker:
    """One daemon thread that runs compile jobs in order (a process exits without waiting)."""

    def __init__(self):
        self.jobs = queue.Queue()
        self.pending = 0
        self.done = threading.Condition()
        self.thread = None

    def submit(self, job):
        with self.done:
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="keras_tfm-inductor", daemon=True)
                self.thread.start()
        self.jobs.put(job)

    def _run(self):
        while True:
            job = self.jobs.get()
            try:
                job()
            finally:
                with self.done:
                    self.pending -= 1
                    self.done.notify_all()

    def wait(self, timeout):
        with self.done:
            return self.done.wait_for(lambda: self.pending == 0, timeout)


_WORKER = _Worker()

#: Held while a graph is traced or compiled: `make_fx` patches `torch.nn.Module` globally.
_TRACE_LOCK = threading.Lock()


def wait(timeout: float | None = None) -> bool:
    """Blocks until the inductor compilations started so far are done (compiled or failed).

    Returns:
        False if `timeout` seconds passed first, else True.
    """
    return _WORKER.wait(timeout)


class Graph:
    """One captured function: its traced aten graph until inductor's `compiled` is set.

    Calling it runs the best tier ready: `graph(*tensors) -> list of tensors`. The traced
    graph runs through its generated `forward` code, not `nn.Module.__call__` (which a
    trace in another thread patches)."""

    def __init__(self, traced, out_spec=None):
        from torch.fx._lazy_graph_module import _LazyGraphModule

        _LazyGraphModule.force_recompile(traced)
        self.traced = traced
        self.forward = traced.forward
        self.compiled = None
        self.out_spec = out_spec

    def __call__(self, *tensors):
        return (self.compiled or self.forward)(*tensors)


class TorchCompiler:
    """The captured graphs of one generation function (one `Generator` configuration).

    Attributes: `model`, `graphs` (cache key → `Graph`), `trace_count`, `compile_count`
    (graphs inductor has compiled), `eager_reason` (None, or why this function runs
    eagerly), `tracing`.
    """

    def __init__(self, model):
        self.model = model
        self.variables = list(model.variables)
        self.graphs = {}
        self.trace_count = 0
        self.compile_count = 0
        self.eager_reason = None
        self.tracing = False
        self.jobs = []  # compile jobs of the graphs captured by the running call

    def values(self):
        """The variables' current tensors, the first inputs of every graph."""
        return [v.value for v in self.variables]

    def _graph(self, key, flat, example_inputs, box, mutated=(), invariant=None):
        """The `Graph` of `key` (tracing `flat`, which fills `box`, on a miss), or None: run
        eagerly. The inputs at the positions `mutated` are updated in place (a loop's state);
        a loop's graph (`torch_loop.chunk`) is given the positions of its `invariant` inputs."""
        graph = self.graphs.get(key)
        if graph is not None or self.eager_reason is not None:
            return graph
        mode = _mode()
        reason = (
            f"{ENV_SWITCH}={os.environ.get(ENV_SWITCH)!r} turns compilation off"
            if mode == "eager"
            else torch_loop.unsupported()
        )
        if reason is None:
            self.tracing = True
            try:
                with _TRACE_LOCK:
                    traced = capture.trace(flat, example_inputs)
                    if invariant is not None:
                        traced = torch_loop.prepare(traced, invariant)
            except Exception as error:  # a capture failure must not fail generation
                reason = f"capturing the step failed ({_first_line(error)})"
            finally:
                self.tracing = False
        if reason is not None:
            self.eager_reason = reason
            _warn_once(reason, "eagerly")
            return None
        graph = self.graphs[key] = Graph(traced, box.get("spec"))
        self.trace_count += 1
        problem = compiler_problem(example_inputs[0].device.type if example_inputs else "cpu")
        if problem is not None:
            _warn_once(problem)
            return graph
        examples = [x.clone() if i in mutated else x for i, x in enumerate(example_inputs)]
        self.jobs.append(self._compile_job(graph, examples))
        return graph

    def start_compiling(self):
        """Hands the graphs captured by the call that ends to inductor: in the background
        thread, or here with `KERAS_TFM_TORCH_COMPILE=sync`."""
        jobs, self.jobs = self.jobs, []
        threads = torch.get_num_threads()  # the caller's: inductor decides its loops' threads by it
        for job in jobs:
            job(threads) if _mode() == "sync" else _WORKER.submit(lambda job=job: job(threads))

    def _compile_job(self, graph, examples):
        def job(threads):
            torch.set_num_threads(threads)
            try:
                with _TRACE_LOCK:
                    compiled = compile_graph(copy.deepcopy(graph.traced), examples)
            except Exception as error:  # a compiler failure must not fail generation
                _warn_once(f"compiling failed ({_first_line(error)})")
                return
            graph.compiled = compiled
            self.compile_count += 1

        return job

    def _stateless(self, values):
        return keras.StatelessScope(state_mapping=list(zip(self.variables, values)))

    def call(self, fn, *args):
        """`fn(*args)` (nested tensors in and out, e.g. a model's `decode_step`), captured."""
        if self.tracing:
            return fn(*args)
        leaves, spec = pytree.tree_flatten(args)
        if not all(isinstance(x, torch.Tensor) or x is None for x in leaves):
            return fn(*args)
        tensors = capture.dense(x for x in leaves if x is not None)
        values = self.values()
        n, box = len(values), {}

        def flat(*xs):
            it = iter(xs[n:])
            args = pytree.tree_unflatten([None if x is None else next(it) for x in leaves], spec)
            with self._stateless(xs[:n]):
                out = fn(*args)
            out_leaves, box["spec"] = pytree.tree_flatten(out)
            return out_leaves

        key = ("call", capture.constant_key(fn), repr(spec), capture.signature(tensors))
        graph = self._graph(key, flat, [*values, *tensors], box)
        if graph is None:
            return fn(*args)
        return pytree.tree_unflatten(list(graph(*values, *tensors)), graph.out_spec)

    def while_loop(self, cond, body, loop_vars):
        """`keras.ops.while_loop(cond, body, loop_vars)` (a tuple of nested tensors) with
        `body` and `cond` captured as chunks of steps that update the state in place
        (`torch_loop.chunk`); the chunks run from Python."""
        loop_vars = tuple(keras.tree.map_structure(keras.ops.convert_to_tensor, tuple(loop_vars)))
        if self.tracing or not bool(cond(*loop_vars)):
            return keras.ops.while_loop(cond, body, loop_vars) if self.tracing else loop_vars
        captured = capture.Captured((cond, body))
        leaves, spec = pytree.tree_flatten(loop_vars)
        # The loop's own buffers (contiguous, written by every step) and its constants, each
        # a distinct tensor: the inputs of a compiled loop must not alias one another.
        leaves = [x.clone(memory_format=torch.contiguous_format) for x in leaves]
        constants = [x.clone(memory_format=torch.contiguous_format) for x in captured.tensors]
        values = self.values()
        n, m = len(values), len(leaves)

        def split(xs):
            state = pytree.tree_unflatten(list(xs[n : n + m]), spec)
            return self._stateless(xs[:n]), captured.substituted(xs[n + m :]), state

        def keep(*xs):
            scope, substituted, state = split(xs)
            with scope, substituted:
                return keras.ops.convert_to_tensor(cond(*state))

        def step(*xs):
            scope, substituted, state = split(xs)
            with scope, substituted:
                state = tuple(body(*state))
            out_leaves, out_spec = pytree.tree_flatten(state)
            if out_spec != spec or capture.signature(out_leaves) != capture.signature(xs[n : n + m]):
                raise ValueError(f"the loop body changes its state's structure or shapes ({out_spec})")
            capture.write_back(xs[n : n + m], out_leaves)

        def flat(*xs):
            return [torch_loop.chunk(keep, step, xs, mutated=range(n, n + m))]

        key = ("loop", captured.key, repr(spec), capture.signature(leaves), capture.signature(constants))
        args = [*values, *leaves, *constants]
        invariant = [*range(n), *range(n + m, len(args))]
        graph = self._graph(key, flat, args, {}, mutated=range(n, n + m), invariant=invariant)
        if graph is None:
            return keras.ops.while_loop(cond, body, loop_vars)
        while int(graph(*args)[0]) == torch_loop.CHUNK:
            pass
        return pytree.tree_unflatten(leaves, spec)


def compile_function(fn, model, active):
    """`run(*tensors)`: `fn` under `torch.no_grad()` with `active.compiler` set to a
    `TorchCompiler` of `model` (see the module docstring)."""
    compiler = TorchCompiler(model)

    def run(*args):
        previous = getattr(active, "compiler", None)
        active.compiler = compiler
        threads = torch.get_num_threads()
        if _WORKER.pending:  # inductor and its C++ compiler hold cores: one thread, no stalls
            torch.set_num_threads(1)
        try:
            with torch.no_grad():
                return fn(*args)
        finally:
            torch.set_num_threads(threads)
            active.compiler = previous
            compiler.start_compiling()

    run.compiler = compiler
    return run
