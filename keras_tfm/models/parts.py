"""Helpers shared by the model classes and their builders.

Every text model class (`GPT`, `BertEncoder`, `Seq2Seq`) resolves its
constructor arguments with `resolve_architecture` (sizes, checks, the
`TransformerBlock` options, the stored config), and every builder
(`gpt(preset, **options)`, ...) merges a preset into its options with
`preset_options`: class defaults ← preset ← explicit keywords.
"""

import inspect

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_choice, check_positive_int, check_rate
from keras_tfm.layers.attention.core import ATTENTION_IMPLS
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.feed_forward import ACTIVATIONS
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.output_head import OutputHead
from keras_tfm.layers.rms_norm import RMSNorm
from keras_tfm.layers.transformer_block import NORMS
from keras_tfm.models.presets import PRESETS, TRAINING_KEYS, check_sizes, get_preset

#: Every position scheme a builder accepts. Absolute ones act on the
#: embedding; the others act inside self-attention (in every block).
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "relative", None)
EMBEDDING_POSITIONS = ("learned", "sinusoidal")

#: Sizes every family may have: positive ints (None = not given).
SIZE_KEYS = (
    "vocabulary_size",
    "source_vocabulary_size",
    "target_vocabulary_size",
    "max_length",
    "num_segments",
    "num_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "num_heads",
    "d_model",
    "d_ff",
)

#: Model options passed on unchanged to every `TransformerBlock`.
BLOCK_OPTIONS = (
    "d_model",
    "num_heads",
    "d_ff",
    "dropout",
    "attention_dropout",
    "norm_first",
    "activation",
    "layer_norm_epsilon",
    "norm",
    "use_bias",
    "key_dim",
    "num_key_value_heads",
    "rope_max_wavelength",
    "attention_impl",
    "attention_options",
    "dtype",
)

#: Constructor arguments that are not hyperparameters (never in `config`).
NOT_CONFIG = ("self", "kwargs", "name", "__class__")


def constructor_arguments(local_variables):
    """A constructor's arguments from its `locals()` taken at its first line,
    without `self`, `name` and `**kwargs`: what a model stores as `config`."""
    return {k: v for k, v in local_variables.items() if k not in NOT_CONFIG}


def split_position(position):
    """`position` → (embedding position, attention position)."""
    if position == "none":
        position = None
    check_choice("position", position, POSITIONS)
    if position in EMBEDDING_POSITIONS:
        return position, None
    return None, position


