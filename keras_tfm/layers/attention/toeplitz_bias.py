"""Additive score biases B: a dense tensor, or a `ToeplitzBias` stored in O(T).

A bias that depends only on the key − query offset (ALiBi, T5 relative
positions) is a Toeplitz matrix per head,

    B[h, i, j] = values[h, j − i + query_length − 1],

so a layer can hand the attention core `H·(Tq + Tk − 1)` numbers instead of
an `(H, Tq, Tk)` tensor. The plain formula and the standard path materialise
it (`expand_bias`); the chunked path gathers one block at a time.
"""

from collections.abc import Callable
from typing import Any

from keras import ops


class ToeplitzBias:
    """A score bias that depends only on the key − query offset.

        bias[h, i, j] = values[h, j − i + query_length − 1]

    The chunked path gathers one `(cq, ck)` block at a time and returns the
    gradient w.r.t. `values` (so learned relative-position tables train).

    Args:
        values: float tensor `(H | 1, query_length + key_length − 1)`.
        query_length: int or scalar int tensor.
        trainable: False when no gradient w.r.t. `values` is needed (ALiBi);
            lets the chunked backward pass skip computing it.
    """

    def __init__(self, values: Any, query_length: Any, trainable: bool = True):
        if len(values.shape) != 2:
            raise ValueError(
                "`ToeplitzBias` values must have rank 2 (heads, query_length + key_length - 1); "
                f"received shape {tuple(values.shape)}."
            )
        self.values = values
        self.query_length = query_length
        self.trainable = bool(trainable)

    @classmethod
    def from_bias_fn(
        cls, bias_fn: Callable, query_length: Any, key_length: Any, trainable: bool = True
    ) -> "ToeplitzBias":
        """Builds it from `bias_fn(query_length, key_length, query_offset)`,
        e.g. `AlibiBias.compute_bias` or `RelativePositionBias.compute_bias`,
        evaluated once on the `(1, Tq + Tk − 1)` row of all offsets."""
        row = bias_fn(1, query_length + key_length - 1, query_length - 1)  # (H, 1, Tq + Tk - 1)
        return cls(row[:, 0, :], query_length, trainable=trainable)

    def dense(self, key_length: Any) -> Any:
        """The float32 `(H | 1, query_length, key_length)` bias tensor."""
        i = ops.arange(self.query_length, dtype="int32")[:, None]
        j = ops.arange(key_length, dtype="int32")[None, :]
        index = j - i + ops.cast(self.query_length, "int32") - 1
        return ops.take(ops.cast(self.values, "float32"), index, axis=1)


def expand_bias(bias: Any, key_length: Any = None) -> Any:
    """Brings a score bias to rank 4 `(B|1, H|1, Tq, Tk)` float32: a tensor of
    rank 2 `(Tq, Tk)`, 3 `(H, Tq, Tk)` or 4 `(B, H, Tq, Tk)`, or a
    `ToeplitzBias` (materialised for `key_length` keys)."""
    if isinstance(bias, ToeplitzBias):
        return bias.dense(key_length)[None]
    bias = ops.cast(bias, "float32")
    rank = len(bias.shape)
    if rank == 2:
        return bias[None, None, :, :]
    if rank == 3:
        return bias[None, :, :, :]
    if rank == 4:
        return bias
    raise ValueError(f"`bias` must have rank 2, 3 or 4; received shape {tuple(bias.shape)}.")
