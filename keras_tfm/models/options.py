"""A model's constructor arguments, checked once, and the parts every model builds from them.

    options = ModelOptions("gpt", arguments(locals()), required=("vocabulary_size", ...))
    blocks = options.blocks("decoder_block", options.num_layers, causal=True)

`ModelOptions` checks each argument by its one rule (`RULES`: the argument's name →
its check, the same for `GPT`, `BertEncoder` and `Seq2Seq`), fills the defaults that
depend on other arguments (`d_ff` = 4·d_model, `dropout` 0), splits `position` into
its embedding and attention sides, and makes the parts the constructors share
(`blocks`, `make_norm`, `embedding`), so a constructor reads as a list of parts. Its
`config` is the checked arguments, which `get_config` returns.
"""

import keras

from keras_tfm.checks import (
    check_bool,
    check_choice,
    check_int,
    check_positive_float,
    check_positive_int,
    check_rate,
)
from keras_tfm.layers import ATTENTION_IMPLS
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.feed_forward import ACTIVATIONS
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.transformer_block import NORMS, TransformerBlock, check_attention_bias
from keras_tfm.models.layout import bind_sizes, model_sizes
from keras_tfm.models.parts import make_norm
from keras_tfm.models.presets import PRESETS

#: Every position scheme a text model accepts. Absolute ones act on the
#: embedding; the others act inside self-attention (in every block).
POSITIONS = ("learned", "sinusoidal", "sinusoidal_halves", "rope", "alibi", "relative", None)
EMBEDDING_POSITIONS = ("learned", "sinusoidal", "sinusoidal_halves")


def check_size(name: str, value: object) -> int | None:
    """A positive int size, or None (a required size is checked by `check_required` first);
    a ValueError naming it otherwise."""
    try:
        return check_positive_int(name, value, allow_none=True)
    except TypeError as error:
        raise ValueError(str(error)) from None


def check_epsilon(name: str, value: object) -> float:
    """A finite positive ε (a ValueError naming it otherwise: NaN would make every output NaN,
    inf every normalised vector the norm's β)."""
    try:
        return check_positive_float(name, value)
    except TypeError as error:
        raise ValueError(str(error)) from None


def _choice(choices):
    return lambda name, value: check_choice(name, value, choices)


def _optional(check):
    return lambda name, value: None if value is None else check(name, value)


#: The rule of each constructor argument the model classes share (others pass unchecked).
RULES = {
    **dict.fromkeys(
        (
            "vocabulary_size",
            "source_vocabulary_size",
            "target_vocabulary_size",
            "max_length",
            "num_layers",
            "num_encoder_layers",
            "num_decoder_layers",
            "num_heads",
            "d_model",
            "d_ff",
            "sliding_window",
            "relative_num_buckets",
            "relative_max_distance",
        ),
        check_size,
    ),
    "pad_id": _optional(lambda name, value: check_int(name, value, minimum=0)),
    "attention_scale": _optional(check_epsilon),
    "logits_scale": check_epsilon,
    "num_segments": lambda name, value: check_size(name, 2 if value is None else value),
    "dropout": lambda name, value: check_rate(name, 0.0 if value is None else value),
    "attention_dropout": _optional(check_rate),
    "position": _choice(POSITIONS),
    "activation": _choice(ACTIVATIONS),
    "norm": _choice(NORMS),
    "attention_impl": lambda name, value: check_choice(name, value, sorted(ATTENTION_IMPLS)),
    "layer_norm_epsilon": check_epsilon,
    "attention_bias": check_attention_bias,
    **dict.fromkeys(
        (
            "norm_first",
            "use_bias",
            "tie_embeddings",
            "lm_head_use_bias",
            "with_padding_mask",
            "scale_embeddings",
            "share_position_bias",
            "separate_positions",
            "logits_bias",
            "embedding_norm",
        ),
        check_bool,
    ),
}


def arguments(local_variables: dict) -> dict:
    """A constructor's arguments from its `locals()` at its first line (without `self`,
    `name` and `**kwargs`)."""
    return {k: v for k, v in local_variables.items() if k not in ("self", "__class__", "name", "kwargs")}


def check_required(family: str, **sizes: object) -> None:
    """Raises a ValueError listing the `sizes` that are None (not given)."""
    missing = [name for name, value in sizes.items() if value is None]
    if missing:
        raise ValueError(
            f"Missing {missing}: give them explicitly or pass a `preset` (one of {sorted(PRESETS[family])})."
        )


def check_head_sizes(
    d_model: int, num_heads: int, key_dim: int | None, attention_position: str | None
) -> None:
    """Raises a ValueError when the attention sizes are inconsistent: `d_model` not divisible by
    `num_heads` (without `key_dim`), or an odd head size with RoPE (which rotates pairs)."""
    if key_dim is None and d_model % num_heads:
        raise ValueError(f"`d_model`={d_model} must be divisible by `num_heads`={num_heads}.")
    key_dim = key_dim or d_model // num_heads
    if attention_position == "rope" and key_dim % 2:
        raise ValueError(f"position='rope' needs an even head size; d_model / num_heads = {key_dim}.")


