"""Shared machinery of the multi-head attention layers.

    head_h = Attention(X_q W_h^Q, X_kv W_h^K, X_kv W_h^V)
    MultiHead(X_q, X_kv) = Concat(head_1, …, head_H) W^O

`MultiHeadAttentionBase` owns the four projections (laid out as in
`keras.layers.MultiHeadAttention`, so weights transfer one to one;
`projections.py`), the position schemes that act inside attention (RoPE on
q/k, ALiBi or T5 relative bias on the scores) and the call into the attention
formula, `dot_product.dot_product_attention` (`_compute_attention`).
"""

from collections.abc import Sequence
from typing import Any

import keras

from keras_tfm.checks import (
    check_bool,
    check_choice,
    check_known_keys,
    check_positive_float,
    check_positive_int,
    check_rate,
)
from keras_tfm.layers.attention import projections
from keras_tfm.layers.attention.alibi import AlibiBias
from keras_tfm.layers.attention.core import check_attention_impl, implementation_options
from keras_tfm.layers.attention.dot_product import dot_product_attention
from keras_tfm.layers.attention.relative_position_bias import RelativePositionBias
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.quantization import QuantizeSublayersMixin
from keras_tfm.layers.rotary_embedding import RotaryEmbedding

#: Position schemes that act inside attention (absolute ones act on embeddings).
ATTENTION_POSITIONS = (None, "rope", "alibi", "relative")


