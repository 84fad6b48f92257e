"""Helpers shared by the builders."""

from keras_tfm.layers.attention_core import ATTENTION_IMPLS
from keras_tfm.layers.feed_forward import ACTIVATIONS
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.models.presets import check_sizes, resolve_options

#: Every position scheme a builder accepts. Absolute ones act on the
#: embedding; the others act inside self-attention (in every block).
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "relative", None)
EMBEDDING_POSITIONS = ("learned", "sinusoidal")

SIZE_KEYS = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model", "d_ff", "dropout")


def split_position(position):
    """`position` → (embedding position, attention position)."""
    if position == "none":
        position = None
    if position not in POSITIONS:
        raise ValueError(f"Unknown `position` {position!r}; expected one of {list(POSITIONS)}.")
    if position in EMBEDDING_POSITIONS:
        return position, None
    return None, position


def check_options(activation, attention_impl, layer_norm_epsilon, dropout, attention_dropout):
    if activation not in ACTIVATIONS:
        raise ValueError(f"Unknown `activation` {activation!r}; expected one of {list(ACTIVATIONS)}.")
    if attention_impl not in ATTENTION_IMPLS:
        raise ValueError(
            f"Unknown `attention_impl` {attention_impl!r}; expected one of {sorted(ATTENTION_IMPLS)}."
        )
    if (
        isinstance(layer_norm_epsilon, bool)
        or not isinstance(layer_norm_epsilon, (int, float))
        or layer_norm_epsilon <= 0
    ):
        raise ValueError(f"`layer_norm_epsilon` must be a positive float; received {layer_norm_epsilon!r}.")
    for name, rate in (("dropout", dropout), ("attention_dropout", attention_dropout)):
        if rate is None:
            continue
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"`{name}` must be a float in [0, 1); received {rate!r}.")


def resolve_sizes(family, preset, sizes, required):
    """Preset sizes overridden by explicit (non-None) ones; fills d_ff = 4·d_model
    and dropout = 0 when neither gives them, and checks consistency."""
    defaults = {k: None for k in sizes}
    options = resolve_options(family, preset, defaults, sizes, required=())
    if options.get("d_ff") is None and options.get("d_model") is not None:
        options["d_ff"] = 4 * options["d_model"]
    if "dropout" in options and options["dropout"] is None:
        options["dropout"] = 0.0
    missing = [k for k in required if options.get(k) is None]
    if missing:
        from keras_tfm.models.presets import PRESETS

        raise ValueError(
            f"Missing {missing}: give them explicitly or pass a `preset` (one of {sorted(PRESETS[family])})."
        )
    for key in (
        "vocabulary_size",
        "max_length",
        "num_layers",
        "num_heads",
        "d_model",
        "d_ff",
        "num_segments",
        "source_vocabulary_size",
        "target_vocabulary_size",
        "num_encoder_layers",
        "num_decoder_layers",
    ):
        value = options.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"`{key}` must be a positive int; received {value!r}.")
    return options


def block_kwargs(o, position, dtype):
    """TransformerBlock keyword arguments from resolved options."""
    check_sizes(o["d_model"], o["num_heads"], o.get("key_dim"), position)
    return dict(
        d_model=o["d_model"],
        num_heads=o["num_heads"],
        d_ff=o["d_ff"],
        dropout=o["dropout"],
        attention_dropout=o.get("attention_dropout"),
        norm_first=o["norm_first"],
        activation=o["activation"],
        layer_norm_epsilon=o["layer_norm_epsilon"],
        position=position,
        use_bias=o["use_bias"],
        key_dim=o.get("key_dim"),
        attention_impl=o["attention_impl"],
        attention_options=o.get("attention_options"),
        kernel_initializer=o["kernel_initializer"],
        dtype=dtype,
    )


def initializer(spec, default, salt="layer"):
    """A fresh initializer for one layer (never a shared instance): `spec`
    (or `default` when None) cloned by `clone_initializer`, so a user's seeded
    instance gives each layer `salt` its own reproducible draw."""
    return clone_initializer(default if spec is None else spec, salt)


def normal(stddev):
    return {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": float(stddev)}}


def truncated_normal(stddev):
    return {"class_name": "TruncatedNormal", "config": {"mean": 0.0, "stddev": float(stddev)}}


def tokenizer_vocabulary_size(tokenizer):
    """Vocabulary size of a tokenizer-like object (`vocabulary_size()` /
    `vocabulary_size` / `vocab_size` / `len()`), or an int."""
    if tokenizer is None:
        return None
    if isinstance(tokenizer, int) and not isinstance(tokenizer, bool):
        return tokenizer
    for attr in ("vocabulary_size", "vocab_size"):
        value = getattr(tokenizer, attr, None)
        if callable(value):
            value = value()
        if value is not None:
            return int(value)
    try:
        return len(tokenizer)
    except TypeError:
        raise TypeError(f"Cannot read a vocabulary size from tokenizer {tokenizer!r}.") from None


def check_vocabulary(model_vocabulary_size, tokenizer=None, vocabulary_size=None, what="model"):
    """Raises a ValueError if a tokenizer / expected vocabulary disagrees."""
    for source, value in (
        ("tokenizer", tokenizer_vocabulary_size(tokenizer)),
        ("vocabulary_size", vocabulary_size),
    ):
        if value is not None and value != model_vocabulary_size:
            raise ValueError(
                f"Vocabulary mismatch: the {what} has vocabulary_size={model_vocabulary_size} but the {source} "
                f"has {value}."
            )


def preset_sizes(family, preset, sizes, required=()):
    """The sizes of `preset` overridden by the explicit (non-None) ones; a
    builder passes them on to its model class, which checks them."""
    return resolve_options(family, preset, {k: None for k in sizes}, sizes, required=required)
