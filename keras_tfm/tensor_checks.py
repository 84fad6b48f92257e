"""Tensor checks: shapes, dtypes, token ids, lengths, cache indices and masks.

Each raises a ValueError naming the argument when it runs eagerly; inside a
`tf.function` it adds a `tf.debugging.Assert` with the same message. The
checks of plain Python values (ints, floats, choices, seeds, files) live in
`keras_tfm.checks`.
"""

from keras_tfm.checks import check_positive_float, dtype_name


def check_rank(name, tensor, ranks):
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    rank = len(tensor.shape)
    if rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ValueError(
            f"`{name}` must have rank {want}; received shape {tuple(tensor.shape)} (rank {rank})."
        )


def check_last_dim(name, tensor, expected):
    got = tensor.shape[-1]
    if got is not None and expected is not None and got != expected:
        raise ValueError(f"`{name}` last dimension must be {expected}; received shape {tuple(tensor.shape)}.")


def check_float_dtype(name, tensor):
    """`tensor` must hold floats (e.g. embeddings, not token ids)."""
    dtype = dtype_name(getattr(tensor, "dtype", type(tensor).__name__))
    if "float" not in dtype:
        raise TypeError(
            f"`{name}` must be a float tensor (embeddings of shape (batch, length, d_model)); received dtype "
            f"{dtype}. Embed integer token ids first (e.g. with TokenEmbedding)."
        )


# --------------------------------------------------------------------------- #
# Tensors: checked once per call, in eager mode, in `tf.function` and under XLA.
#
# Eager: a ValueError naming the argument. Graph (`tf.function`): a
# `tf.debugging.Assert` raising InvalidArgumentError with the same message.
# XLA drops assertions (TF logs "Ignoring Assert operator"), so the tensor
# helpers also return a validity mask: callers clamp the bad entries to a
# safe value and poison their results with NaN, so an XLA training step on bad
# ids gives a NaN loss (and TerminateOnNaN stops it) instead of a plausible one.
# --------------------------------------------------------------------------- #


def _is_symbolic(tensor):
    import keras

    return isinstance(tensor, keras.KerasTensor)


def _eager():
    import keras

    if keras.backend.backend() != "tensorflow":
        return True  # jax/torch: concrete unless traced; traced values fail the bool() below
    import tensorflow as tf

    return tf.executing_eagerly()


def _jax_traced(tensor):
    """True for a JAX tracer (inside `jax.jit`/`jax.grad`) or a PyTorch fake tensor (traced by
    `make_fx` / `torch.compile`): its value is unknown in Python."""
    import keras

    if keras.backend.backend() == "torch":
        from torch._subclasses.fake_tensor import FakeTensor

        return isinstance(tensor, FakeTensor)
    if keras.backend.backend() != "jax":
        return False
    import jax

    return isinstance(tensor, jax.core.Tracer)


def _assert_all(name, condition, message, *values):
    """Raises ValueError(message) eagerly; in a graph returns the assertion op (None eagerly)."""
    from keras import ops

    if _eager():
        if _jax_traced(condition):
            return None  # inside jax.jit/grad: the caller's NaN poisoning stands in for the check
        if not bool(ops.convert_to_numpy(ops.all(condition))):
            shown = ", ".join(str(ops.convert_to_numpy(v)) for v in values)
            raise ValueError(message + (f" ({shown})" if values else ""))
        return None
    import tensorflow as tf

    return tf.debugging.Assert(tf.reduce_all(condition), [message, *values], name=f"check_{name}")


def _after(op, tensor):
    """`tensor`, computed only after the assertion `op` (so the check fires before any op using it)."""
    if op is None:
        return tensor
    import tensorflow as tf

    with tf.control_dependencies([op]):
        return tf.identity(tensor)


def check_token_ids(name, ids, vocabulary_size, ignore_index=None):
    """Checks integer ids lie in [0, vocabulary_size) (entries equal to `ignore_index` excepted).

    Returns:
        `(safe_ids, valid)`: int32 ids with bad entries replaced by 0 and a
        bool tensor, True where the id was valid (or ignored). Eagerly and in
        `tf.function` a bad id raises (ValueError / InvalidArgumentError with
        the argument, the smallest and largest id and the limit); under XLA the
        caller uses `valid` to poison the result with NaN.
    """
    from keras import ops

    if _is_symbolic(ids):
        return ids, None
    ids = ops.convert_to_tensor(ids)
    dtype = dtype_name(ids.dtype)
    if "int" not in dtype:
        raise TypeError(f"`{name}` must hold integer token ids; received dtype {dtype}.")
    ids = ops.cast(ids, "int32")
    valid = ops.logical_and(ops.greater_equal(ids, 0), ops.less(ids, vocabulary_size))
    if ignore_index is not None:
        valid = ops.logical_or(valid, ops.equal(ids, ignore_index))
    _assert_all(
        name,
        valid,
        f"`{name}` holds ids outside [0, {vocabulary_size}) (the vocabulary size is {vocabulary_size}); "
        f"smallest and largest id:",
        ops.min(ids),
        ops.max(ids),
    )
    return ops.where(valid, ids, 0), valid


def poison_invalid(x, valid):
    """`x` with NaN wherever `valid` (broadcast over trailing axes) is False."""
    from keras import ops

    if valid is None:
        return x
    while len(valid.shape) < len(x.shape):
        valid = ops.expand_dims(valid, -1)
    return ops.where(valid, x, ops.cast(float("nan"), x.dtype))


