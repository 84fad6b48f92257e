"""Row blocks: how the chunked attention core stores and walks its tensors.

A `(B, T, H, D)` tensor is cut into row blocks of `c` positions, block index
first: `(n, B, H, c, D)`, `n = ceil(T / c)`, the last block zero-padded
(`blocks_of`, `from_blocks`). In a loop the blocks live in a `BlockList` (a
`TensorList` on TensorFlow), read and written one at a time; `fori_loop` is
the loop.

Shapes may be Python ints or, for a dynamic sequence length, scalar tensors
(`lengths.py`); the helpers accept both.
"""

import keras
from keras import ops

from keras_tfm.layers.attention.lengths import is_int, pad_axis


def blocks_of(x, batch, block, pad, heads, dim):
    """`(B, T, H, D)` -> float32 `(n, B, H, block, D)`: row block `i` is `[i]`."""
    x = pad_axis(ops.cast(x, "float32"), 1, pad)
    x = ops.reshape(x, (batch, -1, block, heads, dim))
    return ops.transpose(x, (1, 0, 3, 2, 4))


def from_blocks(x, batch, length, dtype, dim=None):
    """Inverse of `blocks_of`: `(n, B, H, block, D)` -> `(B, length, H, D)` in `dtype`,
    keeping the first `dim` features (None: all)."""
    x = ops.reshape(ops.transpose(x, (1, 0, 3, 2, 4)), (batch, -1, x.shape[2], x.shape[4]))
    return ops.cast(ops.slice(x, (0, 0, 0, 0), (-1, length, -1, -1 if dim is None else dim)), dtype)


def augment(x, value):
    """`x` with one more feature column, equal to `value`."""
    return ops.concatenate([x, ops.full(ops.shape(x)[:-1] + (1,), value, x.dtype)], axis=-1)


class BlockList:
    """`n` equally shaped float32 blocks, read and written one at a time in a loop.

    On TensorFlow a `TensorList` (the storage of `tf.TensorArray`): a read
    aliases the block and a write replaces it, so an access costs O(block).
    A `(n, ...)` tensor would be copied whole by every `slice_update` outside
    XLA (a T × d copy per block; bench/RESULTS.md). Other
    backends keep the `(n, ...)` tensor (`jax.jit` updates it in place).
    The loops carry the handle that `from_tensor`/`zeros`/`write` return.
    """

    def __init__(self, shape):
        self.shape = tuple(shape)  # ints, or a scalar tensor for a dynamic batch size
        self.tf = keras.backend.backend() == "tensorflow"

    def _shape_arg(self):
        return [s if is_int(s) else -1 for s in self.shape]

    def from_tensor(self, x):
        """The list of the `n` blocks of an `(n, *shape)` tensor."""
        if not self.tf:
            return x
        import tensorflow as tf  # the backend in use

        return tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=self._shape_arg())

    def zeros(self, n):
        return self.from_tensor(ops.zeros((n,) + self.shape, "float32"))

    def read(self, handle, i):
        if not self.tf:
            return ops.take(handle, i, axis=0)
        import tensorflow as tf  # the backend in use

        return tf.raw_ops.TensorListGetItem(
            input_handle=handle, index=i, element_shape=self._shape_arg(), element_dtype=tf.float32
        )

    def write(self, handle, i, block):
        if not self.tf:
            return ops.slice_update(handle, (i,) + (0,) * len(self.shape), block[None])
        import tensorflow as tf  # the backend in use

        return tf.raw_ops.TensorListSetItem(input_handle=handle, index=i, item=block)

    def stack(self, handle):
        if not self.tf:
            return handle
        import tensorflow as tf  # the backend in use

        return tf.raw_ops.TensorListStack(
            input_handle=handle, element_shape=self._shape_arg(), element_dtype=tf.float32
        )


def after(tensors, dependency):
    """`tensors`, but on TensorFlow only available once `dependency` is computed.

    A TensorFlow graph runs every op as soon as its inputs exist, so blocks
    that do not depend on each other (the edge blocks unrolled beside a loop)
    would hold their score blocks at the same time; this orders them. Other
    backends compile the whole step and schedule it themselves.
    """
    if keras.backend.backend() != "tensorflow":
        return tensors
    import tensorflow as tf  # the backend in use

    with tf.control_dependencies([dependency]):
        return tf.nest.map_structure(tf.identity, tensors)


def fori_loop(lower, upper, body, carry):
    """`carry = body(i, carry)` for i in [lower, upper); carry is a tuple.

    `keras.ops.fori_loop`, except on TensorFlow, where the `tf.while_loop` gets
    `parallel_iterations=1`: overlapping iterations would multiply the memory
    of the score blocks.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # the backend in use; never imported on other backends

        return tf.while_loop(
            lambda i, *c: i < upper,
            lambda i, *c: (i + 1, *body(i, c)),
            (tf.convert_to_tensor(lower, tf.int32), *carry),
            parallel_iterations=1,
        )[1:]
    return tuple(ops.fori_loop(lower, upper, lambda i, c: tuple(body(i, c)), tuple(carry)))


def diagonal_sums(x, rows, cols):
    """Sums of a `(h, rows, cols)` block along its diagonals: `(h, rows + cols - 1)`,
    entry `c` holding the sum over `j - i = c - (rows - 1)`."""
    h = x.shape[0]
    x = ops.flip(x, axis=1)  # row r is query rows - 1 - r
    x = ops.pad(x, [[0, 0], [0, 0], [0, rows]])
    x = ops.reshape(x, (h, rows * (cols + rows)))[:, : rows * (cols + rows - 1)]
    # Row r is now shifted right by r: column c holds query rows-1-r, key c-r.
    return ops.sum(ops.reshape(x, (h, rows, cols + rows - 1)), axis=1)
