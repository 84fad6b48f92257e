"""Sizes that are Python ints when static and scalar int tensors when not.

A sequence length is known while a layer is traced for fixed-shape batches
(always on JAX and PyTorch) and unknown in a TensorFlow graph traced with a
`None` length; the attention implementations are written once for both.
"""

from typing import Any

from keras import ops


def static_or_dynamic_length(x: Any, axis: int = 1) -> Any:
    """`x.shape[axis]` if static, else a scalar int tensor."""
    d = x.shape[axis]
    return d if d is not None else ops.shape(x)[axis]


def is_int(x: Any) -> bool:
    """Whether `x` is a Python int (not a bool, not a tensor)."""
    return isinstance(x, int) and not isinstance(x, bool)


def minimum(a: Any, b: Any) -> Any:
    """min(a, b) for ints or scalar tensors."""
    return min(a, b) if is_int(a) and is_int(b) else ops.minimum(a, b)


def ceil_div(a: Any, b: Any) -> Any:
    """⌈a / b⌉ for ints or scalar tensors."""
    return -(-a // b)


def pad_axis(x: Any, axis: int, pad: Any, value: Any = 0) -> Any:
    """Appends `pad` (int or scalar tensor) entries equal to `value` on `axis`."""
    if is_int(pad) and pad == 0:
        return x
    shape = [static_or_dynamic_length(x, a) for a in range(len(x.shape))]
    shape[axis] = pad
    return ops.concatenate([x, ops.full(shape, value, dtype=x.dtype)], axis=axis)
