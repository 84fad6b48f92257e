"""Compiled generation on PyTorch: the prefill and the loop step as inductor kernels.

On PyTorch `keras.ops.while_loop` is a Python loop and every Keras op pays its
dispatch. `compile_function(fn, model, active)` returns `run(*tensors)`, which
runs the generation function `fn` (a `decoding` / `beam` / `sliding_window`
loop) in Python under `torch.no_grad()` while `active.compiler` is set, so that
two hooks of `generation.compiled` come here:

* `compiled.SharedStep` (the model's `decode_step`, a prefill): `call` traces
  the step once per input signature;
* `compiled.while_loop` (each cache segment of a loop): `while_loop` traces the
  loop's body and its condition as ONE step, `state -> (next state, keep)`,
  and runs it while `keep` holds. The loop stays in Python, so Ctrl-C raises
  `KeyboardInterrupt` between two steps.

Tracing (`make_fx`, fake tensors) sees only tensor operations: Keras's Python
runs at trace time, so the graph has no break. The model's variables are
*inputs* of the graph (`keras.StatelessScope`), so training after compilation
is seen. A loop body is a closure: the tensors it reaches through its closure
cells and defaults (nested functions, dicts, lists, tuples: a seed, `eos_id`,
the prompt's padding, a seq2seq context) are inputs too, substituted in the
cells while tracing; its other Python values (a segment size, a sampler name)
are constants of the graph and part of its cache key, with the shapes and
dtypes of every input. `inductor` compiles each graph once (`compile_fx`); a
later call with the same key reuses it.

Where the compiler cannot run (`KERAS_TFM_TORCH_COMPILE=0`, inductor does not
import, no C++ compiler for CPU code, tracing or compiling fails), the
function runs eagerly, with ONE `RuntimeWarning` per reason naming it.
"""

import contextlib
import os
import types
import warnings

import keras
import torch
from torch.utils import _pytree as pytree

#: Environment variable that turns compilation off ("0": eager, with one warning).
ENV_SWITCH = "KERAS_TFM_TORCH_COMPILE"

#: Inductor options of every graph: no per-call size/stride assertions (every input is made
#: contiguous, `_dense`); single-threaded generated kernels (a decoding step's kernels are
#: small: an OpenMP fork/join per kernel costs more than it saves, far more on a loaded
#: machine); compiled in this process (no pool of compile workers to start); a C++ wrapper
#: (one compiled module per graph, less Python per call); `topk` and `sort` as in eager
#: PyTorch (the same order of tied scores in beam search).
INDUCTOR_OPTIONS = {
    "size_asserts": False,
    "cpp.threads": 1,
    "compile_threads": 1,
    "cpp_wrapper": True,
    "triton.decompose_sort_ops": False,
}

_WARNED = set()  # reasons already warned about (one warning each per process)


def compiler_problem(device_type: str = "cpu") -> str | None:
    """Why inductor cannot compile for `device_type` here, or None when it can:
    the `KERAS_TFM_TORCH_COMPILE` switch, inductor's import, the C++ compiler."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"{ENV_SWITCH}={os.environ[ENV_SWITCH]!r} turns compilation off"
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


@contextlib.contextmanager
def traceable_cond():
    """`keras.ops.cond` on a traced predicate computes both branches and selects with
    `where` (the branches are pure: the same values as the eager `cond`); PyTorch's
    `cond` is a Python `if`, which a trace cannot take on a value it does not know."""
    from keras.src import backend
    from torch._subclasses.fake_tensor import FakeTensor

    core = backend.core
    eager_cond = core.cond

    def cond(pred, true_fn, false_fn):
        if not isinstance(pred, FakeTensor):
            return eager_cond(pred, true_fn, false_fn)
        pred = pred.to(torch.bool)
        return keras.tree.map_structure(lambda a, b: torch.where(pred, a, b), true_fn(), false_fn())

    core.cond = cond
    try:
        yield
    finally:
        core.cond = eager_cond


def compile_graph(fn, example_inputs):
    """`fn(*tensors) -> list of tensors` traced with fake tensors and compiled by inductor."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx
    from torch.fx.experimental.proxy_tensor import make_fx

    with traceable_cond():
        graph = make_fx(fn, tracing_mode="fake")(*example_inputs)
    with inductor_config.patch(INDUCTOR_OPTIONS):
        return compile_fx(graph, list(example_inputs))


