"""Boolean attention masks. Convention everywhere: True = may attend.

A *padding mask* has shape `(batch, length)` and marks real tokens (True) versus
padding (False). An *attention mask* has shape `(batch, query_length, key_length)`
(or `(batch, heads, query_length, key_length)`) and says, for each query, which
keys it may attend to. These helpers build and combine them with `keras.ops`.

Inside attention a mask M enters the scores as 0 where True and as
`MASK_FILL_VALUE` (a finite float32 stand-in for −∞) where False.
"""

from typing import Any

from keras import ops

from keras_tfm.tensor_checks import as_bool_mask, check_leading_dims

#: Finite large negative fill of masked float32 scores before the softmax
#: (never −inf, never a float16 overflow).
MASK_FILL_VALUE = -1e9


def causal_mask(query_length: Any, key_length: Any = None, offset: Any = 0) -> Any:
    """Lower-triangular mask: query `i` (at absolute position `offset + i`) may
    attend key `j` iff `j <= offset + i`.

    Args:
        query_length: int or scalar tensor, number of queries.
        key_length: int or scalar tensor, number of keys. Defaults to
            `offset + query_length`.
        offset: int or scalar tensor, absolute position of the first query
            (the number of cached tokens during incremental decoding).

    Returns:
        Boolean tensor of shape `(query_length, key_length)`.
    """
    if key_length is None:
        key_length = offset + query_length
    q_pos = ops.arange(query_length, dtype="int32")[:, None] + ops.cast(offset, "int32")
    k_pos = ops.arange(key_length, dtype="int32")[None, :]
    return ops.greater_equal(q_pos, k_pos)


def sliding_window_mask(query_length: Any, key_length: Any, window: int, offset: Any = 0) -> Any:
    """Sliding-window mask: query `i` (at absolute position `offset + i`) may attend key `j`
    iff `offset + i - window < j < offset + i + window`, i.e. with a causal mask the last
    `window` keys, itself included (HuggingFace Mistral's `sliding_window`).

    Returns:
        Boolean tensor of shape `(query_length, key_length)`.
    """
    q_pos = ops.arange(query_length, dtype="int32")[:, None] + ops.cast(offset, "int32")
    distance = q_pos - ops.arange(key_length, dtype="int32")[None, :]
    return ops.logical_and(ops.less(distance, window), ops.greater(distance, -window))


def expand_mask(mask: Any) -> Any:
    """Brings a boolean mask of rank 2 `(Tq, Tk)`, 3 `(B, Tq, Tk)` or 4
    `(B, H, Tq, Tk)` to rank 4 `(B|1, H|1, Tq, Tk)`."""
    mask = ops.cast(mask, "bool")
    rank = len(mask.shape)
    if rank == 2:
        return mask[None, None, :, :]
    if rank == 3:
        return mask[:, None, :, :]
    if rank == 4:
        return mask
    raise ValueError(f"`mask` must have rank 2, 3 or 4; received shape {tuple(mask.shape)}.")


def score_mask(mask: Any, causal: bool, query_length: Any, key_length: Any) -> Any:
    """The rank-4 boolean mask of the scores, `mask ∧ causal`, or None when
    neither is given."""
    if causal:
        causal_m = causal_mask(query_length, key_length)[None, None]
        return causal_m if mask is None else ops.logical_and(expand_mask(mask), causal_m)
    return None if mask is None else expand_mask(mask)


def merge_masks(*masks: Any) -> Any:
    """Logical AND of any number of broadcastable boolean masks (None ignored)."""
    result = None
    for m in masks:
        if m is None:
            continue
        m = ops.cast(m, "bool")
        result = m if result is None else ops.logical_and(result, m)
    return result


def check_padding_mask(mask: Any, inputs: Any, name: str = "padding_mask") -> Any:
    """Validates a `(batch, length)` padding mask against `(batch, length, ...)`
    inputs; raises a `ValueError` naming `name` (static shapes), or asserts
    the sizes at run time when they are dynamic.

    Returns:
        The mask (None stays None), computed after any run-time check: use it.
    """
    if mask is None:
        return None
    as_bool_mask(name, mask)  # dtype: bool or 0/1 ints (see tensor_checks.MASK_CONVENTION)
    mshape = tuple(mask.shape)
    if len(mshape) != 2:
        raise ValueError(f"`{name}` must have rank 2 (batch, length); received shape {mshape}.")
    return check_leading_dims(name, mask, "inputs", inputs)


def check_attention_mask(
    mask: Any, query_length: int | None, key_length: int | None, name: str = "attention_mask"
) -> None:
    """Validates an attention mask of rank 2, 3 or 4 whose last two axes are
    `(query_length, key_length)` when those are statically known."""
    if mask is None:
        return
    as_bool_mask(name, mask)  # dtype: bool or 0/1 ints (see tensor_checks.MASK_CONVENTION)
    shape = tuple(mask.shape)
    if len(shape) not in (2, 3, 4):
        raise ValueError(
            f"`{name}` must have rank 2, 3 or 4 ending in (query_length, key_length); received shape {shape}."
        )
    expected = (query_length, key_length)
    for got, want, axis in zip(shape[-2:], expected, ("query_length", "key_length")):
        if got is not None and want is not None and got != 1 and got != want:
            raise ValueError(
                f"`{name}` has shape {shape}, but its last two axes must be "
                f"(query_length, key_length) = {expected}; {axis} differs."
            )
