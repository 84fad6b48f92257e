"""T5-style bucketed relative position bias (Raffel et al. 2020)."""

import math

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_positive_int


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
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
class RelativePositionBias(keras.layers.Layer):
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

    Call arguments:
        query_length: int or scalar tensor.
        key_length: int or scalar tensor.
        query_offset: absolute position of the first query (cached decoding).

    Returns:
        float32 tensor `(num_heads, query_length, key_length)`.
    """

    def __init__(
        self,
        num_heads,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        embeddings_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.num_buckets = check_positive_int("num_buckets", num_buckets)
        self.max_distance = check_positive_int("max_distance", max_distance)
        if (num_buckets // (2 if bidirectional else 1)) < 2:
            raise ValueError(
                f"`num_buckets` is too small for bidirectional={bidirectional}; received {num_buckets}."
            )
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        # Called with Python ints (query_length, key_length), not tensors.
        self._allow_non_tensor_positional_args = True

    def build(self, *args, **kwargs):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.num_buckets, self.num_heads),
            initializer=self.embeddings_initializer,
        )

    def call(self, query_length, key_length, query_offset=0):
        return self.compute_bias(query_length, key_length, query_offset)

    def compute_bias(self, query_length, key_length, query_offset=0):
        """The float32 `(num_heads, query_length, key_length)` bias (usable with
        Python ints or scalar tensors, outside `__call__`)."""
        if not self.built:
            self.build()
        q_pos = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")
        k_pos = ops.arange(key_length, dtype="int32")
        relative = k_pos[None, :] - q_pos[:, None]
        buckets = relative_position_bucket(relative, self.bidirectional, self.num_buckets, self.max_distance)
        values = ops.take(ops.cast(self.embeddings, "float32"), buckets, axis=0)  # (Tq, Tk, H)
        return ops.transpose(values, (2, 0, 1))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
                "bidirectional": self.bidirectional,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
