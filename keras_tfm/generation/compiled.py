"""Compiling and calling the generation functions on each Keras backend.

The decoding loops (`decoding`, `beam`, `sliding_window`) are written once
in `keras.ops` (`keras.ops.while_loop`, in-place `slice_update` of the
caches); this module turns one of them into a callable for the active
backend:

* TensorFlow: `tf.function(jit_compile=...)` (XLA by default), called in a
  worker thread so that Ctrl-C interrupts it (`interruptible_call`, below);
  generators are `tf.Module`s, so `tf.saved_model.save` can export their
  signatures.
* JAX: `jax.jit` of a stateless function of the model's variable values
  (`keras.StatelessScope`), the values passed as arguments at every call: no
  weights are baked into the compiled program, later training is seen, and
  sharded variables (`keras.distribution`, e.g. `ModelParallel`) keep their
  layout. It runs in the calling thread, inside the caller's distribution
  scope.
* PyTorch: the function runs in Python under `torch.no_grad()`, its prefill
  (`SharedStep`) and each of its loops (`while_loop`, in chunks of steps,
  `torch_loop`) captured as aten graphs (`torch_capture`) that inductor
  compiles in a background thread (`torch_compile`); uncompiled or eager, with
  one warning, where it cannot.

Inputs are numpy arrays; outputs come back as a dict of numpy arrays.

Ctrl-C on TensorFlow. A compiled decoding loop runs as one TensorFlow call:
Python handles a SIGINT only when that call returns, so Ctrl-C on a long
generation would wait for the whole loop. `interruptible_call(fn, *args)` runs
`fn` in a worker thread (under the caller's device scope) while the calling
thread waits in short slices: Ctrl-C raises `KeyboardInterrupt` in the caller
within `POLL_SECONDS`. The abandoned call cannot be cancelled inside
TensorFlow; it runs to its end in the background and its result is dropped
(generation calls are bounded, `prompts.MAX_NEW_TOKENS`, so it ends). A process must
not finalize Python while a worker is inside TensorFlow (the worker, returning,
would be torn down through TensorFlow's C++ frames and abort the process), so
when the interpreter exits while an abandoned call still runs, an `atexit` hook
flushes the standard streams and logging and ends the process at once, with
the status Python would give: killed by SIGINT after an unhandled
`KeyboardInterrupt`, 1 after another unhandled exception, else 0 or the status
given to `set_exit_status` (a `sys.exit` code is not visible to the hook;
`atexit` callbacks registered before this module's import do not run then).
"""

import atexit
import logging
import os
import queue
import signal
import sys
import threading

import keras

#: The `torch_compile.TorchCompiler` of the PyTorch generation call running in this thread.
_TORCH = threading.local()

#: Longest wait between two checks for a pending Ctrl-C, in seconds (TensorFlow).
POLL_SECONDS = 0.1

if keras.backend.backend() == "tensorflow":
    import tensorflow as _tf

    #: Base class of the generators: `tf.Module` on TensorFlow (export), else a plain object.
    Module = _tf.Module
else:

    class Module:
        """Stand-in for `tf.Module` off TensorFlow: holds a name only."""

        def __init__(self, name=None):
            self.name = name or type(self).__name__


class FunctionCache:
    """Plain (non-trackable) holder of compiled functions, so that
    `tf.saved_model.save(generator, ...)` saves only the model's variables and
    the signatures one passes explicitly."""

    def __init__(self):
        self.functions = {}


class SharedStep:
    """A decoding step traced once for every batch size and cache length.

    `step(ids, positions, caches, cache_index, padding_mask, context=None) ->
    (logits, caches)` (a model's `decode_step`) runs one token per row (`ids` `(batch, 1)`). In a TensorFlow
    graph it is called as one `tf.function` whose input signature leaves the
    batch axis and the cache slot axes (`slot_axis(i)` of cache tensor `i`,
    axis 1 of `padding_mask`) unknown: the loop bodies of every cache
    segment, of the sliding window and of beam search call the same traced
    function (XLA compiles it for each static shape it is called with), so
    the model is traced, exported and loaded once instead of once per loop.
    Nesting costs a little tracing time, so it is on only once `shared` is
    set (by the exporters, and by a loop with several cache segments:
    `decoding.share`). Otherwise, eagerly, on JAX and PyTorch, for several
    tokens (a prefill, whose attention implementation is chosen from its
    static length) and with a seq2seq context it calls `step` directly.
    """

    def __init__(self, step, slot_axis):
        self.step = step
        self.slot_axis = slot_axis
        self.shared = False
        self.functions = {}

    def __call__(self, ids, positions, caches, cache_index, padding_mask, context=None):
        torch_compiler = getattr(_TORCH, "compiler", None)
        if torch_compiler is not None:
            return torch_compiler.call(self.step, ids, positions, caches, cache_index, padding_mask, context)
        direct = not self.shared or keras.backend.backend() != "tensorflow" or _tf.executing_eagerly()
        if direct or ids.shape[1] != 1 or context is not None:
            return self.step(ids, positions, caches, cache_index, padding_mask, context)

        def spec(t, relaxed):
            shape = [None if axis in relaxed else d for axis, d in enumerate(t.shape)]
            return _tf.TensorSpec(shape, t.dtype)

        signature = (
            spec(ids, (0,)),
            spec(positions, (0,)),
            [spec(c, (0, self.slot_axis(i))) for i, c in enumerate(caches)],
            _tf.TensorSpec([], cache_index.dtype),
            spec(padding_mask, (0, 1)),
        )
        key = repr(signature)
        if key not in self.functions:
            self.functions[key] = _tf.function(self.step, input_signature=signature, autograph=False)
        return self.functions[key](ids, positions, list(caches), cache_index, padding_mask)


