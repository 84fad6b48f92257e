"""T5-style bucketed relative position bias (Raffel et al. 2020)."""

import math
from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_positive_int
from keras_tfm.layers.attention.offset_bias import OffsetBias


def relative_position_bucket(
    relative_position: Any, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> Any:
    """Maps relative positions (key − query) to bucket ids, as in T5.

    Half the buckets hold exact small distances; the rest cover distances up to
    `max_distance` logarithmically; farther ones share the last bucket. With
    `bidirectional`, the buckets are split between keys before and after the
    query.
    """
    relative_position = ops.cast(relative_position, "int32")
    bucket = ops.zeros_like(relative_position)
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + ops.cast(ops.less(n, 0), "int32") * num_buckets
        n = ops.abs(n)
    else:
        n = ops.maximum(n, 0)
    max_exact = num_buckets // 2
    is_small = ops.less(n, max_exact)
    n_f = ops.maximum(ops.cast(n, "float32"), 1.0)
    large = max_exact + ops.cast(
        ops.log(n_f / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact),
        "int32",
    )
    large = ops.minimum(large, num_buckets - 1)
    return bucket + ops.where(is_small, n, large)


@keras.saving.register_keras_serializable(package="keras_tfm")
class RelativePositionBias(OffsetBias):
    """Learned per-head score bias indexed by bucketed relative position.

        bias[h, i, j] = E[bucket(pos_k(j) − pos_q(i)), h]

    Args:
        num_heads: number of attention heads.
        num_buckets: number of relative-position buckets (32 in T5).
        max_distance: distance beyond which all positions share a bucket.
        bidirectional: True for encoders; False for causal decoders (keys after
            the query are never visible, so all buckets go to the past).
        embeddings_initializer: initializer of the `(num_buckets, num_heads)` table.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments and return value: those of `OffsetBias`.
    """

    def __init__(
        self,
        num_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        embeddings_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(num_heads, **kwargs)
        self.num_buckets = check_positive_int("num_buckets", num_buckets)
        self.max_distance = check_positive_int("max_distance", max_distance)
        if (num_buckets // (2 if bidirectional else 1)) < 2:
            raise ValueError(
                f"`num_buckets` is too small for bidirectional={bidirectional}; received {num_buckets}."
            )
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, *args, **kwargs):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.num_buckets, self.num_heads),
            initializer=self.embeddings_initializer,
        )

    def offset_bias(self, offsets: Any) -> Any:
        if not self.built:
            self.build()
        buckets = relative_position_bucket(offsets, self.bidirectional, self.num_buckets, self.max_distance)
        values = ops.take(ops.cast(self.embeddings, "float32"), buckets, axis=0)  # (*offsets.shape, H)
        return ops.moveaxis(values, -1, 0)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
                "bidirectional": self.bidirectional,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
