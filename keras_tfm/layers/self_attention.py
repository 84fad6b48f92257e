"""Multi-head self-attention: queries, keys and values from one sequence."""

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_cache_index, check_rank
from keras_tfm.layers import masks as masks_lib
from keras_tfm.layers.multi_head_attention import MultiHeadAttentionBase


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

    Incremental (cached) decoding: pass `cache`, a `(batch, 2, max_length,
    num_heads, key_dim)` tensor of keys and values (zeros initially), and
    `cache_index`, the number of positions already written (a uint16 cache
    holds bfloat16 bits: half the bytes per step). The new keys and
    values are written in place with a slice update (no concatenation), the
    queries attend to every filled position (causally), and the updated cache
    is returned as the last output.

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
        cache: optional key/value cache (see above).
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
            check_rank("cache", cache, 5)
            if self._key_dim != self._value_dim:
                raise ValueError("A key/value cache needs `key_dim == value_dim`.")
            key_length = ops.shape(cache)[2]
            # Negative or overflowing indices would be clamped into the wrong cache slots.
            start = ops.cast(check_cache_index("cache_index", cache_index, length, key_length), "int32")
            causal = masks_lib.causal_mask(length, key_length, offset=start)
            key_padding = padding_mask

        if self.rotary is not None:
            query = self.rotary(query, start_index=start)
            key = self.rotary(key, start_index=start)

        new_cache = None
        if cache is not None:
            # One in-place slice update of the whole (B, 2, L, H, D) cache
            # (slicing K and V out, updating and re-stacking them would copy
            # the entire cache at every step).
            zero = ops.zeros((), "int32")
            # A uint16 cache holds bfloat16 bits (`cache_bits`): Keras casts a
            # float cache argument to the compute dtype at every layer call.
            packed = cache.dtype == "uint16"
            stored = ops.view(cache, "bfloat16") if packed else cache
            new_kv = ops.cast(ops.stack([key, value], axis=1), stored.dtype)
            new_cache = ops.slice_update(stored, (zero, zero, start, zero, zero), new_kv)
            key, value = ops.cast(new_cache[:, 0], key.dtype), ops.cast(new_cache[:, 1], value.dtype)
            if packed:
                new_cache = ops.view(new_cache, "uint16")

        full_mask = masks_lib.merge_masks(
            causal,
            None if key_padding is None else ops.cast(key_padding, "bool")[:, None, :],
            attention_mask,
        )
        bias = self._position_bias(length, key_length, start)
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

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update({"causal": self.causal})
        return config
