"""Shared machinery of the generator classes: argument checks, prompt padding,
length buckets and the cache of compiled (XLA) functions."""

import secrets

import numpy as np
import tensorflow as tf

from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import samplers

SAMPLERS = ("greedy", "sample", "temperature", "top_k", "top_p")


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_int(name, value, minimum=None, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise TypeError(f"`{name}` must be an int; received {value!r} of type {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}; received {value}.")
    return int(value)


def to_id_array(name, x):
    """Converts ids (list, numpy, tf tensor) to a numpy array, checking the dtype."""
    if isinstance(x, tf.RaggedTensor):
        raise TypeError(f"`{name}`: pass a list of sequences instead of a RaggedTensor.")
    if tf.is_tensor(x):
        x = x.numpy()
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"`{name}` must hold integer token ids; received an object array.")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must hold integer token ids; received dtype {arr.dtype}.")
    return arr


def pad_prompts(
    name, prompts, prompt_lengths=None, pad_id=0, vocabulary_size=None, side="left", minimum=None
):
    """Ragged or right-padded prompts → padded int32 array of bucket length.

    Args:
        prompts: a list of 1-D id sequences of any lengths, or a 2-D array
            `(batch, T)` (every row of length T unless `prompt_lengths` says
            how many leading entries of each row are real).
        prompt_lengths: optional `(batch,)` lengths for a 2-D array.
        side: "left" (decoder prompts) or "right" (encoder inputs).
        minimum: smallest bucket.

    Returns:
        `(padded (batch, bucket) int32, lengths (batch,) int32)`.
    """
    if isinstance(prompts, (list, tuple)) and (len(prompts) == 0 or not np.isscalar(prompts[0])):
        if len(prompts) == 0:
            raise ValueError(f"`{name}` is an empty batch; pass at least one sequence.")
        if prompt_lengths is not None:
            raise ValueError("`prompt_lengths` is only accepted with a 2-D array of prompts.")
        rows = [to_id_array(f"{name}[{b}]", p) for b, p in enumerate(prompts)]
        for b, r in enumerate(rows):
            if r.ndim != 1:
                raise ValueError(f"`{name}[{b}]` must be a 1-D sequence of ids; received shape {r.shape}.")
        lengths = np.array([len(r) for r in rows], dtype=np.int32)
    else:
        arr = to_id_array(name, prompts)
        if arr.ndim == 1:
            raise ValueError(
                f"`{name}` must be a batch: a 2-D array (batch, length) or a list of sequences; "
                f"received a 1-D array of shape {arr.shape}."
            )
        if arr.ndim != 2:
            raise ValueError(f"`{name}` must be 2-D (batch, length); received shape {arr.shape}.")
        if arr.shape[0] == 0:
            raise ValueError(f"`{name}` is an empty batch; pass at least one sequence.")
        if prompt_lengths is None:
            lengths = np.full((arr.shape[0],), arr.shape[1], np.int32)
        else:
            lengths = to_id_array("prompt_lengths", prompt_lengths).astype(np.int32).reshape(-1)
            if lengths.shape[0] != arr.shape[0]:
                raise ValueError(
                    f"`prompt_lengths` has {lengths.shape[0]} entries for a batch of {arr.shape[0]}."
                )
            if np.any(lengths > arr.shape[1]):
                raise ValueError(f"`prompt_lengths` exceed the prompt array length {arr.shape[1]}.")
        rows = [arr[b, : lengths[b]] for b in range(arr.shape[0])]
    if np.any(lengths < 1):
        raise ValueError(
            f"Every sequence of `{name}` needs at least one token; lengths are {lengths.tolist()}."
        )
    for r in rows:
        if r.size and (r.min() < 0 or (vocabulary_size is not None and r.max() >= vocabulary_size)):
            raise ValueError(
                f"`{name}` holds ids outside [0, {vocabulary_size}): min {r.min()}, max {r.max()}."
            )
    width = cache_lib.prompt_bucket(int(lengths.max()), minimum or cache_lib.MIN_PROMPT_LENGTH)
    out = np.full((len(rows), width), pad_id, np.int32)
    for b, r in enumerate(rows):
        if side == "left":
            out[b, width - len(r) :] = r
        else:
            out[b, : len(r)] = r
    return out, lengths


def check_max_new_tokens(max_new_tokens, longest_prompt, max_length):
    check_int("max_new_tokens", max_new_tokens, minimum=0)
    if max_length is not None and longest_prompt + max_new_tokens > max_length:
        raise ValueError(
            f"`max_new_tokens`={max_new_tokens} with a prompt of {longest_prompt} tokens exceeds the model's "
            f"maximum length {max_length} (at most {max(max_length - longest_prompt, 0)} new tokens)."
        )
    return int(max_new_tokens)


def make_seed(seed):
    """int / (2,) array / tensor / None → int32 numpy `(2,)`. None draws a
    fresh seed in Python (outside every compiled function)."""
    if seed is None:
        return np.array([secrets.randbits(31), secrets.randbits(31)], np.int32)
    if _is_int(seed):
        return np.array([0, int(seed)], np.int32)
    arr = to_id_array("seed", seed).astype(np.int32)
    if arr.shape != (2,):
        raise ValueError(f"`seed` must be an int or an int array of shape (2,); received shape {arr.shape}.")
    return arr


def check_sampler(sampler, temperature, top_k, top_p, vocabulary_size=None):
    """Checks the sampler name and its Python arguments (see `samplers.check_sampling_args`;
    `top_k` larger than `vocabulary_size` is refused)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"Unknown `sampler` {sampler!r}; expected one of {list(SAMPLERS)}.")
    return samplers.check_sampling_args(temperature, top_k, top_p, vocabulary_size=vocabulary_size)


class _FunctionCache:
    """Plain (non-trackable) holder of compiled functions, so that
    `tf.saved_model.save(generator, ...)` saves only the model's variables and
    the signatures one passes explicitly."""

    def __init__(self):
        self.functions = {}


class BaseGenerator(tf.Module):
    """Holds a model and its compiled generation functions.

    Compiled functions are cached per static configuration (sampler, bucket
    shapes, ...); `trace_count` counts Python traces (a new bucket or batch
    size traces once, later calls in the same bucket do not retrace).
    `jit_compile=False` uses a plain graph `tf.function`; `run_eagerly=True`
    runs the same code eagerly (debugging, fast tests).
    """

    def __init__(self, model, pad_id=0, jit_compile=True, run_eagerly=False, name=None):
        super().__init__(name=name)
        self.model = model
        self.pad_id = check_int("pad_id", pad_id, minimum=0)
        self.jit_compile = bool(jit_compile)
        self.run_eagerly = bool(run_eagerly)
        self._cache = _FunctionCache()
        self.trace_count = 0

    def _compiled(self, key, fn):
        functions = self._cache.functions
        if key not in functions:

            def traced(*args):
                self.trace_count += 1
                return fn(*args)

            if self.run_eagerly:
                functions[key] = traced
            else:
                functions[key] = tf.function(traced, jit_compile=self.jit_compile, reduce_retracing=False)
        return functions[key]

    def _eos(self, eos_id):
        """-1 for None; otherwise an id that must lie in the vocabulary (else no row could ever stop)."""
        if eos_id is None:
            return -1
        eos = check_int("eos_id", eos_id, minimum=0)
        vocabulary_size = getattr(getattr(self, "adapter", None), "vocabulary_size", None)
        if vocabulary_size is not None and eos >= vocabulary_size:
            raise ValueError(
                f"`eos_id`={eos} is outside the model's vocabulary [0, {vocabulary_size}): generation could "
                "never stop on it."
            )
        return eos
