"""Multi-head self-attention: queries, keys and values from one sequence."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_positive_int
from keras_tfm.layers.attention import decoding
from keras_tfm.layers.attention import masks as masks_lib
from keras_tfm.layers.attention.multi_head import MultiHeadAttentionBase
from keras_tfm.tensor_checks import check_cache_index, check_rank


@keras.saving.register_keras_serializable(package="keras_tfm")
class MultiHeadSelfAttention(MultiHeadAttentionBase):
    """Multi-head scaled dot-product self-attention.

        Q = X W^Q,  K = X W^K,  V = X W^V                     (per head)
        head_h = softmax(Q_h K_hᵀ / √d_k + B_h + M) V_h
        output = Concat(head_1, …, head_H) W^O

    `M` is 0 where attention is allowed and −∞ (in practice a large finite
    float32 number) where it is not; the boolean masks use True = may attend.
    With `causal=True`, query t only sees keys ≤ t; with `sliding_window=W`
    also only keys j > t - W (the last W keys, itself included; without
    `causal`, |t - j| < W). `B` is the position bias of
    `position="alibi"` or `"relative"`; `position="rope"` rotates Q and K instead.

    Padding masks come from the Keras implicit mask (e.g.
    `Embedding(mask_zero=True)`), from `padding_mask`, or both (they are ANDed);
    the input mask is propagated to the output.

    Incremental (cached) decoding: pass `cache`, the pair `(keys, values)`
    from `init_cache` (keys `(batch, num_key_value_heads, key_dim,
    max_length)`, stored transposed, and values `(batch, num_key_value_heads,
    max_length, value_dim)`), and `cache_index`, the number of positions
    already written. The new keys and values are written into their slots,
    the queries attend to every filled position (causally), and the updated
    pair is returned as the last output. A single query (a decoding step)
    reads each cached key and value once (`decoding.py`).

    Args:
        num_heads: number of heads.
        key_dim: per-head query/key size; defaults to `d_model // num_heads`.
        value_dim: per-head value size; defaults to `key_dim`.
        output_dim: output size; defaults to `d_model`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        causal: whether to apply the causal (look-ahead) mask.
        sliding_window: None, or W: query t attends only to keys j with
            |t - j| < W (Mistral; cache slots in cached decoding, the prefill
            and every step alike).
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
        score_bias: optional float32 B `(num_heads, length, key_length)` of a
            cached call, computed once for a stack of layers that share one
            `position_bias` table (T5); None: the layer computes its own.

    Returns:
        `output` of shape `(batch, length, output_dim)`; followed by the
        attention weights if `return_attention_scores`, and by the updated cache
        if `cache` was given.
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        causal: bool = False,
        position: str | None = None,
        sliding_window: int | None = None,
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
        self.sliding_window = check_positive_int("sliding_window", sliding_window, allow_none=True)
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
        inputs: Any,
        padding_mask: Any = None,
        attention_mask: Any = None,
        return_attention_scores: bool = False,
        training: bool | None = None,
        cache: tuple[Any, Any] | None = None,
        cache_index: Any = None,
        mask: Any = None,
        inputs_mask: Any = None,
        score_bias: Any = None,
    ):
        check_rank("inputs", inputs, 3)
        length = ops.shape(inputs)[1]
        # Q = X W^Q, K = X W^K, V = X W^V, split into heads.
        query, key, value = self._project_heads(inputs, (self.query_dense, self.key_dense, self.value_dense))

        if cache is None:
            start, key_length = 0, length
            mask = self._sequence_mask(
                inputs, padding_mask, attention_mask, masks_lib.merge_masks(mask, inputs_mask)
            )
            mask = masks_lib.merge_masks(mask, self._window_mask(length, length, 0))
        else:
            if cache_index is None:
                raise ValueError("`cache_index` is required when `cache` is given.")
            heads = self.num_key_value_heads or self.num_heads
            cache = decoding.check_cache(cache, heads, self._key_dim, self._value_dim)
            key_length = decoding.cache_length(cache)
            # Negative or overflowing indices would be clamped into the wrong cache slots.
            start = ops.cast(check_cache_index("cache_index", cache_index, length, key_length), "int32")
            # The new queries sit at positions start…; `padding_mask` covers the cache slots.
            mask = masks_lib.merge_masks(
                masks_lib.causal_mask(length, key_length, offset=start),
                None if padding_mask is None else ops.cast(padding_mask, "bool")[:, None, :],
                attention_mask,
                self._window_mask(length, key_length, start),
            )

        if self.rotary is not None:  # RoPE rotates Q and K by their absolute positions
            query = self.rotary(query, start_index=start)
            key = self.rotary(key, start_index=start)
        # B: ALiBi / T5 relative positions (a shared table's B may come computed: `score_bias`)
        bias = self._position_bias(length, key_length, start) if score_bias is None else score_bias

        if cache is not None:  # the new keys and values go into their slots; attend over all of them
            cache = decoding.write_cache(cache, key, value, start)
            key, value = decoding.read_cache(cache, key.dtype)
        # heads = softmax(Q Kᵀ/√d_k + B + M) V; causality (uncached) is applied inside the core.
        heads, weights = self._compute_attention(
            query,
            key,
            value,
            mask,
            bias,
            return_attention_scores,
            training,
            causal=self.causal and cache is None,
            cache_layout=cache is not None,
        )
        output = self._project_output(heads)  # Concat(head_1, …, head_H) W^O

        outputs = (output,)
        if return_attention_scores:
            outputs += (weights,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _window_mask(self, query_length: Any, key_length: Any, offset: Any) -> Any:
        """The `(Tq, Tk)` sliding-window mask (queries from position `offset`), or None."""
        if self.sliding_window is None:
            return None
        return masks_lib.sliding_window_mask(query_length, key_length, self.sliding_window, offset)

    def _sequence_mask(self, inputs: Any, padding_mask: Any, attention_mask: Any, implicit_mask: Any) -> Any:
        """M of an uncached call: key padding (`padding_mask` ∧ the implicit mask)
        `(B, 1, T)` ∧ `attention_mask`, or None."""
        padding_mask = masks_lib.check_padding_mask(padding_mask, inputs, "padding_mask")
        masks_lib.check_attention_mask(attention_mask, inputs.shape[1], inputs.shape[1])
        key_padding = masks_lib.merge_masks(padding_mask, implicit_mask)
        return masks_lib.merge_masks(
            None if key_padding is None else ops.cast(key_padding, "bool")[:, None, :], attention_mask
        )

    def init_cache(self, batch_size: Any, length: int, dtype: str | None = None) -> tuple[Any, Any]:
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
            `(keys, values)`: keys `(batch, num_key_value_heads, key_dim, length)` (stored
            transposed), values `(batch, num_key_value_heads, length, value_dim)`; the slot
            axis of each is `decoding.CACHE_LENGTH_AXES`.
        """
        if not self.built:
            raise ValueError("`init_cache` needs a built layer (call it once, or `build` it, first).")
        heads = self.num_key_value_heads or self.num_heads
        return decoding.init_cache(
            batch_size,
            length,
            heads,
            self._key_dim,
            self._value_dim,
            dtype or self.compute_dtype,
            self.compute_dtype,
        )

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update({"causal": self.causal, "sliding_window": self.sliding_window})
        return config
