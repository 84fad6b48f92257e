"""Named model sizes, and how a builder merges one under its explicit options.

Every builder takes a preset name and/or explicit keyword options:

    builder(preset, **options)  →  ModelClass(**preset_options(ModelClass, family, preset, options))

The resolution order is: class defaults ← preset ← explicit keywords, where a
size (`SIZE_OPTIONS`) given as None means "not given". Unknown presets and
unknown options raise.

Published sizes:

    family   preset             layers  d_model  heads  d_ff   vocab   max_len  params
    gpt      gpt2_small         12      768      12     3072   50257   1024     124,439,808
    gpt      gpt2_medium        24      1024     16     4096   50257   1024     354,823,168
    gpt      tinyllama_1_1b     22      2048     32/4   5632   32000   2048     1,100,048,384
    gpt      llama2_7b          32      4096     32/32  11008  32000   4096     6,738,415,616
    gpt      llama3_8b          32      4096     32/8   14336  128256  8192     8,030,261,248
    bert     bert_base          12      768      12     3072   30522   512      109,482,240
    bert     bert_large         24      1024     16     4096   30522   512      335,141,888
    seq2seq  transformer_base   6+6     512      8      2048   37000   256*     63,082,496
    seq2seq  transformer_big    6+6     1024     16     4096   37000   256*     214,245,376

(*) Vaswani et al. use sinusoidal positions, which have no length limit; the
preset's `max_length` is only the enforced input limit. Their vocabulary is
the shared 37000-token BPE of WMT'14 EN-DE. The seq2seq counts are with the
shared, tied embedding of the paper (no output bias).

The Llama presets (heads given as query/key-value heads) have the Llama
layout: pre-RMSNorm (ε 1e-5), SwiGLU FFN, RoPE (base 10000; 500000 in Llama 3),
grouped-query attention, no biases, an untied output head; their `max_length`
is only the enforced input limit (RoPE has no weights). `llama_tiny` is that
layout at the size of the lab GPT (`examples/gpt_shakespeare.py`: 4 layers,
d_model 128, context 64, 65 characters): 804,224 parameters against the lab
GPT-2 layout's 805,248 (d_ff 384 with three FFN matrices, 2 key/value heads).

`tiny` is a small configuration for tests and smoke runs (every family).
"""

import copy
import inspect

#: Columns of the size tables below (one row per preset).
SIZES = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model", "d_ff", "dropout")
BERT_SIZES = SIZES[:2] + ("num_segments",) + SIZES[2:]
LLAMA_SIZES = SIZES + ("num_key_value_heads", "rope_max_wavelength", "layer_norm_epsilon")
#: The Llama layout: pre-RMSNorm, SwiGLU, RoPE, no biases, untied output head.
LLAMA_LAYOUT = dict(position="rope", norm="rms", activation="swiglu", use_bias=False, tie_embeddings=False)


def _rows(columns, rows, **common):
    """{preset: {column: value, ..., **common}} from a table of value tuples."""
    return {name: dict(zip(columns, values), **common) for name, values in rows.items()}


PRESETS = {
    "gpt": {
        **_rows(
            SIZES,
            {
                "tiny": (64, 32, 2, 2, 32, 64, 0.0),
                "gpt2_small": (50257, 1024, 12, 12, 768, 3072, 0.1),
                "gpt2_medium": (50257, 1024, 24, 16, 1024, 4096, 0.1),
            },
        ),
        **_rows(
            LLAMA_SIZES,
            {
                "llama_tiny": (65, 64, 4, 4, 128, 384, 0.0, 2, 10000.0, 1e-5),
                "tinyllama_1_1b": (32000, 2048, 22, 32, 2048, 5632, 0.0, 4, 10000.0, 1e-5),
                "llama2_7b": (32000, 4096, 32, 32, 4096, 11008, 0.0, 32, 10000.0, 1e-5),
                "llama3_8b": (128256, 8192, 32, 32, 4096, 14336, 0.0, 8, 500000.0, 1e-5),
            },
            **LLAMA_LAYOUT,
        ),
    },
    "bert": _rows(
        BERT_SIZES,
        {
            "tiny": (64, 32, 2, 2, 2, 32, 64, 0.0),
            "bert_base": (30522, 512, 2, 12, 12, 768, 3072, 0.1),
            "bert_large": (30522, 512, 2, 24, 16, 1024, 4096, 0.1),
        },
    ),
    "seq2seq": {
        "tiny": dict(zip(SIZES, (32, 16, 2, 4, 64, 128, 0.0))),
        **_rows(
            SIZES,
            {
                "transformer_base": (37000, 256, 6, 8, 512, 2048, 0.1),
                "transformer_big": (37000, 256, 6, 16, 1024, 4096, 0.3),
            },
            label_smoothing=0.1,
        ),
    },
}

# Keys that describe training, not architecture: kept in the preset table for
# reference (`get_preset`) but never passed to a builder.
TRAINING_KEYS = ("label_smoothing",)


def list_presets(family: str | None = None) -> list[str] | dict[str, list[str]]:
    """Preset names, for one family ("gpt", "bert", "seq2seq") or all of them."""
    if family is None:
        return {f: sorted(p) for f, p in PRESETS.items()}
    _check_family(family)
    return sorted(PRESETS[family])


def _check_family(family):
    if family not in PRESETS:
        raise ValueError(f"Unknown model family {family!r}; expected one of {sorted(PRESETS)}.")


def get_preset(family: str, preset: str) -> dict:
    """A copy of the options of `preset` for `family`.

    Raises:
        ValueError: naming `preset` and listing the valid presets.
    """
    _check_family(family)
    if not isinstance(preset, str) or preset not in PRESETS[family]:
        raise ValueError(
            f"Unknown `preset` {preset!r} for {family} models; expected one of {sorted(PRESETS[family])}."
        )
    return copy.deepcopy(PRESETS[family][preset])


#: Options a builder call may give as None to mean "not given" (the preset's
#: value, else the class default, applies).
SIZE_OPTIONS = BERT_SIZES + (
    "source_vocabulary_size",
    "target_vocabulary_size",
    "num_encoder_layers",
    "num_decoder_layers",
)


def known_options(model_class):
    """The keyword arguments `model_class` takes (its constructor's parameters)."""
    return [
        name
        for name, parameter in inspect.signature(model_class).parameters.items()
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    ]


def check_known_options(model_class, options, what=None):
    """`options` if `model_class` takes every one of them, else a TypeError
    listing the unknown and the known ones (`what` names the models)."""
    known = known_options(model_class)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"Unknown option(s) {unknown} for {what or model_class.__name__}; expected some of {sorted(known)}."
        )
    return options


def preset_options(model_class, family, preset, options):
    """The keyword arguments of `model_class` for `builder(preset, **options)`:
    the preset's options (training keys left out), overridden by the explicit
    ones. A size in `SIZE_OPTIONS` given as None is not given; any other
    explicit value wins, None included. A required argument that neither
    gives is passed as None, so the class names it in its "Missing" error.

    Raises:
        TypeError: an option `model_class` does not take.
        ValueError: unknown preset.
    """
    check_known_options(model_class, options, f"{family} models")
    merged = {}
    if preset is not None:
        merged = {k: v for k, v in get_preset(family, preset).items() if k not in TRAINING_KEYS}
    merged.update({k: v for k, v in options.items() if v is not None or k not in SIZE_OPTIONS})
    for name, parameter in inspect.signature(model_class).parameters.items():
        if parameter.default is parameter.empty and parameter.kind is parameter.POSITIONAL_OR_KEYWORD:
            merged.setdefault(name, None)
    return merged