class MultiHeadAttentionBase(QuantizeSublayersMixin, keras.layers.Layer):
    """Base class; see `MultiHeadSelfAttention` and `CrossAttention`.

    Args:
        num_heads: number of attention (query) heads `H`.
        num_key_value_heads: number of key/value heads `G` (grouped-query
            attention, Ainslie et al. 2023): query heads `h·H/G … (h+1)·H/G − 1`
            share key/value head `h`, as in `keras.layers.GroupQueryAttention`.
            `G = 1` is multi-query attention; None (default) or `G = H` is
            ordinary multi-head attention. Must divide `num_heads`. The key and
            value projections (and a key/value cache) have `G` heads.
        key_dim: size of each query/key head; defaults to `d_model // num_heads`
            (then `d_model` must be divisible by `num_heads`).
        value_dim: size of each value head; defaults to `key_dim`.
        output_dim: size of the output; defaults to the query's `d_model`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        output_bias: whether the output projection W^O has a bias; None (default) =
            `use_bias` (False with `use_bias=True`: biases on Q, K, V only, Qwen2).
        position: None, "rope", "alibi" or "relative".
        attention_impl: name of the attention-core implementation: "auto"
            (default: exact chunked attention for long keys when no weights are
            requested, else "standard"), "reference", "standard", or another
            entry of `ATTENTION_IMPLS`.
        attention_options: dict of options for that implementation.
        rope_max_wavelength: base of the RoPE frequencies.
        relative_num_buckets, relative_max_distance: T5 relative bias options.
        position_bias: with `position="relative"`, a `RelativePositionBias` layer to
            use instead of one of its own (T5 shares one table among the
            self-attention layers of a stack); its buckets and direction are
            then the shared layer's. Not part of the config: the model that
            shares it passes it again when it is rebuilt.
        attention_scale: the score scale s of softmax(s·Q Kᵀ + B + M); None (default)
            is 1/√key_dim (T5 uses 1, its query projection absorbs the scale).
        kernel_initializer, bias_initializer: projection initializers.
        **kwargs: standard `keras.layers.Layer` arguments.
    """

    _bidirectional_positions = True

    def __init__(
        self,
        num_heads: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        output_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        position: str | None = None,
        attention_impl: str = "auto",
        num_key_value_heads: int | None = None,
        attention_options: dict | None = None,
        rope_max_wavelength: float = 10000.0,
        relative_num_buckets: int = 32,
        relative_max_distance: int = 128,
        position_bias: RelativePositionBias | None = None,
        attention_scale: float | None = None,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        output_bias: bool | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.num_key_value_heads = check_positive_int(
            "num_key_value_heads", num_key_value_heads, allow_none=True
        )
        if self.num_key_value_heads is not None and self.num_heads % self.num_key_value_heads:
            raise ValueError(
                f"`num_key_value_heads`={num_key_value_heads} must divide `num_heads`={num_heads}."
            )
        self.key_dim = check_positive_int("key_dim", key_dim, allow_none=True)
        self.value_dim = check_positive_int("value_dim", value_dim, allow_none=True)
        self.output_dim = check_positive_int("output_dim", output_dim, allow_none=True)
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = check_bool("use_bias", use_bias)
        self.output_bias = self.use_bias if output_bias is None else check_bool("output_bias", output_bias)
        self.position = check_choice("position", position, ATTENTION_POSITIONS)
        self.attention_impl = check_attention_impl(attention_impl)
        if attention_options is not None and not isinstance(attention_options, dict):
            raise TypeError(f"`attention_options` must be a dict or None; received {attention_options!r}.")
        self.attention_options = dict(attention_options or {})
        valid = implementation_options(attention_impl)
        if valid is not None:  # unknown keys would fail deep inside the core, or be ignored
            check_known_keys("attention_options", attention_options, valid)
        self.rope_max_wavelength = check_positive_float("rope_max_wavelength", rope_max_wavelength)
        self.relative_num_buckets = check_positive_int("relative_num_buckets", relative_num_buckets)
        self.relative_max_distance = check_positive_int("relative_max_distance", relative_max_distance)
        if position_bias is not None and (
            not isinstance(position_bias, RelativePositionBias) or self.position != "relative"
        ):
            raise ValueError(
                "`position_bias` (a shared table) needs position='relative' and a RelativePositionBias; "
                f"received position={self.position!r} and {type(position_bias).__name__}."
            )
        self._shared_position_bias = position_bias
        self.attention_scale = (
            None if attention_scale is None else check_positive_float("attention_scale", attention_scale)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    # ------------------------------------------------------------------ build
    def _resolve_dims(self, d_model):
        if d_model is None:
            raise ValueError("The last dimension (d_model) of the query input must be known.")
        key_dim = self.key_dim
        if key_dim is None:
            if d_model % self.num_heads:
                raise ValueError(
                    f"d_model={d_model} must be divisible by `num_heads`={self.num_heads} "
                    "when `key_dim` is not given."
                )
            key_dim = d_model // self.num_heads
        if self.position == "rope" and key_dim % 2:
            raise ValueError(f"position='rope' needs an even `key_dim`; received {key_dim}.")
        return key_dim, self.value_dim or key_dim, self.output_dim or d_model

    def _projection(self, name, output_shape, equation, bias_axes, use_bias=None):
        use_bias = self.use_bias if use_bias is None else use_bias
        layer = keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if use_bias else None,
            # Each projection gets its own draw (a shared initializer
            # instance would start Q, K, V equal).
            kernel_initializer=clone_initializer(self.kernel_initializer, name),
            bias_initializer=clone_initializer(self.bias_initializer, name),
            dtype=self.dtype_policy,
            name=name,
        )
        # Padding is handled by the attention mask; let implicit masks pass.
        layer.supports_masking = True
        return layer

    def _build_projections(self, query_shape, key_shape, value_shape):
        d_model = query_shape[-1]
        key_dim, value_dim, output_dim = self._resolve_dims(d_model)
        self._key_dim, self._value_dim, self._output_dim = key_dim, value_dim, output_dim
        h = self.num_heads
        kv = self.num_key_value_heads or h
        self.query_dense = self._projection("query", (None, h, key_dim), "btd,dhk->bthk", "hk")
        self.query_dense.build(query_shape)
        self.key_dense = self._projection("key", (None, kv, key_dim), "btd,dhk->bthk", "hk")
        self.key_dense.build(key_shape)
        self.value_dense = self._projection("value", (None, kv, value_dim), "btd,dhk->bthk", "hk")
        self.value_dense.build(value_shape)
        self.output_dense = self._projection(
            "attention_output", (None, output_dim), "bthk,hkd->btd", "d", use_bias=self.output_bias
        )
        self.output_dense.build((query_shape[0], query_shape[1], h, value_dim))
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.rotary = self.alibi = self.relative_bias = None
        if self.position == "rope":
            self.rotary = RotaryEmbedding(self.rope_max_wavelength, dtype=self.dtype_policy, name="rotary")
        elif self.position == "alibi":
            self.alibi = AlibiBias(self.num_heads, dtype=self.dtype_policy, name="alibi")
        elif self.position == "relative" and self._shared_position_bias is not None:
            self.relative_bias = self._shared_position_bias
            if self.relative_bias.num_heads != self.num_heads:
                raise ValueError(
                    f"The shared `position_bias` has {self.relative_bias.num_heads} heads; this layer "
                    f"has {self.num_heads}."
                )
        elif self.position == "relative":
            self.relative_bias = RelativePositionBias(
                self.num_heads,
                num_buckets=self.relative_num_buckets,
                max_distance=self.relative_max_distance,
                bidirectional=self._bidirectional_positions,
                dtype=self.dtype_policy,
                name="relative_position_bias",
            )
        if self.relative_bias is not None and not self.relative_bias.built:
            self.relative_bias.build()

    # ------------------------------------------------------------------- call
    def _project_heads(self, x: Any, layers: Sequence[keras.layers.Layer]) -> list:
        """`x` `(batch, length, d)` through the query/key/value `layers`:
        `(batch, length, heads, dim)` each (`projections.project_heads`)."""
        return projections.project_heads(x, layers, self.use_bias)

    def _project_output(self, heads: Any) -> Any:
        """Concat(heads) W^O (`projections.project_output`)."""
        return projections.project_output(heads, self.output_dense, self.output_bias)

    def _quantizable_sublayers(self):
        return [self.query_dense, self.key_dense, self.value_dense, self.output_dense]

    def _position_bias(self, query_length: Any, key_length: Any, query_offset: Any) -> Any:
        """The ALiBi / relative score bias B. Without a cache (offset 0) it is an
        O(T) `ToeplitzBias` (the chunked core builds it per block); with a
        cache, the dense `(H, Tq, Tk)` tensor (Tq is small there)."""
        layer = self.alibi if self.alibi is not None else self.relative_bias
        if layer is None:
            return None
        if isinstance(query_offset, int) and query_offset == 0:
            return ToeplitzBias.from_bias_fn(
                layer.compute_bias, query_length, key_length, trainable=layer is self.relative_bias
            )
        return layer.compute_bias(query_length, key_length, query_offset)

    def _compute_attention(
        self,
        query: Any,
        key: Any,
        value: Any,
        mask: Any,
        bias: Any,
        return_attention_scores: bool,
        training: Any,
        causal: bool = False,
        cache_layout: bool = False,
    ) -> tuple[Any, Any]:
        """head_h = softmax(s·Q_h K_hᵀ + B_h + M) V_h, s = `attention_scale` or 1/√d_k
        (`dot_product.dot_product_attention`).

        `query` `(B, Tq, H, d)`, `key`/`value` `(B, Tk, G, d)` (`G` key/value heads), or as a
        decoding cache stores them with `cache_layout`. `causal` (equal-length
        self-attention) is applied by the core itself, so no T × T causal mask is built here.

        Returns:
            `(heads, weights)`: heads `(B, Tq, H, dv)`, weights or None.
        """
        options = dict(self.attention_options)
        if options.pop("causal", causal) != causal:
            raise ValueError(
                f"`attention_options['causal']`={self.attention_options['causal']} contradicts the layer "
                f"(causal={causal}); leave it out, the layer sets it."
            )
        return dot_product_attention(
            query,
            key,
            value,
            mask=mask,
            bias=bias,
            scale=self.attention_scale,
            dropout=self.dropout_layer if self.dropout > 0 else None,
            training=training,
            return_attention_scores=return_attention_scores,
            causal=causal,
            attention_impl=self.attention_impl,
            attention_options=options,
            cache_layout=cache_layout,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "num_key_value_heads": self.num_key_value_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_bias": self.output_bias,
                "position": self.position,
                "attention_impl": self.attention_impl,
                "attention_options": dict(self.attention_options),
                "rope_max_wavelength": self.rope_max_wavelength,
                "relative_num_buckets": self.relative_num_buckets,
                "relative_max_distance": self.relative_max_distance,
                "attention_scale": self.attention_scale,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
