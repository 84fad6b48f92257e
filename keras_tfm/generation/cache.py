"""Preallocated key/value caches and their segments for incremental decoding.

The caches of a model are a flat list of tensors, keys and values of every
block (`GPT.init_caches`): keys `(batch, num_key_value_heads, key_dim, length)` (stored
transposed) and values `(batch, num_key_value_heads, length, key_dim)`, the layout of
`MultiHeadSelfAttention.init_cache`, where a decoding step reads both with
plain matmuls and writes the new slot in place (never a concatenation inside a
step). The loops below only need the batch on axis 0 and the slot axis of
each tensor (`length_axis`).

Segments. Under XLA every shape is static, so attention over a cache of
`length` slots costs O(length) whatever the number of filled slots. A call
picks its cache length `L` from power-of-two buckets (`prompts.call_cache_length`:
`P + next_pow2(max_new_tokens)`), and:

* inside one call, the decoding loop runs in *segments* of sizes
  P + 256, P + 512, P + 1024, ..., L (`segment_sizes`, P = padded prompt
  length): while the write position is below P + 256 the cache is P + 256
  slots long, then it is zero-padded once to P + 512, and so on. A step at
  context c therefore attends over fewer than max(P + 256, 2c) slots, and the
  cache is resized only about log2(L / 256) times per call (never per token).
  Each segment is one more loop body to trace and compile; below
  `MIN_SEGMENT_LENGTH` new slots a second body costs more compile time than
  the attention over the not yet written slots saves, so a call of at most
  256 new tokens compiles a single body.
"""

import numpy as np
from keras import ops

from keras_tfm.layers.attention.decoding import CACHE_LENGTH_AXES

#: New slots of the first decoding segment (`segment_sizes`).
MIN_SEGMENT_LENGTH = 256


def segment_sizes(prompt_length, cache_length, minimum=None):
    """Cache sizes of the decoding segments: P + 256·2^k (k = 0, 1, ...) below
    `cache_length`, then `cache_length`; e.g. (272, 528, 1040) for P = 16,
    L = 1040, and (272,) for L = 272. A step at context c attends over at most
    max(P + 256, P + 2(c − P)) slots, i.e. O(c) whatever the bucket. With an
    unknown (None) prompt length a single segment of `cache_length` is used.
    `minimum` (default `MIN_SEGMENT_LENGTH`, read at call time) is the first
    segment's number of new slots.
    """
    if prompt_length is None:
        return (int(cache_length),)
    sizes = []
    step = int(MIN_SEGMENT_LENGTH if minimum is None else minimum)
    while prompt_length + step < cache_length:
        sizes.append(int(prompt_length + step))
        step *= 2
    sizes.append(int(cache_length))
    return tuple(sizes)


def length_axis(i):
    """Slot axis of tensor `i` of a flat cache list `[keys_0, values_0, ...]`."""
    return CACHE_LENGTH_AXES[i % 2]


def grow_caches(caches, length):
    """Zero-pads every cache along its slot axis to `length` slots."""
    out = []
    for i, cache in enumerate(caches):
        axis = length_axis(i)
        pad = [[0, 0]] * len(cache.shape)
        pad[axis] = [0, length - cache.shape[axis]]
        out.append(cache if pad[axis][1] == 0 else ops.pad(cache, pad))
    return out


def shift_caches(caches, shift):
    """Drops the oldest `shift` slots of every cache and zero-pads as many at
    the end (same length): the sliding window's shift."""
    out = []
    for i, cache in enumerate(caches):
        axis = length_axis(i)
        pad = [[0, 0]] * len(cache.shape)
        pad[axis] = [0, shift]
        kept = tuple(slice(shift, None) if a == axis else slice(None) for a in range(len(cache.shape)))
        out.append(ops.pad(cache[kept], pad))
    return out


def tile_beams(x, num_beams):
    """`(batch, ...)` → `(batch * num_beams, ...)`, each row repeated
    `num_beams` times consecutively (row b*K + k is beam k of item b)."""
    return ops.repeat(x, num_beams, axis=0)


def gather_beams(x, flat_indices):
    """Reorders the `(batch * num_beams, ...)` rows of `x` by `flat_indices`."""
    return ops.take(x, flat_indices, axis=0)


def cache_bytes(batch_size, num_layers, length, num_heads, key_dim, dtype="float32"):
    """Memory of one set of caches (keys and values of `num_layers` blocks), in bytes."""
    return int(batch_size * num_layers * 2 * length * num_heads * key_dim * np.dtype(dtype).itemsize)
