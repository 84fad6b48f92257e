"""Shared machinery of the multi-head attention layers.

    head_h = Attention(X_q W_h^Q, X_kv W_h^K, X_kv W_h^V)
    MultiHead(X_q, X_kv) = Concat(head_1, …, head_H) W^O

`MultiHeadAttentionBase` owns the four projections (laid out as in
`keras.layers.MultiHeadAttention`, so weights transfer one to one), the
position schemes that act inside attention (RoPE on q/k, ALiBi or T5 relative
bias on the scores) and the call into the single attention core,
`keras_tfm.layers.attention.core.dot_product_attention`.
"""

import math

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_choice, check_known_keys, check_positive_int, check_rate
from keras_tfm.layers.attention import core as attention_core
from keras_tfm.layers.attention.alibi import AlibiBias
from keras_tfm.layers.attention.relative_position_bias import RelativePositionBias
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.quantization import QuantizeSublayersMixin
from keras_tfm.layers.rotary_embedding import RotaryEmbedding

# Position schemes that act inside attention (absolute ones act on embeddings).
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
        position: None, "rope", "alibi" or "relative".
        attention_impl: name of the attention-core implementation: "auto"
            (default: exact chunked attention for long keys when no weights are
            requested, else "standard"), "standard", or a registered variant.
        attention_options: dict of options for that implementation.
        rope_max_wavelength: base of the RoPE frequencies.
        relative_num_buckets, relative_max_distance: T5 relative bias options.
        kernel_initializer, bias_initializer: projection initializers.
        **kwargs: standard `keras.layers.Layer` arguments.
    """

    _bidirectional_positions = True

    def __init__(
        self,
        num_heads,
        key_dim=None,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        position=None,
        attention_impl="auto",
        num_key_value_heads=None,
        attention_options=None,
        rope_max_wavelength=10000.0,
        relative_num_buckets=32,
        relative_max_distance=128,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
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
        if position == "none":
            position = None
        self.position = check_choice("position", position, ATTENTION_POSITIONS)
        if attention_impl not in attention_core.ATTENTION_IMPLS:
            raise ValueError(
                f"Unknown `attention_impl` {attention_impl!r}; expected one of "
                f"{sorted(attention_core.ATTENTION_IMPLS)}."
            )
        self.attention_impl = attention_impl
        if attention_options is not None and not isinstance(attention_options, dict):
            raise TypeError(f"`attention_options` must be a dict or None; received {attention_options!r}.")
        self.attention_options = dict(attention_options or {})
        valid = attention_core.implementation_options(attention_impl)
        if valid is not None:  # unknown keys would fail deep inside the core, or be ignored
            check_known_keys("attention_options", attention_options, valid)
        self.rope_max_wavelength = float(rope_max_wavelength)
        self.relative_num_buckets = check_positive_int("relative_num_buckets", relative_num_buckets)
        self.relative_max_distance = check_positive_int("relative_max_distance", relative_max_distance)
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

    def _projection(self, name, output_shape, equation, bias_axes):
        layer = keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
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
        self.output_dense = self._projection("attention_output", (None, output_dim), "bthk,hkd->btd", "d")
        self.output_dense.build((query_shape[0], query_shape[1], h, value_dim))
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.rotary = self.alibi = self.relative_bias = None
        if self.position == "rope":
            self.rotary = RotaryEmbedding(self.rope_max_wavelength, dtype=self.dtype_policy, name="rotary")
        elif self.position == "alibi":
            self.alibi = AlibiBias(self.num_heads, dtype=self.dtype_policy, name="alibi")
        elif self.position == "relative":
            self.relative_bias = RelativePositionBias(
                self.num_heads,
                num_buckets=self.relative_num_buckets,
                max_distance=self.relative_max_distance,
                bidirectional=self._bidirectional_positions,
                dtype=self.dtype_policy,
                name="relative_position_bias",
            )
            self.relative_bias.build()

    # ------------------------------------------------------------------- call
    @staticmethod
    def _plain_float(layer):
        """Whether `layer` is a plain float `EinsumDense` whose call is exactly
        `x · kernel + bias`: no quantization, no LoRA, no quantized dtype
        policy, no subclass. Only then may its kernel be read and fused."""
        return (
            type(layer) is keras.layers.EinsumDense
            and layer.quantization_mode is None
            and not layer.lora_enabled
            and type(layer.dtype_policy) is keras.dtype_policies.DTypePolicy
        )

    def _project_heads(self, x, layers):
        """Projects `x` `(batch, length, d)` to heads with one or more of the
        query/key/value layers.

        Fast path, taken when every layer is a plain float `EinsumDense`
        (`_plain_float`): the kernels `(d, heads, dim)` are concatenated along
        their output axis, so self-attention computes Q, K and V with a single
        `(batch·length, d) × (d, 3·heads·dim)` product (and its gradient with
        two more), instead of three einsums whose kernel gradients TensorFlow
        computes per batch element and then sums. This is exactly what the
        layers compute. Otherwise (after `quantize`, `enable_lora`, or with a
        quantized dtype policy) each layer is CALLED, so whatever Keras puts
        in its call path (int8/float8 kernels and their scales, LoRA) applies.
        The variables, their shapes and names are those of
        `keras.layers.MultiHeadAttention`.

        Returns:
            list of `(batch, length, heads, dim)` tensors, one per layer.
        """
        if not all(self._plain_float(layer) for layer in layers):
            return [layer(x) for layer in layers]
        d = x.shape[-1]
        kernel = ops.concatenate(
            [ops.reshape(ops.cast(layer.kernel, x.dtype), (d, -1)) for layer in layers], axis=1
        )
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        y = ops.matmul(ops.reshape(x, (-1, d)), kernel)
        if self.use_bias:
            y = y + ops.concatenate(
                [ops.reshape(ops.cast(layer.bias, y.dtype), (-1,)) for layer in layers], axis=0
            )
        outputs, start = [], 0
        for layer in layers:
            _, heads, dim = layer.kernel.shape
            outputs.append(ops.reshape(y[:, start : start + heads * dim], (batch, length, heads, dim)))
            start += heads * dim
        return outputs

    def _project_output(self, heads):
        """`(batch, length, heads, dim)` → `(batch, length, output_dim)`: one
        2-D matmul for a plain float output layer, else the layer's own call."""
        layer = self.output_dense
        if not self._plain_float(layer):
            return layer(heads)
        h, k, d = layer.kernel.shape
        batch, length = ops.shape(heads)[0], ops.shape(heads)[1]
        y = ops.matmul(
            ops.reshape(heads, (-1, h * k)), ops.reshape(ops.cast(layer.kernel, heads.dtype), (h * k, d))
        )
        if self.use_bias:
            y = y + ops.cast(layer.bias, y.dtype)
        return ops.reshape(y, (batch, length, d))

    def _quantizable_sublayers(self):
        return [self.query_dense, self.key_dense, self.value_dense, self.output_dense]

    def _position_bias(self, query_length, key_length, query_offset):
        """The ALiBi / relative score bias. Without a cache (offset 0) it is an
        O(T) `ToeplitzBias` (the chunked core builds it per block); with a
        cache, the dense `(H, Tq, Tk)` tensor (Tq is small there)."""
        layer = self.alibi if self.alibi is not None else self.relative_bias
        if layer is None:
            return None
        if isinstance(query_offset, int) and query_offset == 0:
            return attention_core.ToeplitzBias.from_bias_fn(
                layer.compute_bias, query_length, key_length, trainable=layer is self.relative_bias
            )
        return layer.compute_bias(query_length, key_length, query_offset)

    def _attend(self, query, key, value, mask, bias, return_attention_scores, training, causal=False):
        """Runs the attention core on projected heads and the output projection.

        `causal` (equal-length self-attention) is applied by the attention
        core itself, so no T × T causal mask is built here: the chunked core
        skips the blocks above the diagonal, linear uses prefix sums.
        """
        groups = self.num_heads // (self.num_key_value_heads or self.num_heads)
        if groups > 1 and query.shape[1] == 1 and not causal and bias is None and not return_attention_scores:
            if self.attention_impl in ("auto", "standard") and (mask is None or len(mask.shape) < 4):
                return self._attend_one_query_grouped(query, key, value, mask, None, training), None
        if groups > 1:  # grouped-query attention: each key/value head serves `groups` query heads
            key, value = ops.repeat(key, groups, axis=2), ops.repeat(value, groups, axis=2)
        options = dict(self.attention_options)
        if options.pop("causal", causal) != causal:
            raise ValueError(
                f"`attention_options['causal']`={self.attention_options['causal']} contradicts the layer "
                f"(causal={causal}); leave it out, the layer sets it."
            )
        output, weights = attention_core.dot_product_attention(
            query,
            key,
            value,
            mask=mask,
            bias=bias,
            dropout=self.dropout_layer if self.dropout > 0 else None,
            training=training,
            return_weights=return_attention_scores,
            causal=causal,
            impl=self.attention_impl,
            **options,
        )
        return self._project_output(output), weights

    def _attend_one_query_grouped(self, query, key, value, mask, bias, training, cache_layout=False):
        """Attention of ONE query position (a cached decoding step) over keys and
        values with `G` heads, each read once.

        The `H = G·g` query heads are grouped by the key/value head they share
        (head `i·g + j` uses key/value head `i`): `(B, 1, H, d)` → `(B, G, g, d)`,
        and the step is two batched matmuls with batch `(B, G)` and the `g`
        query heads of a group as rows:

            scores = q K / √d + bias + M     (B, G, g, d) × (B, G, d, L) → (B, G, g, L)
            output = softmax(scores) V       (B, G, g, L) × (B, G, L, dv) → (B, G, g, dv)

        With the self-attention cache (`cache_layout=True`: keys `(B, G, d, L)`,
        values `(B, G, L, dv)`, `MultiHeadSelfAttention.init_cache`) both are
        plain row-by-column products that read the cache where it lies;
        otherwise keys and values are `(B, L, G, d)` (cross-attention). Softmax
        in float32; `mask` (True = may attend) covers the key axis (rank 2, 3,
        or 4 with one head), `bias` is `(H, 1, L)`; a query that sees no key
        gets zeros.

        Returns:
            `(B, 1, output_dim)` after the output projection.
        """
        batch, dim = ops.shape(query)[0], query.shape[-1]
        kv_heads = key.shape[1 if cache_layout else 2]
        groups = self.num_heads // kv_heads
        keys_eq, values_eq = ("bgdl", "bgld") if cache_layout else ("blgd", "blgd")
        scale = ops.cast(1.0 / math.sqrt(float(dim)), query.dtype)
        rows = ops.reshape(query * scale, (batch, kv_heads, groups, dim))
        scores = ops.cast(ops.einsum(f"bgjd,{keys_eq}->bgjl", rows, key), "float32")
        if bias is not None:
            scores = scores + ops.reshape(ops.cast(bias, "float32"), (1, kv_heads, groups, -1))
        visible = None
        if mask is not None:
            mask = ops.cast(mask, "bool")
            mask = {2: lambda m: m[None, None], 3: lambda m: m[:, None], 4: lambda m: m}[len(mask.shape)](
                mask
            )
            scores = ops.where(mask, scores, attention_core.MASK_FILL_VALUE)
            visible = ops.cast(ops.any(mask, axis=-1, keepdims=True), "float32")
        # softmax(s) V = (exp(s - max s) V) / Σ exp(s - max s): the division acts on the
        # (B, G, g, dv) output instead of the (B, G, g, L) weights, one pass fewer over L.
        weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
        norm = 1.0 / ops.sum(weights, axis=-1, keepdims=True)
        if visible is not None:
            norm = norm * visible
        if self.dropout > 0 and training:  # weight dropout needs the normalised weights
            weights, norm = self.dropout_layer(weights * norm, training=training), None
        output = ops.einsum(f"bgjl,{values_eq}->bgjd", ops.cast(weights, value.dtype), value)
        if norm is not None:
            output = ops.cast(ops.cast(output, "float32") * norm, value.dtype)
        return self._project_output(ops.reshape(output, (batch, 1, self.num_heads, output.shape[-1])))

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
                "position": self.position,
                "attention_impl": self.attention_impl,
                "attention_options": dict(self.attention_options),
                "rope_max_wavelength": self.rope_max_wavelength,
                "relative_num_buckets": self.relative_num_buckets,
                "relative_max_distance": self.relative_max_distance,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
