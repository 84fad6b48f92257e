"""ALiBi: attention with linear biases (Press et al. 2022)."""

import math

import keras
from keras import ops

from keras_tfm.checks import check_positive_int


def alibi_slopes(num_heads):
    """Head slopes m_h: the geometric sequence 2^(-8h/n) of the paper, with its
    interleaving rule when `num_heads` is not a power of two."""

    def power_of_two(n):
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return power_of_two(num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: num_heads - closest]


@keras.saving.register_keras_serializable(package="keras_tfm")
class AlibiBias(keras.layers.Layer):
    """Additive attention-score bias that grows linearly with distance.

        bias[h, i, j] = −m_h · |pos_q(i) − pos_k(j)|

    For causal attention this is exactly the paper's −m_h·(i − j) on every
    visible key. No weights; computed in float32.

    Args:
        num_heads: number of attention heads (one slope each).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        query_length: int or scalar tensor.
        key_length: int or scalar tensor.
        query_offset: absolute position of the first query (cached decoding).

    Returns:
        float32 tensor `(num_heads, query_length, key_length)`.
    """

    def __init__(self, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        # Called with Python ints (query_length, key_length), not tensors.
        self._allow_non_tensor_positional_args = True

    def call(self, query_length, key_length, query_offset=0):
        return self.compute_bias(query_length, key_length, query_offset)

    def compute_bias(self, query_length, key_length, query_offset=0):
        """The float32 `(num_heads, query_length, key_length)` bias (usable with
        Python ints or scalar tensors, outside `__call__`)."""
        slopes = ops.convert_to_tensor(alibi_slopes(self.num_heads), dtype="float32")
        q_pos = ops.arange(query_length, dtype="float32") + ops.cast(query_offset, "float32")
        k_pos = ops.arange(key_length, dtype="float32")
        distance = ops.abs(q_pos[:, None] - k_pos[None, :])
        return -slopes[:, None, None] * distance[None, :, :]

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config
