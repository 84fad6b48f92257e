"""ALiBi: attention with linear biases (Press et al. 2022)."""

import math
from typing import Any

import keras
from keras import ops

from keras_tfm.layers.attention.offset_bias import OffsetBias


def alibi_slopes(num_heads: int) -> list[float]:
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
class AlibiBias(OffsetBias):
    """Additive attention-score bias that grows linearly with distance.

        bias[h, i, j] = −m_h · |pos_q(i) − pos_k(j)|

    For causal attention this is exactly the paper's −m_h·(i − j) on every
    visible key. No weights; computed in float32.

    Args:
        num_heads: number of attention heads (one slope each).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments and return value: those of `OffsetBias`.
    """

    def __init__(self, num_heads: int, **kwargs):
        super().__init__(num_heads, **kwargs)
        self.built = True  # no weights (`model.quantize` refuses unbuilt layers)

    def offset_bias(self, offsets: Any) -> Any:
        slopes = ops.convert_to_tensor(alibi_slopes(self.num_heads), dtype="float32")
        distance = ops.abs(ops.cast(offsets, "float32"))
        return -ops.reshape(slopes, (-1,) + (1,) * len(offsets.shape)) * distance[None]