class ModelOptions:
    """The checked constructor arguments of a text model (attributes by name) and its parts.

    Args:
        family: the preset family ("gpt", "bert", "seq2seq"), named when a size is missing.
        arguments: the constructor's arguments (`arguments(locals())`).
        required: the sizes that must be given.

    Attributes:
        config: the checked arguments (`d_ff` and `dropout` resolved), for `get_config`.
        embedding_position, attention_position: the sides of `position` ("learned" /
            "sinusoidal" act on the embedding; "rope", "alibi", "relative" in attention).
        key_dim: `key_dim` or `d_model / num_heads`.
    """

    def __init__(self, family: str, arguments: dict, required: tuple = ()):
        check_required(family, **{name: arguments.get(name) for name in required})
        config = {name: RULES.get(name, lambda _, v: v)(name, value) for name, value in arguments.items()}
        if "d_ff" in config and config["d_ff"] is None:
            config["d_ff"] = 4 * config["d_model"]
        self.config = config
        self.__dict__.update(config)
        position = config.get("position")
        embedding_side = position in EMBEDDING_POSITIONS
        self.embedding_position = position if embedding_side else None
        self.attention_position = None if embedding_side else position
        check_head_sizes(self.d_model, self.num_heads, config.get("key_dim"), self.attention_position)
        self.key_dim = config.get("key_dim") or self.d_model // self.num_heads

    def layout_sizes(self, vocabulary: int | None, **vocabularies: int) -> dict:
        """The sizes `get_layout_map` checks, bound to the current distribution's map (called
        before any variable exists, `layout.bind_sizes`)."""
        num_key_value_heads = self.config.get("num_key_value_heads")
        return bind_sizes(
            model_sizes(
                self.d_model, self.num_heads, self.d_ff, num_key_value_heads, vocabulary, **vocabularies
            )
        )

    def blocks(
        self,
        name: str,
        count: int,
        *,
        causal: bool,
        kernel_initializer: object,
        cross_attention: bool = False,
        salt_prefix: str = "",
        position_bias: keras.layers.Layer | None = None,
    ) -> list:
        """`count` `TransformerBlock`s named `{name}_{i}`, with these options; each gets its own
        clone of `kernel_initializer` (salt `{salt_prefix}{i}`), so no two blocks start equal.
        `position_bias`: one `RelativePositionBias` every block's self-attention uses (T5)."""
        c = self.config
        shared = dict(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=c.get("attention_dropout"),
            norm_first=self.norm_first,
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            norm=self.norm,
            use_bias=self.use_bias,
            key_dim=c.get("key_dim"),
            num_key_value_heads=c.get("num_key_value_heads"),
            position=self.attention_position,
            rope_max_wavelength=c.get("rope_max_wavelength", 10000.0),
            attention_bias=c.get("attention_bias"),
            sliding_window=c.get("sliding_window"),
            attention_scale=c.get("attention_scale"),
            relative_num_buckets=c.get("relative_num_buckets", 32),
            relative_max_distance=c.get("relative_max_distance", 128),
            position_bias=position_bias,
            attention_impl=self.attention_impl,
            attention_options=c.get("attention_options"),
            causal=causal,
            cross_attention=cross_attention,
            dtype=c.get("dtype"),
        )
        return [
            TransformerBlock(
                **shared,
                kernel_initializer=clone_initializer(kernel_initializer, f"{salt_prefix}{i}"),
                name=f"{name}_{i}",
            )
            for i in range(count)
        ]

    def make_norm(self, name: str) -> keras.layers.Layer:
        """A `LayerNormalization` (`norm="layer"`) or an `RMSNorm` (`"rms"`, float32 statistics)."""
        return make_norm(self.norm, self.layer_norm_epsilon, self.config.get("dtype"), name)

    def embedding(
        self,
        vocabulary_size: int,
        embeddings_initializer: object,
        name: str,
        scale=False,
        mask_zero=False,
        token_embedding=None,
    ) -> TokenAndPositionEmbedding:
        """The `TokenAndPositionEmbedding`: E[token] (· √d_model with `scale`) + P[position] for
        an embedding-side `position` (none for the others); `token_embedding`: a built
        `TokenEmbedding` whose table it shares."""
        return TokenAndPositionEmbedding(
            vocabulary_size,
            self.d_model,
            max_length=self.max_length,
            position=self.embedding_position,
            scale=scale,
            mask_zero=mask_zero,
            embeddings_initializer=embeddings_initializer,
            token_embedding=token_embedding,
            dtype=self.config.get("dtype"),
            name=name,
        )

    def sizes(self, *names: str) -> dict:
        """The size attributes every text model has: `max_length`, `num_heads`,
        `num_key_value_heads`, `d_model`, `key_dim`, `position` (and `vocabulary_size`,
        `num_layers` where given), and the checked arguments `names`."""
        sizes = dict(
            max_length=self.max_length,
            num_heads=self.num_heads,
            num_key_value_heads=self.config.get("num_key_value_heads") or self.num_heads,
            d_model=self.d_model,
            key_dim=self.key_dim,
            position=self.config.get("position"),
        )
        for name in ("vocabulary_size", "num_layers"):
            if self.config.get(name) is not None:
                sizes[name] = self.config[name]
        return dict(sizes, **{name: self.config[name] for name in names})


__all__ = [
    "POSITIONS",
    "RULES",
    "ModelOptions",
    "arguments",
    "check_head_sizes",
    "check_required",
    "check_size",
]
