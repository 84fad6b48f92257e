"""Multi-head self-attention: queries, keys and values from one sequence."""

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_cache_index, check_positive_int, check_rank
from keras_tfm.layers.attention import masks as masks_lib
from keras_tfm.layers.attention.multi_head import MultiHeadAttentionBase

#: Slot (length) axis of the two tensors of a decoding cache: keys `(batch,
#: kv_heads, key_dim, length)` are stored transposed, values are `(batch,
#: kv_heads, length, value_dim)` (`MultiHeadSelfAttention.init_cache`).
CACHE_LENGTH_AXES = (3, 2)


@keras.saving.register_keras_serializable(package="keras_tfm")
class MultiHeadSelfAttention(MultiHeadAttentionBase):
    """Multi-head scaled dot-product self-attention.

        Q = X W^Q,  K = X W^K,  V = X W^V                     (per head)
        head_h = softmax(Q_h K_hᵀ / √d_k + B_h + M) V_h
        output = Concat(head_1, …, head_H) W^O

    `M` is 0 where attention is allowed and −∞ (in practice a large finite
    float32 number) where it is not; the boolean masks use True = may attend.
    With `causal=True`, query t only sees keys ≤ t. `B` is the position bias of
    `position="alibi"` or `"relative"`; `position="rope"` rotates Q and K instead.

    Padding masks come from the Keras implicit mask (e.g.
    `Embedding(mask_zero=True)`), from `padding_mask`, or both (they are ANDed);
    the input mask is propagated to the output.

    Incremental (cached) decoding: pass `cache`, a pair `(keys, values)` from
    `init_cache`: keys `(batch, num_key_value_heads, key_dim, max_length)`
    (stored transposed) and values `(batch, num_key_value_heads, max_length,
    value_dim)`, zeros initially (uint16 tensors hold bfloat16 bits: half the
    bytes), and `cache_index`, the number of positions already written. The
    new keys and values are written in place (no concatenation), the queries
    attend to every filled position (causally), and the updated pair is
    returned as the last output. A single query (a decoding step) is two
    batched matmuls over the cache (`_attend_one_query_grouped`), q·K and P·V,
    each the plain (rows × depth)·(depth × columns) form: both read the cache
    where it lies, each cached key and value once. (Keys stored
    `(…, length, key_dim)` would need the transposed product q·Kᵀ, and XLA on
    CPU copies the whole key cache into the other layout at every step.) A
    rank-5 tensor `(batch, 2, max_length, num_key_value_heads, head_dim)` (the
    earlier layout) is accepted too and returned in that layout (converted on
    every call: slower).

    Args:
        num_heads: number of heads.
        key_dim: per-head query/key size; defaults to `d_model // num_heads`.
        value_dim: per-head value size; defaults to `key_dim`.
        output_dim: output size; defaults to `d_model`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        causal: whether to apply the causal (look-ahead) mask.
        position: None, "rope", "alibi" or "relative".
        attention_impl: attention-core implementation name ("auto", "standard", ...).
        attention_options: dict of options for that implementation.
        **kwargs: see `MultiHeadAttentionBase`.

    Call arguments:
        inputs: `(batch, length, d_model)`.
        padding_mask: optional bool `(batch, length)`, True at real tokens. With
            `cache`, it covers the cache positions: `(batch, max_length)`.
        attention_mask: optional bool `(batch, length, length)` (or rank 2 / 4),
            True = may attend; combined with the causal and padding masks.
        return_attention_scores: also return the float32 weights
            `(batch, num_heads, length, key_length)`.
        training: Python bool, enables attention dropout.
        cache: optional key/value cache (see above and `init_cache`).
        cache_index: int or scalar int tensor, required with `cache`.

    Returns:
        `output` of shape `(batch, length, output_dim)`; followed by the
        attention weights if `return_attention_scores`, and by the updated cache
        if `cache` was given.
    """

    def __init__(
        self,
        num_heads,
        key_dim=None,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        causal=False,
        position=None,
        **kwargs,
    ):
        super().__init__(
            num_heads,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            use_bias=use_bias,
            position=position,
            **kwargs,
        )
        self.causal = check_bool("causal", causal)
        # Causal models never see future keys, so relative buckets go to the past.
        self._bidirectional_positions = not self.causal

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                f"`inputs` must have rank 3 (batch, length, d_model); received shape {tuple(input_shape)}."
            )
        self._build_projections(input_shape, input_shape, input_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_index=None,
        mask=None,
        inputs_mask=None,
    ):
        check_rank("inputs", inputs, 3)
        query, key, value = self._project_heads(inputs, (self.query_dense, self.key_dense, self.value_dense))
        length = ops.shape(inputs)[1]

        if cache is None:
            implicit = masks_lib.merge_masks(mask, inputs_mask)
            padding_mask = masks_lib.check_padding_mask(padding_mask, inputs, "padding_mask")
            masks_lib.check_attention_mask(attention_mask, inputs.shape[1], inputs.shape[1])
            start = 0
            key_length = length
            causal = None  # applied inside the attention core (`causal=` below)
            key_padding = masks_lib.merge_masks(padding_mask, implicit)
        else:
            if cache_index is None:
                raise ValueError("`cache_index` is required when `cache` is given.")
            cached_keys, cached_values = self._unpack_cache(cache)
            key_length = ops.shape(cached_values)[CACHE_LENGTH_AXES[1]]
            # Negative or overflowing indices would be clamped into the wrong cache slots.
            start = ops.cast(check_cache_index("cache_index", cache_index, length, key_length), "int32")
            causal = masks_lib.causal_mask(length, key_length, offset=start)
            key_padding = padding_mask

        if self.rotary is not None:
            query = self.rotary(query, start_index=start)
            key = self.rotary(key, start_index=start)

        new_cache = None
        if cache is not None:
            cached_keys = _write_slots(cached_keys, key, start, CACHE_LENGTH_AXES[0])
            cached_values = _write_slots(cached_values, value, start, CACHE_LENGTH_AXES[1])
            new_cache = self._pack_cache(cache, cached_keys, cached_values)
            key, value = _read_slots(cached_keys, key.dtype), _read_slots(cached_values, value.dtype)

        full_mask = masks_lib.merge_masks(
            causal,
            None if key_padding is None else ops.cast(key_padding, "bool")[:, None, :],
            attention_mask,
        )
        bias = self._position_bias(length, key_length, start)
        if cache is not None and self._one_query_step(query, full_mask, return_attention_scores):
            output = self._attend_one_query_grouped(
                query, key, value, full_mask, bias, training, cache_layout=True
            )
            weights = None
        else:
            if cache is not None:  # the attention core takes (batch, length, heads, dim)
                key, value = ops.transpose(key, (0, 3, 1, 2)), ops.transpose(value, (0, 2, 1, 3))
            output, weights = self._attend(
                query,
                key,
                value,
                full_mask,
                bias,
                return_attention_scores,
                training,
                causal=self.causal and cache is None,
            )

        outputs = (output,)
        if return_attention_scores:
            outputs += (weights,)
        if cache is not None:
            outputs += (new_cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def init_cache(self, batch_size, length, dtype=None):
        """Zero key/value cache of `length` slots for this (built) layer.

        Args:
            batch_size: int (or scalar tensor).
            length: int, number of cache slots (the longest sequence decoded).
            dtype: storage dtype (default: the compute dtype). "bfloat16"
                halves the bytes a decoding step reads; unless the compute
                dtype is bfloat16 it is stored as bfloat16 bits (uint16),
                since Keras casts a float cache argument to the compute dtype
                at every call.

        Returns:
            `(keys, values)`: keys `(batch, kv_heads, key_dim, length)` (stored
            transposed), values `(batch, kv_heads, length, value_dim)`; the slot
            axis of each is `CACHE_LENGTH_AXES`.
        """
        if not self.built:
            raise ValueError("`init_cache` needs a built layer (call it once, or `build` it, first).")
        length = check_positive_int("length", length)
        dtype = dtype or self.compute_dtype
        if dtype == "bfloat16" and self.compute_dtype != "bfloat16":
            dtype = "uint16"
        heads = self.num_key_value_heads or self.num_heads
        return (
            ops.zeros((batch_size, heads, self._key_dim, length), dtype=dtype),
            ops.zeros((batch_size, heads, length, self._value_dim), dtype=dtype),
        )

    def _unpack_cache(self, cache):
        """`(keys, values)` in the `init_cache` layout, from a cache pair or from a
        rank-5 `(batch, 2, length, G, head_dim)` tensor (the earlier layout)."""
        heads = self.num_key_value_heads or self.num_heads
        if isinstance(cache, (tuple, list)):
            if len(cache) != 2:
                raise ValueError(f"`cache` must be a pair (keys, values); received {len(cache)} tensors.")
            for name, part in zip(("cache[0] (keys)", "cache[1] (values)"), cache):
                check_rank(name, part, 4)
            keys, values = cache
        else:
            check_rank("cache", cache, 5)
            if self._key_dim != self._value_dim:
                raise ValueError("A stacked (rank-5) key/value cache needs `key_dim == value_dim`.")
            keys, values = ops.transpose(cache[:, 0], (0, 2, 3, 1)), ops.transpose(cache[:, 1], (0, 2, 1, 3))
        if (
            tuple(keys.shape[1:3]) != (heads, self._key_dim)
            or values.shape[1] != heads
            or values.shape[3] != self._value_dim
            or (
                keys.shape[3] is not None and values.shape[2] is not None and keys.shape[3] != values.shape[2]
            )
        ):
            raise ValueError(
                f"`cache` must be (keys, values) as `init_cache` makes them: keys (batch, {heads} key/value "
                f"heads, {self._key_dim}, length) and values (batch, {heads}, length, {self._value_dim}); "
                f"received shapes {tuple(keys.shape)} and {tuple(values.shape)}."
            )
        return keys, values

    @staticmethod
    def _pack_cache(cache, keys, values):
        """The updated cache in the caller's form: a pair, or the rank-5 tensor."""
        if isinstance(cache, (tuple, list)):
            return keys, values
        return ops.stack([ops.transpose(keys, (0, 3, 1, 2)), ops.transpose(values, (0, 2, 1, 3))], axis=1)

    def _one_query_step(self, query, mask, return_attention_scores):
        """Whether a cached call takes `_attend_one_query_grouped`: one query,
        the standard core ("auto" is standard for one query), no weights
        requested, a mask without a per-head axis."""
        return (
            query.shape[1] == 1
            and self.attention_impl in ("auto", "standard")
            and not return_attention_scores
            and (mask is None or len(mask.shape) < 4 or mask.shape[1] == 1)
        )

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update({"causal": self.causal})
        return config


def _write_slots(cached, new, start, axis):
    """Writes `new` `(batch, T, G, d)` into a cache tensor at slots `start ..
    start + T - 1` of its length `axis` (3: keys `(batch, G, d, L)`; 2:
    values `(batch, G, L, d)`), as bfloat16 bits when `cached` is uint16.

    One decoding step (T = 1) is a scatter of `batch·G·d` numbers: XLA updates
    the loop's buffer in place and hands it to the attention matmuls as is.
    (A dynamic slice update there is fused with the reshape XLA puts before
    a matmul whose batch or head axis has size 1, and the fused copy then
    re-writes the whole cache at every step.)
    """
    new = ops.transpose(new, (0, 2, 3, 1) if axis == 3 else (0, 2, 1, 3))
    if cached.dtype == "uint16":  # bfloat16 bits: Keras would cast a float cache argument
        new = ops.view(ops.cast(new, "bfloat16"), "uint16")
    else:
        new = ops.cast(new, cached.dtype)
    zero = ops.zeros((), "int32")
    if new.shape[axis] != 1:
        return ops.slice_update(cached, (zero, zero) + ((zero, start) if axis == 3 else (start, zero)), new)
    # Every (batch, head, feature) row of the slot, in `new`'s order.
    dims = [ops.shape(cached)[0], cached.shape[1], cached.shape[5 - axis]]
    flat = ops.arange(dims[0] * dims[1] * dims[2], dtype="int32")
    index = [flat // (dims[1] * dims[2]), (flat // dims[2]) % dims[1], flat % dims[2]]
    index.insert(axis, ops.broadcast_to(ops.cast(start, "int32"), ops.shape(flat)))
    return ops.scatter_update(cached, ops.stack(index, axis=1), ops.reshape(new, (-1,)))


def _read_slots(cached, dtype):
    """The cache in the compute dtype (bfloat16 bits unpacked)."""
    if cached.dtype == "uint16":
        cached = ops.view(cached, "bfloat16")
    return ops.cast(cached, dtype)
