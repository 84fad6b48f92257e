"""The Transformer block used by every builder (encoder, decoder, seq2seq)."""

from typing import Any

import keras

from keras_tfm.checks import check_bool, check_choice, check_positive_float, check_positive_int, check_rate
from keras_tfm.layers.attention.core import check_attention_impl
from keras_tfm.layers.attention.cross_attention import CrossAttention
from keras_tfm.layers.attention.masks import merge_masks
from keras_tfm.layers.attention.multi_head import ATTENTION_POSITIONS
from keras_tfm.layers.attention.self_attention import MultiHeadSelfAttention
from keras_tfm.layers.feed_forward import ACTIVATIONS, FeedForward
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.quantization import QuantizeSublayersMixin
from keras_tfm.layers.rms_norm import RMSNorm
from keras_tfm.tensor_checks import check_rank

NORMS = ("layer", "rms")
#: `attention_bias` values: None (= `use_bias`), all four projections or none, Q/K/V only.
ATTENTION_BIASES = (None, True, False, "qkv")


def check_attention_bias(name: str, value: object) -> bool | str | None:
    """One of `ATTENTION_BIASES` (True / False as bools, not 1 / 0); a ValueError naming `name`."""
    if value is None or isinstance(value, bool) or (isinstance(value, str) and value == "qkv"):
        return value
    raise ValueError(f"Unknown `{name}` {value!r}; expected one of {list(ATTENTION_BIASES)}.")