def compile_function(fn, model, *, jit_compile=True, run_eagerly=False):
    """`fn(*tensors) -> dict of tensors` compiled for the backend (see the module docstring).

    Args:
        fn: a traceable function of backend tensors that runs `model`.
        model: the Keras model whose variables `fn` reads.
        jit_compile: TensorFlow: XLA (True) or a plain graph function.
        run_eagerly: `fn` itself, uncompiled (debugging, tests).
    """
    backend = keras.backend.backend()
    if run_eagerly:
        return fn
    if backend == "tensorflow":
        return _tf.function(fn, jit_compile=jit_compile, reduce_retracing=False, autograph=False)
    if backend == "jax":
        import jax

        def stateless(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
                return fn(*args)

        jitted = jax.jit(stateless)

        def run(*args):
            return jitted([v.value for v in model.variables], *args)

        return run
    if backend == "torch":
        from keras_tfm.generation import torch_compile

        return torch_compile.compile_function(fn, model, _TORCH)
    raise RuntimeError(
        f"Generation runs on the tensorflow, jax and torch backends; the backend is {backend!r}."
    )


def while_loop(cond, body, loop_vars):
    """`keras.ops.while_loop`; inside a PyTorch generation call, compiled in chunks of
    steps (`torch_compile.TorchCompiler.while_loop`)."""
    torch_compiler = getattr(_TORCH, "compiler", None)
    if torch_compiler is not None:
        return torch_compiler.while_loop(cond, body, loop_vars)
    return keras.ops.while_loop(cond, body, loop_vars)


def compile_encoder_apart(fn, encode, model):
    """TensorFlow, encoder–decoder: a graph `tf.function` that runs `encode(source_ids,
    source_lengths)`, then `fn(context, *rest)` compiled by XLA. The encoder runs once per
    call, where XLA's fused kernels gain nothing and its compile only adds to the first call."""
    loop = compile_function(fn, model, jit_compile=True)

    def encode_then_decode(source_ids, source_lengths, *rest):
        return loop(encode(source_ids, source_lengths), *rest)

    return compile_function(encode_then_decode, model, jit_compile=False)


def call(fn, *args, run_eagerly=False):
    """Runs a function from `compile_function` on numpy inputs.

    TensorFlow (compiled): in a worker thread that Ctrl-C abandons
    (`interruptible_call`); elsewhere in the calling thread.

    Returns:
        `fn`'s dict with numpy values.
    """
    tensors = [keras.ops.convert_to_tensor(x) for x in args]
    if keras.backend.backend() == "tensorflow" and not run_eagerly:
        out = interruptible_call(fn, *tensors)
    else:
        out = fn(*tensors)
    return {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}


# --------------------------------------------------------------------------- Ctrl-C (TensorFlow)
def _device_name():
    """The caller's `tf.device` scope (thread-local, so the worker re-enters it)."""
    from tensorflow.python.eager import context

    return context.context().device_name


class _Worker(threading.Thread):
    """A daemon thread that runs one job at a time; kept for reuse (a fresh
    thread per call would set up TensorFlow's per-thread state every time)."""

    def __init__(self):
        super().__init__(name="keras_tfm-generation", daemon=True)
        self.jobs = queue.SimpleQueue()
        self.start()

    def run(self):
        while True:
            job = self.jobs.get()
            job()


_IDLE = []  # idle workers (a list: append / pop are atomic)
_ABANDONED = set()  # events of the calls whose caller was interrupted, while they run


def interruptible_call(fn, *args):
    """`fn(*args)` in a worker thread; returns its result or raises its exception.

    Raises:
        KeyboardInterrupt: Ctrl-C (SIGINT) while waiting; the worker's result
            is dropped (and the worker rejoins the idle ones when done).
    """
    device = _device_name()
    box = {}
    done = threading.Event()
    try:
        worker = _IDLE.pop()
    except IndexError:
        worker = _Worker()

    def job():
        try:
            if device:
                with _tf.device(device):
                    box["result"] = fn(*args)
            else:
                box["result"] = fn(*args)
        except BaseException as error:  # re-raised in the caller
            box["error"] = error
        finally:
            done.set()
            _ABANDONED.discard(done)
            _IDLE.append(worker)

    worker.jobs.put(job)
    try:
        while not done.wait(POLL_SECONDS):
            pass
    except KeyboardInterrupt:
        if not done.is_set():
            _ABANDONED.add(done)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


#: The status a program that handled the Ctrl-C means to exit with (`set_exit_status`).
_EXIT_STATUS = [None]


def set_exit_status(status: int) -> None:
    """The status to exit with if an abandoned call forces the exit (a `sys.exit` code is not
    visible to the exit hook): a command line that turned Ctrl-C into 130 says so here."""
    _EXIT_STATUS[0] = int(status)


def _exit_while_abandoned():
    """Ends the process now if an abandoned call still runs (see the module docstring)."""
    if not any(not event.is_set() for event in list(_ABANDONED)):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: nothing more to save
            pass
    logging.shutdown()
    last = getattr(sys, "last_value", None)  # set for an unhandled exception
    if isinstance(last, KeyboardInterrupt):
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit((_EXIT_STATUS[0] or 0) if last is None else 1)


if keras.backend.backend() == "tensorflow":
    atexit.register(_exit_while_abandoned)
