"""Capturing a PyTorch generation step as one aten graph (`make_fx`, fake tensors).

`trace(fn, example_inputs)` records `fn(*tensors) -> list of tensors` as a
`torch.fx.GraphModule` of aten operations: Keras's Python runs once, at trace
time, so running the graph costs only the aten calls (no Keras dispatch), and
the same graph is what inductor compiles (`torch_compile`). The graph computes
the values `fn` computes, with the same aten kernels in the same order.

A loop body is a closure: `Captured` finds the tensors it reaches through its
closure cells and defaults (nested functions, dicts, lists, tuples: a seed,
`eos_id`, the prompt's padding, a seq2seq context) so that they become graph
inputs instead of constants frozen into the graph; its other Python values (a
segment size, a sampler name) are constants of the graph and part of its
cache key, with the shapes and dtypes of every input. Tensors reached through
object attributes (`self.x`) are not found: they would be frozen into the
graph, so the loops pass their tensors through closures or the loop state.
"""

import contextlib
import types

import keras
import torch
from torch.utils import _pytree as pytree


@contextlib.contextmanager
def traceable_cond():
    """`keras.ops.cond` on a traced predicate computes both branches and selects with
    `where` (the branches are pure: the same values as the eager `cond`); PyTorch's
    `cond` is a Python `if`, which a trace cannot take on a value it does not know.

    Keras has no public hook for this: the torch backend's `core.cond` is replaced
    while tracing; a call on a real (not fake) predicate, from any thread, still goes
    to the eager `cond`."""
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


def trace(fn, example_inputs):
    """`fn(*tensors) -> list of tensors` recorded as an aten `GraphModule` (fake tensors)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    with traceable_cond():
        return make_fx(fn, tracing_mode="fake")(*example_inputs)


def dense(tensors):
    """Contiguous tensors: a graph is compiled for its example inputs' strides (a broadcast
    state, stride 0, would be read wrongly later), so every input is made contiguous."""
    return [x.contiguous() for x in tensors]


def signature(leaves):
    """Shapes, dtypes and devices of tensors (part of a graph's cache key)."""
    return tuple((tuple(x.shape), x.dtype, x.device) for x in leaves)


def constant_key(value):
    """A hashable key of a Python value a graph holds as a constant."""
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return (type(value), value)


def write_back(inputs, outputs):
    """Inside a trace: copies `outputs` into the `inputs` buffers of the same shapes
    (the loop state updated in place, so that inductor writes a cache slot instead of
    copying the cache). An output that is a view, or another input, is cloned first:
    every value is read before any input is overwritten."""
    fresh = []
    for i, y in enumerate(outputs):
        aliased = y._base is not None or any(y is x for j, x in enumerate(inputs) if j != i)
        fresh.append(y.clone() if aliased else y)
    for x, y in zip(inputs, fresh):
        if y is not x:
            x.copy_(y)


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
            return constant_key(fn)
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
