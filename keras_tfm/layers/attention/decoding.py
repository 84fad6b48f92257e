"""Cached (incremental) decoding in self-attention: the key/value cache and the
single-query step.

The cache of one layer is a pair `(keys, values)` (`init_cache`):

    keys   (batch, num_key_value_heads, key_dim, length)      stored transposed
    values (batch, num_key_value_heads, length, value_dim)

zeros initially; `CACHE_LENGTH_AXES` are their slot axes. A call writes its
new keys and values into slots `cache_index …` in place (`write_cache`: no
concatenation) and attends over every slot. A uint16 cache holds bfloat16
bits (half the bytes of float32; Keras would cast a float cache argument to
the compute dtype at every call).

A single query (a decoding step) is two batched matmuls over the cache
(`attend_one_query`, the one-query fast path of `dot_product_attention`), q·K and P·V, each the plain
(rows × depth)·(depth × columns) form: both read the cache where it lies, each
cached key and value once. (Keys stored `(…, length, key_dim)` would need the
transposed product q·Kᵀ, and XLA on CPU copies the whole key cache into the
other layout at every step.)
"""

import math
from collections.abc import Callable
from typing import Any

from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention.masks import MASK_FILL_VALUE
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias
from keras_tfm.tensor_checks import check_rank

#: Slot (length) axis of the two tensors of a decoding cache: keys `(batch,
#: num_key_value_heads, key_dim, length)` are stored transposed, values are `(batch,
#: num_key_value_heads, length, value_dim)` (`init_cache`).
CACHE_LENGTH_AXES = (3, 2)


def init_cache(
    batch_size: Any,
    length: int,
    num_key_value_heads: int,
    key_dim: int,
    value_dim: int,
    dtype: str,
    compute_dtype: str,
) -> tuple[Any, Any]:
    """Zero `(keys, values)` of `length` slots (module docstring layout).

    `dtype` "bfloat16" is stored as bfloat16 bits (uint16) unless the compute
    dtype is bfloat16.
    """
    length = check_positive_int("length", length)
    if dtype == "bfloat16" and compute_dtype != "bfloat16":
        dtype = "uint16"
    return (
        ops.zeros((batch_size, num_key_value_heads, key_dim, length), dtype=dtype),
        ops.zeros((batch_size, num_key_value_heads, length, value_dim), dtype=dtype),
    )


def check_cache(cache: Any, num_key_value_heads: int, key_dim: int, value_dim: int) -> tuple[Any, Any]:
    """`(keys, values)` as `init_cache` makes them; a ValueError for anything else."""
    if not isinstance(cache, (tuple, list)):
        shape = tuple(getattr(cache, "shape", ()))
        raise ValueError(
            "`cache` must be the pair (keys, values) made by `init_cache`; received a single tensor "
            f"of shape {shape} (rank {len(shape)})."
        )
    if len(cache) != 2:
        raise ValueError(f"`cache` must be a pair (keys, values); received {len(cache)} tensors.")
    for name, part in zip(("cache[0] (keys)", "cache[1] (values)"), cache):
        check_rank(name, part, 4)
    keys, values = cache
    if (
        tuple(keys.shape[1:3]) != (num_key_value_heads, key_dim)
        or values.shape[1] != num_key_value_heads
        or values.shape[3] != value_dim
        or (keys.shape[3] is not None and values.shape[2] is not None and keys.shape[3] != values.shape[2])
    ):
        raise ValueError(
            f"`cache` must be (keys, values) as `init_cache` makes them: keys (batch, {num_key_value_heads} key/value "
            f"heads, {key_dim}, length) and values (batch, {num_key_value_heads}, length, {value_dim}); "
            f"received shapes {tuple(keys.shape)} and {tuple(values.shape)}."
        )
    return keys, values


def cache_length(cache: tuple[Any, Any]) -> Any:
    """The number of slots of a `(keys, values)` cache (scalar tensor)."""
    return ops.shape(cache[1])[CACHE_LENGTH_AXES[1]]