def _warn_once(reason):
    if reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(
            f"keras_tfm generation runs eagerly on PyTorch (slow): {reason}.", RuntimeWarning, stacklevel=4
        )


def _dense(tensors):
    """Contiguous tensors: a graph is compiled for its example inputs' strides (a broadcast
    state, stride 0, would be read wrongly later), so every input is made contiguous."""
    return [x.contiguous() for x in tensors]


def _signature(leaves):
    return tuple((tuple(x.shape), x.dtype, x.device) for x in leaves)


def _constant_key(value):
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return (type(value), value)


class Captured:
    """The tensors that functions reach through their closures and defaults.

    `key` describes everything else they capture (code, Python constants, the
    tensors' shapes and dtypes); `tensors` lists the tensors; `substituted(xs)`
    puts `xs` in their places (a context manager)."""

    def __init__(self, functions):
        self.slots = []  # (setter, original value, leaves, tree spec, tensor positions)
        self.tensors = []
        self._seen = {}
        self.key = tuple(self._function(f) for f in functions)

    def _function(self, fn):
        if not isinstance(fn, types.FunctionType):
            return _constant_key(fn)
        if id(fn) in self._seen:
            return ("seen", self._seen[id(fn)])
        self._seen[id(fn)] = len(self._seen)
        parts = [fn.__code__]
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not yet filled
                parts.append(("empty",))
                continue
            parts.append(self._value(value, lambda v, cell=cell: setattr(cell, "cell_contents", v)))
        if fn.__defaults__:
            parts.append(self._value(fn.__defaults__, lambda v, fn=fn: setattr(fn, "__defaults__", v)))
        return tuple(parts)

    def _value(self, value, setter):
        leaves, spec = pytree.tree_flatten(value)
        keys, positions = [], []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                positions.append(i)
                self.tensors.append(leaf)
                keys.append(("tensor", tuple(leaf.shape), leaf.dtype, leaf.device))
            else:
                keys.append(self._function(leaf))
        if positions:
            self.slots.append((setter, value, leaves, spec, positions))
        return (repr(spec) if len(leaves) > 1 or leaves[:1] != [value] else None, tuple(keys))

    @contextlib.contextmanager
    def substituted(self, tensors):
        it = iter(tensors)
        try:
            for setter, _, leaves, spec, positions in self.slots:
                new = list(leaves)
                for i in positions:
                    new[i] = next(it)
                setter(pytree.tree_unflatten(new, spec))
            yield
        finally:
            for setter, value, *_ in reversed(self.slots):
                setter(value)


