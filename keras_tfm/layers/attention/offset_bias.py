"""Score biases that depend only on the key − query offset: the base of ALiBi
(`alibi.py`) and T5 relative positions (`relative_position_bias.py`).

    bias[h, i, j] = f_h(pos_k(j) − pos_q(i))

Because the bias is a function of the offset alone, the attention core can
also take it as an O(T) `ToeplitzBias` (`toeplitz_bias.py`).
"""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_int


class OffsetBias(keras.layers.Layer):
    """Per-head additive score bias computed from key − query offsets.

    Subclasses implement `offset_bias(offsets)`: float32 `(num_heads,
    *offsets.shape)` from an int32 tensor of key − query offsets.

    Args:
        num_heads: number of attention heads.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        query_length: int or scalar tensor.
        key_length: int or scalar tensor.
        query_offset: absolute position of the first query (cached decoding).

    Returns:
        float32 tensor `(num_heads, query_length, key_length)`.
    """

    def __init__(self, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        # Called with Python ints (query_length, key_length), not tensors.
        self._allow_non_tensor_positional_args = True

    def call(self, query_length: Any, key_length: Any, query_offset: Any = 0):
        return self.compute_bias(query_length, key_length, query_offset)

    def compute_bias(self, query_length: Any, key_length: Any, query_offset: Any = 0) -> Any:
        """The float32 `(num_heads, query_length, key_length)` bias (usable with
        Python ints or scalar tensors, outside `__call__`)."""
        q_pos = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")
        k_pos = ops.arange(key_length, dtype="int32")
        return self.offset_bias(k_pos[None, :] - q_pos[:, None])

    def offset_bias(self, offsets: Any) -> Any:
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config