def write_slots(cached: Any, new: Any, start: Any, axis: int) -> Any:
    """Writes `new` `(batch, T, G, d)` into a cache tensor at slots `start ..
    start + T - 1` of its length `axis` (3: keys `(batch, G, d, L)`; 2:
    values `(batch, G, L, d)`), as bfloat16 bits when `cached` is uint16.

    One decoding step (T = 1) is a scatter of `batch·G·d` numbers: XLA updates
    the loop's buffer in place and hands it to the attention matmuls as is.
    (A dynamic slice update there is fused with the reshape XLA puts before
    a matmul whose batch or head axis has size 1, and the fused copy then
    re-writes the whole cache at every step.)
    """
    new = ops.transpose(new, (0, 2, 3, 1) if axis == 3 else (0, 2, 1, 3))
    if cached.dtype == "uint16":  # bfloat16 bits: Keras would cast a float cache argument
        new = ops.view(ops.cast(new, "bfloat16"), "uint16")
    else:
        new = ops.cast(new, cached.dtype)
    zero = ops.zeros((), "int32")
    if new.shape[axis] != 1:
        return ops.slice_update(cached, (zero, zero) + ((zero, start) if axis == 3 else (start, zero)), new)
    # Every (batch, head, feature) row of the slot, in `new`'s order.
    dims = [ops.shape(cached)[0], cached.shape[1], cached.shape[5 - axis]]
    flat = ops.arange(dims[0] * dims[1] * dims[2], dtype="int32")
    index = [flat // (dims[1] * dims[2]), (flat // dims[2]) % dims[1], flat % dims[2]]
    index.insert(axis, ops.broadcast_to(ops.cast(start, "int32"), ops.shape(flat)))
    return ops.scatter_update(cached, ops.stack(index, axis=1), ops.reshape(new, (-1,)))


def read_slots(cached: Any, dtype: str) -> Any:
    """A cache tensor in the compute dtype (bfloat16 bits unpacked)."""
    if cached.dtype == "uint16":
        cached = ops.view(cached, "bfloat16")
    return ops.cast(cached, dtype)


def write_cache(cache: tuple[Any, Any], key: Any, value: Any, start: Any) -> tuple[Any, Any]:
    """The cache with the new `key`, `value` `(batch, T, G, d)` written at slots
    `start … start + T − 1`."""
    keys, values = cache
    return write_slots(keys, key, start, CACHE_LENGTH_AXES[0]), write_slots(
        values, value, start, CACHE_LENGTH_AXES[1]
    )


def read_cache(cache: tuple[Any, Any], dtype: str) -> tuple[Any, Any]:
    """Keys `(batch, G, d, L)` and values `(batch, G, L, dv)` in the compute dtype."""
    return read_slots(cache[0], dtype), read_slots(cache[1], dtype)


def sequence_layout(keys: Any, values: Any) -> tuple[Any, Any]:
    """Cache-layout keys and values as the attention core takes them, `(batch, L, G, d)`."""
    return ops.transpose(keys, (0, 3, 1, 2)), ops.transpose(values, (0, 2, 1, 3))


def attend_one_query(
    query: Any,
    key: Any,
    value: Any,
    mask: Any = None,
    bias: Any = None,
    dropout: Callable | None = None,
    training: bool | None = None,
    cache_layout: bool = False,
    scale: float | None = None,
) -> Any:
    """Attention of ONE query position (a decoding step) over keys and values
    with `G` heads, each read once.

    The `H = G·g` query heads are grouped by the key/value head they share
    (head `i·g + j` uses key/value head `i`): `(B, 1, H, d)` → `(B, G, g, d)`,
    and the step is two batched matmuls with batch `(B, G)` and the `g`
    query heads of a group as rows:

        scores = q K / √d + bias + M     (B, G, g, d) × (B, G, d, L) → (B, G, g, L)
        output = softmax(scores) V       (B, G, g, L) × (B, G, L, dv) → (B, G, g, dv)

    With `cache_layout=True` keys are `(B, G, d, L)` and values `(B, G, L, dv)`
    (`init_cache`): both are plain row-by-column products that read the cache
    where it lies; otherwise keys and values are `(B, L, G, d)`. Softmax in
    float32; `mask` (True = may attend) covers the key axis (rank 2, 3, or 4
    with one head), `bias` is `(H, 1, L)` (or a `ToeplitzBias`); a query that
    sees no key gets zeros. `dropout` (a callable, or None) acts on the weights
    when `training`; `scale` defaults to 1/√d.

    Returns:
        The heads, `(B, 1, H, dv)`.
    """
    batch, num_heads, dim = ops.shape(query)[0], query.shape[2], query.shape[-1]
    num_key_value_heads = key.shape[1 if cache_layout else 2]
    groups = num_heads // num_key_value_heads
    keys_eq, values_eq = ("bgdl", "bgld") if cache_layout else ("blgd", "blgd")
    scale = ops.cast(1.0 / math.sqrt(float(dim)) if scale is None else scale, query.dtype)
    rows = ops.reshape(query * scale, (batch, num_key_value_heads, groups, dim))
    scores = ops.cast(ops.einsum(f"bgjd,{keys_eq}->bgjl", rows, key), "float32")
    if isinstance(bias, ToeplitzBias):
        bias = bias.dense(ops.shape(value)[2 if cache_layout else 1])
    if bias is not None:
        bias = ops.cast(bias, "float32")  # (H | 1, 1, L) or (1, L)
        per_head = len(bias.shape) == 3 and bias.shape[0] == num_heads
        scores = scores + ops.reshape(
            bias, (1, num_key_value_heads, groups, -1) if per_head else (1, 1, 1, -1)
        )
    visible = None
    if mask is not None:
        mask = ops.cast(mask, "bool")
        mask = {2: lambda m: m[None, None], 3: lambda m: m[:, None], 4: lambda m: m}[len(mask.shape)](mask)
        scores = ops.where(mask, scores, MASK_FILL_VALUE)
        visible = ops.cast(ops.any(mask, axis=-1, keepdims=True), "float32")
    # softmax(s) V = (exp(s - max s) V) / Σ exp(s - max s): the division acts on the
    # (B, G, g, dv) output instead of the (B, G, g, L) weights, one pass fewer over L.
    weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
    norm = 1.0 / ops.sum(weights, axis=-1, keepdims=True)
    if visible is not None:
        norm = norm * visible
    if dropout is not None and training:  # weight dropout needs the normalised weights
        weights, norm = dropout(weights * norm, training=training), None
    output = ops.einsum(f"bgjl,{values_eq}->bgjd", ops.cast(weights, value.dtype), value)
    if norm is not None:
        output = ops.cast(ops.cast(output, "float32") * norm, value.dtype)
    return ops.reshape(output, (batch, 1, num_heads, output.shape[-1]))