class TorchCompiler:
    """The compiled graphs of one generation function (one `Generator` configuration).

    Attributes: `model`, `graphs` (cache key → compiled callable), `compile_count`,
    `eager_reason` (None, or why this function runs eagerly), `tracing`.
    """

    def __init__(self, model):
        self.model = model
        self.variables = list(model.variables)
        self.graphs = {}
        self.compile_count = 0
        self.eager_reason = None
        self.tracing = False

    def values(self):
        """The variables' current tensors, the first inputs of every graph."""
        return [v.value for v in self.variables]

    def _graph(self, key, flat, example_inputs, box):
        """`(compiled graph, box)` of `key` (compiling `flat`, which fills `box`, on a miss),
        or None: run eagerly."""
        entry = self.graphs.get(key)
        if entry is not None or self.eager_reason is not None:
            return entry
        reason = compiler_problem(example_inputs[0].device.type if example_inputs else "cpu")
        if reason is None:
            self.tracing = True
            try:
                graph = compile_graph(flat, example_inputs)
            except Exception as error:  # a compiler failure must not fail generation
                first = (str(error).strip().splitlines() or [""])[0]
                reason = f"compiling failed ({type(error).__name__}: {first})"
            finally:
                self.tracing = False
        if reason is not None:
            self.eager_reason = reason
            _warn_once(reason)
            return None
        self.graphs[key] = (graph, box)
        self.compile_count += 1
        return self.graphs[key]

    def _stateless(self, values):
        return keras.StatelessScope(state_mapping=list(zip(self.variables, values)))

    def call(self, fn, *args):
        """`fn(*args)` (nested tensors in and out, e.g. a model's `decode_step`), compiled."""
        if self.tracing:
            return fn(*args)
        leaves, spec = pytree.tree_flatten(args)
        if not all(isinstance(x, torch.Tensor) or x is None for x in leaves):
            return fn(*args)
        tensors = _dense(x for x in leaves if x is not None)
        values = self.values()
        n, box = len(values), {}

        def flat(*xs):
            it = iter(xs[n:])
            args = pytree.tree_unflatten([None if x is None else next(it) for x in leaves], spec)
            with self._stateless(xs[:n]):
                out = fn(*args)
            out_leaves, box["spec"] = pytree.tree_flatten(out)
            return out_leaves

        key = ("call", _constant_key(fn), repr(spec), _signature(tensors))
        entry = self._graph(key, flat, [*values, *tensors], box)
        if entry is None:
            return fn(*args)
        graph, box = entry
        return pytree.tree_unflatten(list(graph(*values, *tensors)), box["spec"])

    def while_loop(self, cond, body, loop_vars):
        """`keras.ops.while_loop(cond, body, loop_vars)` (a tuple of nested tensors) with
        `body` and `cond` compiled as one step; the loop runs in Python."""
        loop_vars = tuple(keras.tree.map_structure(keras.ops.convert_to_tensor, tuple(loop_vars)))
        if self.tracing or not bool(cond(*loop_vars)):
            return keras.ops.while_loop(cond, body, loop_vars) if self.tracing else loop_vars
        captured = Captured((cond, body))
        leaves, spec = pytree.tree_flatten(loop_vars)
        leaves, constants = _dense(leaves), _dense(captured.tensors)
        values = self.values()
        n, m = len(values), len(leaves)

        def flat(*xs):
            state = pytree.tree_unflatten(list(xs[n : n + m]), spec)
            with self._stateless(xs[:n]), captured.substituted(xs[n + m :]):
                state = tuple(body(*state))
                keep = cond(*state)
            out_leaves, out_spec = pytree.tree_flatten(state)
            if out_spec != spec or _signature(out_leaves) != _signature(xs[n : n + m]):
                raise ValueError(f"the loop body changes its state's structure or shapes ({out_spec})")
            return [*out_leaves, keras.ops.convert_to_tensor(keep)]

        key = ("loop", captured.key, repr(spec), _signature(leaves), _signature(constants))
        entry = self._graph(key, flat, [*values, *leaves, *constants], {})
        if entry is None:
            return keras.ops.while_loop(cond, body, loop_vars)
        graph = entry[0]
        while True:
            out = graph(*values, *leaves, *constants)
            leaves = _dense(out[:m])
            if not bool(out[m]):
                return pytree.tree_unflatten(list(leaves), spec)


def compile_function(fn, model, active):
    """`run(*tensors)`: `fn` under `torch.no_grad()` with `active.compiler` set to a
    `TorchCompiler` of `model` (see the module docstring)."""
    compiler = TorchCompiler(model)

    def run(*args):
        previous = getattr(active, "compiler", None)
        active.compiler = compiler
        try:
            with torch.no_grad():
                return fn(*args)
        finally:
            active.compiler = previous

    run.compiler = compiler
    return run