@keras.saving.register_keras_serializable(package="keras_tfm")
class TransformerBlock(QuantizeSublayersMixin, keras.layers.Layer):
    """One Transformer layer: (masked) self-attention, optional cross-attention,
    and a position-wise feed-forward network, each wrapped in add & norm.

        post-norm (Vaswani, BERT):   x ← LN(x + Dropout(F(x)))
        pre-norm  (GPT-2):           x ← x + Dropout(F(LN(x)))

    with F = self-attention, then (if `cross_attention`) attention over the
    encoder output, then the FFN. With `causal=True, cross_attention=True` it is
    the decoder block of "Attention Is All You Need"; with `causal=True` alone a
    GPT block; with neither a BERT/encoder block.

    Args:
        d_model: model width (the input's last dimension).
        num_heads: attention heads.
        d_ff: feed-forward inner width.
        dropout: residual dropout rate (on each sublayer output) and FFN dropout.
        attention_dropout: dropout on attention weights; defaults to `dropout`.
        norm_first: pre-norm if True, post-norm if False.
        causal: causal mask in self-attention.
        cross_attention: add the cross-attention sublayer (decoder block).
        activation: FFN activation, "relu" | "gelu" | "gelu_tanh" | "silu", or
            the gated "swiglu" | "geglu" | "geglu_tanh" (three FFN matrices).
        layer_norm_epsilon: ε of the norms.
        position: position scheme inside self-attention: None, "rope",
            "alibi" or "relative".
        use_bias: biases in all projections (attention and FFN). LayerNorm
            keeps its β; `norm="rms"` has none, so `use_bias=False,
            norm="rms"` gives a block without any bias (LLaMA).
        norm: "layer" (LayerNorm, default) or "rms" (`RMSNorm`, computed in
            float32 under any dtype policy).
        num_key_value_heads: key/value heads of the attention sublayers
            (grouped-query attention; 1 = multi-query); None = `num_heads`.
        rope_max_wavelength: RoPE base θ (10000 in RoFormer/LLaMA 2,
            500000 in LLaMA 3) with `position="rope"`.
        attention_bias: biases of the attention projections: None (default)
            = `use_bias`, True / False (all four), or "qkv" (Q, K and V only,
            Qwen2).
        sliding_window: None, or W: self-attention sees only the last W
            positions, itself included (Mistral; `MultiHeadSelfAttention`).
        key_dim: per-head size; defaults to `d_model // num_heads`.
        attention_scale: score scale of both attention sublayers; None (default)
            1/√key_dim (T5: 1).
        relative_num_buckets, relative_max_distance: buckets of
            `position="relative"` (T5: 32 and 128).
        position_bias: with `position="relative"`, a `RelativePositionBias`
            shared with the other blocks of a stack instead of a table of this
            block's own (T5); passed again by the model that rebuilds the block.
        attention_impl, attention_options: attention-core implementation.
        kernel_initializer, bias_initializer: initializers of all projections.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, length, d_model)`.
        context: encoder output `(batch, source_length, d_model)`, required
            when `cross_attention=True` (unless `cross_cache` is given).
        padding_mask: optional bool `(batch, length)` (with `cache`: over the
            cache positions). The Keras implicit mask of `inputs` is used too.
        attention_mask: optional bool self-attention mask.
        context_mask: optional bool `(batch, source_length)`.
        training: Python bool.
        cache, cache_index: self-attention key/value cache (see
            `MultiHeadSelfAttention`).
        cross_cache: precomputed cross-attention keys/values
            (`block.cross_attention_layer.compute_cache(context)`).
        return_attention_scores: also return a dict with the float32 weights
            of "self_attention" (and "cross_attention").
        score_bias: the self-attention's precomputed B of a cached call
            (`MultiHeadSelfAttention`), or None.

    Returns:
        `(batch, length, d_model)`; followed by the weights dict if requested,
        and by the updated cache if `cache` was given.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        attention_dropout: float | None = None,
        norm_first: bool = False,
        causal: bool = False,
        cross_attention: bool = False,
        activation: str = "relu",
        layer_norm_epsilon: float = 1e-5,
        position: str | None = None,
        use_bias: bool = True,
        key_dim: int | None = None,
        attention_impl: str = "auto",
        attention_options: dict | None = None,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        norm: str = "layer",
        num_key_value_heads: int | None = None,
        rope_max_wavelength: float = 10000.0,
        attention_bias: bool | str | None = None,
        sliding_window: int | None = None,
        attention_scale: float | None = None,
        relative_num_buckets: int = 32,
        relative_max_distance: int = 128,
        position_bias: keras.layers.Layer | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.d_ff = check_positive_int("d_ff", d_ff)
        if key_dim is None and d_model % num_heads:
            raise ValueError(f"`d_model`={d_model} must be divisible by `num_heads`={num_heads}.")
        self.key_dim = check_positive_int("key_dim", key_dim, allow_none=True)
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout = (
            self.dropout if attention_dropout is None else check_rate("attention_dropout", attention_dropout)
        )
        self.norm_first = check_bool("norm_first", norm_first)
        self.causal = check_bool("causal", causal)
        self.cross_attention = check_bool("cross_attention", cross_attention)
        if activation not in ACTIVATIONS:
            raise ValueError(f"Unknown `activation` {activation!r}; expected one of {list(ACTIVATIONS)}.")
        self.activation = activation
        self.layer_norm_epsilon = check_positive_float("layer_norm_epsilon", layer_norm_epsilon)
        if position not in ATTENTION_POSITIONS:
            raise ValueError(f"Unknown `position` {position!r}; expected one of {list(ATTENTION_POSITIONS)}.")
        self.position = position
        self.use_bias = check_bool("use_bias", use_bias)
        self.attention_impl = check_attention_impl(attention_impl)
        self.attention_options = dict(attention_options or {})
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.norm = check_choice("norm", norm, NORMS)
        self.num_key_value_heads = check_positive_int(
            "num_key_value_heads", num_key_value_heads, allow_none=True
        )
        if self.num_key_value_heads is not None and self.num_heads % self.num_key_value_heads:
            raise ValueError(
                f"`num_key_value_heads`={num_key_value_heads} must divide `num_heads`={num_heads}."
            )
        self.rope_max_wavelength = check_positive_float("rope_max_wavelength", rope_max_wavelength)
        self.attention_bias = check_attention_bias("attention_bias", attention_bias)
        self.sliding_window = check_positive_int("sliding_window", sliding_window, allow_none=True)
        self.attention_scale = check_positive_float("attention_scale", attention_scale, allow_none=True)
        self.relative_num_buckets = check_positive_int("relative_num_buckets", relative_num_buckets)
        self.relative_max_distance = check_positive_int("relative_max_distance", relative_max_distance)
        # Not tracked here: the self-attention layer holds it (the blocks of a stack share one).
        object.__setattr__(self, "position_bias", position_bias)
        self.supports_masking = True

    def _norm(self, name):
        if self.norm == "rms":
            return RMSNorm(epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name)
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def build(self, inputs_shape, context_shape=None):
        input_shape = inputs_shape
        if len(input_shape) != 3 or input_shape[-1] != self.d_model:
            raise ValueError(
                f"`inputs` must have shape (batch, length, d_model={self.d_model}); received {tuple(input_shape)}."
            )
        attention_bias = self.use_bias if self.attention_bias is None else self.attention_bias
        common = dict(
            key_dim=self.key_dim,
            use_bias=bool(attention_bias),
            output_bias=attention_bias is True,
            attention_impl=self.attention_impl,
            attention_options=self.attention_options,
            num_key_value_heads=self.num_key_value_heads,
            attention_scale=self.attention_scale,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
        )
        self.self_attention_layer = MultiHeadSelfAttention(
            self.num_heads,
            dropout=self.attention_dropout,
            causal=self.causal,
            position=self.position,
            rope_max_wavelength=self.rope_max_wavelength,
            sliding_window=self.sliding_window,
            relative_num_buckets=self.relative_num_buckets,
            relative_max_distance=self.relative_max_distance,
            position_bias=self.position_bias,
            name="self_attention",
            **clone_initializers(common, "self_attention"),
        )
        self.self_attention_layer.build(input_shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(input_shape)
        self.cross_attention_layer = None
        if self.cross_attention:
            if context_shape is None:
                context_shape = input_shape
            self.cross_attention_layer = CrossAttention(
                self.num_heads,
                dropout=self.attention_dropout,
                name="cross_attention",
                **clone_initializers(common, "cross_attention"),
            )
            self.cross_attention_layer.build(input_shape, context_shape)
            self.cross_attention_norm = self._norm("cross_attention_norm")
            self.cross_attention_norm.build(input_shape)
        self.feed_forward = FeedForward(
            self.d_ff,
            activation=self.activation,
            dropout=self.dropout,
            use_bias=self.use_bias,
            dtype=self.dtype_policy,
            name="feed_forward",
            **clone_initializers(
                dict(kernel_initializer=self.kernel_initializer, bias_initializer=self.bias_initializer),
                "feed_forward",
            ),
        )
        self.feed_forward.build(input_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.feed_forward_norm.build(input_shape)
        self.residual_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="residual_dropout"
        )

    def compute_output_spec(self, inputs, *args, **kwargs):
        """A plain call (no cache, no attention scores) returns a tensor shaped like
        `inputs`: functional models are then built without tracing the block's graph
        (most of a model's construction time, e.g. `from_pretrained`). Other calls,
        and calls whose arguments `call` would refuse, are traced."""
        plain = (
            not args
            and kwargs.get("cache") is None
            and kwargs.get("cross_cache") is None
            and not kwargs.get("return_attention_scores")
            and (kwargs.get("context") is not None) == self.cross_attention
            and len(inputs.shape) == 3
        )
        if plain:
            return keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        return super().compute_output_spec(inputs, *args, **kwargs)

    def _residual(self, x, norm, sublayer, training):
        """Add & norm around `sublayer` (post-norm or pre-norm).

        `sublayer` may return extra outputs after its main one (attention
        weights, an updated cache); they are returned as a list.
        """
        h = sublayer(norm(x) if self.norm_first else x)
        h, *extras = h if isinstance(h, tuple) else (h,)
        if self.dropout > 0:
            h = self.residual_dropout(h, training=training)
        x = x + h
        if not self.norm_first:
            x = norm(x)
        return x, extras

    def call(
        self,
        inputs: Any,
        context: Any = None,
        padding_mask: Any = None,
        attention_mask: Any = None,
        context_mask: Any = None,
        training: bool | None = None,
        cache: tuple[Any, Any] | None = None,
        cache_index: Any = None,
        cross_cache: Any = None,
        return_attention_scores: bool = False,
        mask: Any = None,
        inputs_mask: Any = None,
        score_bias: Any = None,
    ):
        check_rank("inputs", inputs, 3)
        if self.cross_attention and context is None and cross_cache is None:
            raise ValueError("`context` (the encoder output) is required when `cross_attention=True`.")
        if not self.cross_attention and (context is not None or cross_cache is not None):
            raise ValueError("`context` was given but the block was built with `cross_attention=False`.")
        scores = {}
        x, extras = self._residual(
            inputs,
            self.self_attention_norm,
            lambda h: self.self_attention_layer(
                h,
                padding_mask=padding_mask,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                cache=cache,
                cache_index=cache_index,
                inputs_mask=merge_masks(mask, inputs_mask),
                score_bias=score_bias,
            ),
            training,
        )
        if return_attention_scores:
            scores["self_attention"] = extras.pop(0)
        new_cache = extras.pop(0) if cache is not None else None

        if self.cross_attention:
            x, extras = self._residual(
                x,
                self.cross_attention_norm,
                lambda h: self.cross_attention_layer(
                    h,
                    context,
                    context_mask=context_mask,
                    return_attention_scores=return_attention_scores,
                    training=training,
                    cache=cross_cache,
                ),
                training,
            )
            if return_attention_scores:
                scores["cross_attention"] = extras[0]

        x, _ = self._residual(
            x, self.feed_forward_norm, lambda h: self.feed_forward(h, training=training), training
        )
        outputs = (x,)
        if return_attention_scores:
            outputs += (scores,)
        if cache is not None:
            outputs += (new_cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _quantizable_sublayers(self):
        return [self.self_attention_layer, self.cross_attention_layer, self.feed_forward]

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "norm_first": self.norm_first,
                "causal": self.causal,
                "cross_attention": self.cross_attention,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "position": self.position,
                "use_bias": self.use_bias,
                "key_dim": self.key_dim,
                "attention_impl": self.attention_impl,
                "attention_options": dict(self.attention_options),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "norm": self.norm,
                "num_key_value_heads": self.num_key_value_heads,
                "rope_max_wavelength": self.rope_max_wavelength,
                "attention_bias": self.attention_bias,
                "sliding_window": self.sliding_window,
                "attention_scale": self.attention_scale,
                "relative_num_buckets": self.relative_num_buckets,
                "relative_max_distance": self.relative_max_distance,
            }
        )
        return config