def check_length(name, length, limit, start_index=0):
    """Checks `start_index + length <= limit` for a static or dynamic length; returns `length`.

    Static ints raise a ValueError at once. A tensor length is checked with an
    assertion and returned as a tensor that depends on it, so slicing with the
    returned length reports this message instead of TF's "Expected size[0] in
    [0, N]" (under XLA every shape is static, so the Python branch runs).
    """
    if isinstance(length, int) and isinstance(start_index, int):
        if start_index + length > limit:
            where = f" (starting at position {start_index})" if start_index else ""
            raise ValueError(f"`{name}` has length {length}{where}, which exceeds `max_length`={limit}.")
        return length
    from keras import ops

    end = ops.cast(length, "int32") + ops.cast(start_index, "int32")
    op = _assert_all(
        name,
        ops.less_equal(end, limit),
        f"`{name}` is longer than `max_length`={limit}; start position + length:",
        end,
    )
    return _after(op, length)


def check_positive_value(name, value):
    """A finite value > 0 given as a Python number or a scalar tensor (e.g. a temperature).

    Python numbers raise at once (NaN and inf included); a tensor is checked
    eagerly (ValueError) or with an assertion in `tf.function` and returned
    as a tensor computed after it.
    """
    if isinstance(value, (bool, str)) or not hasattr(value, "shape"):
        return check_positive_float(name, value)
    from keras import ops

    value = ops.convert_to_tensor(value)
    if "float" not in dtype_name(value.dtype) and "int" not in dtype_name(value.dtype):
        raise TypeError(f"`{name}` must be a number; received dtype {value.dtype}.")
    as_float = ops.cast(value, "float32")
    op = _assert_all(
        name,
        ops.logical_and(ops.greater(as_float, 0.0), ops.isfinite(as_float)),
        f"`{name}` must be a finite number > 0; received",
        as_float,
    )
    return _after(op, value)


def check_cache_index(name, index, length, cache_length):
    """Checks `0 <= index` and `index + length <= cache_length` for a key/value cache write.

    A write beyond the cache (or at a negative index) would be clamped by
    the slice update into the wrong slots. Python ints raise a ValueError; a
    tensor index is asserted (eagerly a ValueError, in `tf.function` an
    InvalidArgumentError) and returned as a tensor computed after the check.
    """
    static = all(isinstance(v, int) and not isinstance(v, bool) for v in (index, length, cache_length))
    if static:
        if index < 0 or index + length > cache_length:
            raise ValueError(
                f"`{name}`={index} with {length} new positions does not fit the cache of length "
                f"{cache_length}: need 0 <= {name} and {name} + length <= {cache_length}."
            )
        return index
    from keras import ops

    index_t = ops.cast(index, "int32")
    end = index_t + ops.cast(length, "int32")
    op = _assert_all(
        name,
        ops.logical_and(ops.greater_equal(index_t, 0), ops.less_equal(end, ops.cast(cache_length, "int32"))),
        f"`{name}` must satisfy 0 <= {name} and {name} + length <= cache length; {name}, {name} + length, "
        "cache length:",
        index_t,
        end,
        ops.cast(cache_length, "int32"),
    )
    return _after(op, index_t)


def check_leading_dims(name, tensor, other_name, other, what=("batch", "length")):
    """The first `len(what)` dimensions of `tensor` equal those of `other`; returns `tensor`.

    Static sizes raise a ValueError at once; sizes unknown until run time are
    asserted (so `tf.function` reports this message, not "[Op:SelectV2]"
    from the op that would combine the two), and `tensor` is returned
    computed after the assertion.
    """
    t_shape, o_shape = tuple(tensor.shape), tuple(other.shape)
    dynamic = False
    for axis, label in enumerate(what):
        a, b = t_shape[axis], o_shape[axis]
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"`{name}` {label} size {a} does not match the {label} size {b} of `{other_name}` "
                f"(shapes {t_shape} and {o_shape})."
            )
        dynamic = dynamic or a is None or b is None
    if not dynamic or _is_symbolic(tensor) or _is_symbolic(other):
        return tensor
    from keras import ops

    n = len(what)
    t_dims, o_dims = ops.shape(tensor)[:n], ops.shape(other)[:n]
    op = _assert_all(
        name,
        ops.equal(
            ops.stack([ops.cast(d, "int32") for d in t_dims]),
            ops.stack([ops.cast(d, "int32") for d in o_dims]),
        ),
        f"`{name}` ({', '.join(what)}) sizes do not match those of `{other_name}`:",
        ops.stack([ops.cast(d, "int32") for d in t_dims]),
        ops.stack([ops.cast(d, "int32") for d in o_dims]),
    )
    return _after(op, tensor)


MASK_CONVENTION = (
    "masks are boolean with True = may attend (or a real token); int 0/1 masks are read the same way "
    "(1 = may attend). Convert an additive float mask (0 / -1e9) with `mask = additive == 0`, and a "
    "'1 = padding' mask with `mask = padding == 0`."
)


def as_bool_mask(name, mask):
    """A mask as bool: bool passes, int masks must hold only 0/1, float masks are refused.

    Int segment ids (1/2), "1 = pad" conventions and additive float masks
    would otherwise be cast to bool silently (wrongly); the message gives the
    convention and the conversion.
    """
    from keras import ops

    if mask is None or _is_symbolic(mask):
        return mask
    mask = ops.convert_to_tensor(mask)
    dtype = dtype_name(mask.dtype)
    if dtype == "bool":
        return mask
    if "int" in dtype:
        _assert_all(
            name,
            ops.logical_or(ops.equal(mask, 0), ops.equal(mask, 1)),
            f"`{name}` is an int mask with values other than 0/1; {MASK_CONVENTION} Smallest and largest value:",
            ops.min(mask),
            ops.max(mask),
        )
        return ops.cast(mask, "bool")
    raise TypeError(f"`{name}` has dtype {dtype}; {MASK_CONVENTION}")


# --------------------------------------------------------------------------- #
# Files.
# --------------------------------------------------------------------------- #