def check_epsilon(value):
    """`layer_norm_epsilon` as a positive float (a ValueError naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"`layer_norm_epsilon` must be a positive float; received {value!r}.")
    return float(value)


def resolve_sizes(family, sizes, required):
    """Sizes with d_ff = 4·d_model and dropout = 0 filled in when not given;
    checks that the required ones are given and all are positive ints."""
    options = dict(sizes)
    if options.get("d_ff") is None and options.get("d_model") is not None:
        options["d_ff"] = 4 * options["d_model"]
    if "dropout" in options and options["dropout"] is None:
        options["dropout"] = 0.0
    missing = [k for k in required if options.get(k) is None]
    if missing:
        raise ValueError(
            f"Missing {missing}: give them explicitly or pass a `preset` (one of {sorted(PRESETS[family])})."
        )
    for key in SIZE_KEYS:
        if options.get(key) is not None:
            try:
                check_positive_int(key, options[key])
            except TypeError as error:
                raise ValueError(str(error)) from None
    return options


def resolve_architecture(family, arguments, required, default_initializer):
    """Resolves a model class's constructor arguments.

    Args:
        family: preset family ("gpt", "bert", "seq2seq"), for messages.
        arguments: the constructor's `locals()` at its first line.
        required: sizes that must be given.
        default_initializer: the blocks' kernel initializer when
            `kernel_initializer` is None.

    Returns:
        `(config, embedding_position, blocks_kwargs)`: the constructor
        arguments with sizes resolved and options checked (what the model
        stores as `config`), the position scheme of the embedding (or None),
        and the `TransformerBlock` keyword arguments (the kernel initializer
        is cloned per block by the caller, `clone_initializers`).

    Raises:
        ValueError: naming the bad option (unknown activation, norm,
            attention_impl, position; bad rates, epsilon, sizes).
    """
    config = constructor_arguments(arguments)
    config.update(resolve_sizes(family, {k: v for k, v in config.items() if k in SIZE_KEYS}, required))
    config["dropout"] = check_rate("dropout", 0.0 if config.get("dropout") is None else config["dropout"])
    if config["attention_dropout"] is not None:
        check_rate("attention_dropout", config["attention_dropout"])
    check_choice("activation", config["activation"], ACTIVATIONS)
    check_choice("attention_impl", config["attention_impl"], sorted(ATTENTION_IMPLS))
    check_choice("norm", config["norm"], NORMS)
    embedding_position, attention_position = split_position(config["position"])
    config.update(
        layer_norm_epsilon=check_epsilon(config["layer_norm_epsilon"]),
        norm_first=check_bool("norm_first", config["norm_first"]),
        use_bias=check_bool("use_bias", config["use_bias"]),
    )
    check_sizes(config["d_model"], config["num_heads"], config["key_dim"], attention_position)
    blocks_kwargs = {key: config[key] for key in BLOCK_OPTIONS}
    blocks_kwargs.update(
        position=attention_position,
        kernel_initializer=initializer(config["kernel_initializer"], default_initializer, "blocks"),
    )
    return config, embedding_position, blocks_kwargs


def make_norm(kind, epsilon, dtype, name):
    """A `LayerNormalization` (`kind="layer"`) or an `RMSNorm` (`"rms"`, float32 statistics)."""
    if check_choice("norm", kind, NORMS) == "rms":
        return RMSNorm(epsilon=epsilon, dtype=dtype, name=name)
    return keras.layers.LayerNormalization(epsilon=epsilon, dtype=dtype, name=name)


def make_embedding(
    config, vocabulary_size, position, default_initializer, name, scale=False, mask_zero=False
):
    """The `TokenAndPositionEmbedding` of a text model (`position` = its embedding-side scheme or None)."""
    return TokenAndPositionEmbedding(
        vocabulary_size,
        config["d_model"],
        max_length=config["max_length"],
        position=position,
        scale=scale,
        mask_zero=mask_zero,
        embeddings_initializer=initializer(config["embeddings_initializer"], default_initializer, name),
        dtype=config["dtype"],
        name=name,
    )


def make_final_norm(config, name):
    """The norm after the last block of a pre-norm stack (`config["norm"]`), None for post-norm."""
    if not config["norm_first"]:
        return None
    return make_norm(config["norm"], config["layer_norm_epsilon"], config["dtype"], name)


def make_lm_head(config, vocabulary_size, default_initializer):
    """The untied `OutputHead` "lm_head" (`lm_head_use_bias`), None when `tie_embeddings`."""
    if config["tie_embeddings"]:
        return None
    return OutputHead(
        vocabulary_size,
        use_bias=config["lm_head_use_bias"],
        kernel_initializer=initializer(config["kernel_initializer"], default_initializer, "lm_head"),
        dtype=config["dtype"],
        name="lm_head",
    )


def set_size_attributes(model, config, keys=()):
    """`model.<key>` for `keys`, and the attention sizes every text model exposes:
    `num_heads`, `num_key_value_heads`, `d_model`, `head_dim`."""
    for key in keys:
        setattr(model, key, config[key])
    model.num_heads = config["num_heads"]
    model.num_key_value_heads = config["num_key_value_heads"] or config["num_heads"]
    model.d_model = config["d_model"]
    model.head_dim = config["key_dim"] or config["d_model"] // config["num_heads"]


def zero_caches(model, blocks, batch_size, length, dtype=None):
    """Zero key/value caches of `blocks`: a flat list `[keys_0, values_0,
    keys_1, values_1, ...]` (two tensors per block, `block_caches` pairs
    them), in the layout of `MultiHeadSelfAttention.init_cache`: keys
    `(batch, num_key_value_heads, head_dim, length)`, values `(batch,
    num_key_value_heads, length, head_dim)`.

    `dtype` (default: `model.cache_dtype`, else the blocks' compute dtype):
    "bfloat16" halves the bytes a decoding step reads (stored as bfloat16 bits
    when the compute dtype is not bfloat16).
    """
    dtype = dtype or getattr(model, "cache_dtype", None)
    return [
        tensor
        for block in blocks
        for tensor in block.self_attention_layer.init_cache(batch_size, length, dtype=dtype)
    ]


def block_caches(caches):
    """The `(keys, values)` pair of every block from `zero_caches`' flat list."""
    return list(zip(caches[0::2], caches[1::2]))


def cache_positions(token_ids, cache_index, positions=None):
    """`positions`, or `cache_index + 0..T-1` for every row of `token_ids` (batch, T)."""
    if positions is not None:
        return positions
    length = ops.shape(token_ids)[1]
    positions = ops.cast(cache_index, "int32") + ops.arange(length, dtype="int32")[None, :]
    return ops.broadcast_to(positions, ops.shape(token_ids))


def check_known_options(model_class, options, family=None):
    """`options` if `model_class` takes every one of them (`name` included),
    else a TypeError listing the unknown and the known ones."""
    known = [p for p in inspect.signature(model_class).parameters if p not in NOT_CONFIG] + ["name"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        what = f"{family} models" if family else model_class.__name__
        raise TypeError(f"Unknown option(s) {unknown} for {what}; expected some of {sorted(known)}.")
    return options


def preset_options(model_class, family, preset, options, size_keys):
    """A builder's keyword arguments for `model_class`: the class defaults,
    overridden by the preset's options, overridden by the explicit ones.

    A size (in `size_keys`) given as None means "not given" (the preset's or
    the class default applies); any other explicit value wins, None included.

    Raises:
        TypeError: an option the class does not take.
        ValueError: unknown preset, or a required size is missing.
    """
    check_known_options(model_class, options, family)
    merged = {}
    if preset is not None:
        merged = {k: v for k, v in get_preset(family, preset).items() if k not in TRAINING_KEYS}
    merged.update({k: v for k, v in options.items() if v is not None or k not in size_keys})
    parameters = inspect.signature(model_class).parameters
    required = [k for k, p in parameters.items() if p.default is inspect.Parameter.empty and k in size_keys]
    missing = [k for k in required if merged.get(k) is None]
    if missing:
        raise ValueError(
            f"Missing {missing}: give them explicitly or pass a `preset` (one of {sorted(PRESETS[family])})."
        )
    return merged


def builder_signature(model_class, size_keys, leading=("preset",), keyword_only=True):
    """The signature of a builder of `model_class`, for `help()` and
    `inspect`: `leading` arguments (default None), the constructor's required
    arguments, then its other arguments (as keywords with `keyword_only`);
    the sizes (`size_keys`) default to None (the preset's value, or the
    class default)."""
    kinds = inspect.Parameter
    parameters = [kinds(n, kinds.POSITIONAL_OR_KEYWORD, default=None) for n in leading]
    for name, parameter in inspect.signature(model_class).parameters.items():
        if name in ("self", "kwargs"):
            continue
        if name in size_keys:
            parameters.append(kinds(name, kinds.KEYWORD_ONLY, default=None))
        elif parameter.default is kinds.empty:
            parameters.append(kinds(name, kinds.POSITIONAL_OR_KEYWORD))
        else:
            kind = kinds.KEYWORD_ONLY if keyword_only else kinds.POSITIONAL_OR_KEYWORD
            parameters.append(kinds(name, kind, default=parameter.default))
    return inspect.Signature(parameters)


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
