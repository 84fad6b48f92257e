"""The default implementation: `attention_impl="auto"`.

    "standard"  when the weights are requested, weight dropout is active, or
                there is one query (a cached decoding step: a `(1, Tk)` score row);
    "fused"     on a GPU under JAX with float16/bfloat16 inputs and no score bias;
    "chunked"   when the key length is at least `min_key_length`
                (default `AUTO_MIN_KEY_LENGTH`);
    "standard"  otherwise.

The key length is read statically when it is known (always on JAX and
PyTorch, and in TensorFlow graphs traced for fixed-length batches, as
`model.fit` and XLA trace them); when it is unknown at trace time (a
TensorFlow graph traced with a `None` length) the choice is made at run time
inside the graph (`choose_at_run_time`: a `cond` whose gradient XLA compiles),
unless a `key_length_bound` scope says the keys stay shorter than the threshold.
"""

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention.core import ATTENTION_IMPLS, AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.fused import fused_attention, fused_kernel_available
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias

#: "auto" takes the chunked path from this key length on. Chosen with
#: `python bench/attention_memory.py --threshold` (time and peak memory of one
#: causal layer, forward + backward, standard against chunked); the figures are
#: in bench/RESULTS.md.
AUTO_MIN_KEY_LENGTH = 2048

_BOUND = threading.local()


@contextlib.contextmanager
def key_length_bound(max_key_length: int | None) -> Iterator[None]:
    """Within this scope, a graph traced with an unknown key length has keys of at
    most `max_key_length` (None: no bound), so "auto" decides statically when that
    bound is below its threshold instead of tracing both paths and a run-time
    choice. For callers that refuse longer inputs themselves (a serving signature
    that checks the model's maximum length).
    """
    previous = getattr(_BOUND, "value", None)
    _BOUND.value = None if max_key_length is None else check_positive_int("max_key_length", max_key_length)
    try:
        yield
    finally:
        _BOUND.value = previous


@register_attention_impl("auto")
def auto_attention(
    inputs: AttentionInputs, min_key_length: int | None = None, **chunked_options: Any
) -> tuple[Any, Any]:
    """ "chunked" for long keys, "standard" otherwise (module docstring).

    Options: `min_key_length` (default `AUTO_MIN_KEY_LENGTH`) and the options of
    "chunked" (`query_chunk_size`, `key_chunk_size`).
    """
    threshold = AUTO_MIN_KEY_LENGTH if min_key_length is None else min_key_length
    check_positive_int("min_key_length", threshold)
    standard = ATTENTION_IMPLS["standard"]
    if inputs.return_attention_scores or inputs.dropout_active() or inputs.query.shape[1] == 1:
        return standard(inputs)
    inputs = inputs._replace(return_attention_scores=False)
    if fused_kernel_available(inputs.query, inputs.value, inputs.bias):
        return fused_attention(inputs)
    chunked = ATTENTION_IMPLS["chunked"]
    tk = inputs.key.shape[1]
    if not isinstance(tk, int) and keras.backend.backend() != "tensorflow":
        # A symbolic length exists only while Keras infers shapes on JAX/PyTorch (real calls have
        # static shapes there); both paths give the same output shape.
        return standard(inputs)
    if tk is not None:
        return chunked(inputs, **chunked_options) if tk >= threshold else standard(inputs)
    bound = getattr(_BOUND, "value", None)
    if bound is not None and bound < threshold:  # `key_length_bound`: never long enough for "chunked"
        return standard(inputs)
    dtype = inputs.value.dtype
    long = ops.shape(inputs.key)[1] >= threshold
    if_long = lambda x: ops.cast(chunked(x, **chunked_options)[0], dtype)
    if_short = lambda x: ops.cast(standard(x)[0], dtype)
    if inputs.training is False:  # inference (predict, generation, SavedModel signatures): a plain cond
        return ops.cond(long, lambda: if_long(inputs), lambda: if_short(inputs)), None
    return choose_at_run_time(inputs, long, if_long, if_short), None


def choose_at_run_time(inputs: AttentionInputs, long: Any, if_long: Any, if_short: Any) -> Any:
    """`if_long(inputs)` where the scalar bool `long` holds, else `if_short(inputs)` (TensorFlow graphs).

    The gradient is a second run-time choice between the two branches' own
    gradients, each recomputed from the inputs. A plain `cond`'s gradient
    passes the forward branches' intermediates across the branches, and XLA
    (`jit_compile=True`, as `model.fit` compiles by default) cannot compile
    the untaken branch's: their shapes are unknown when a `None` length is
    traced. The cost is one recomputed forward of the branch taken. Inference
    calls (`training=False`) take a plain `cond`: a SavedModel then holds no
    custom gradient, which TensorFlow warns about at every load.
    """
    import tensorflow as tf  # only reached with a TensorFlow graph (a `None` length)

    toeplitz = isinstance(inputs.bias, ToeplitzBias)
    differentiable = [inputs.query, inputs.key, inputs.value]
    if toeplitz:
        differentiable.append(inputs.bias.values)
    elif inputs.bias is not None:
        differentiable.append(inputs.bias)

    def rebuild(*tensors):
        q, k, v, *rest = tensors
        bias = inputs.bias
        if toeplitz:
            bias = ToeplitzBias(rest[0], inputs.bias.query_length, inputs.bias.trainable)
        elif bias is not None:
            bias = rest[0]
        return inputs._replace(query=q, key=k, value=v, bias=bias)

    @tf.custom_gradient
    def choose(*tensors):
        output = tf.cond(long, lambda: if_long(rebuild(*tensors)), lambda: if_short(rebuild(*tensors)))

        def gradient(upstream):
            def branch(fn):
                def run():
                    with tf.GradientTape() as tape:
                        tape.watch(tensors)
                        out = fn(rebuild(*tensors))
                    grads = tape.gradient(out, tensors, output_gradients=upstream)
                    return [tf.zeros_like(t) if g is None else g for t, g in zip(tensors, grads)]

                return run

            return tf.cond(long, branch(if_long), branch(if_short))

        return output, gradient

    return choose(*differentiable)
