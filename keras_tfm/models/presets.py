"""Named model sizes and the option-merging logic shared by all builders.

Every builder takes a preset name and/or explicit keyword options. The
resolution order is: builder defaults ← preset ← explicit keywords (an explicit
`None` means "not given"). Unknown presets and unknown options raise.

Published sizes:

    family   preset             layers  d_model  heads  d_ff   vocab   max_len  params
    gpt      gpt2_small         12      768      12     3072   50257   1024     124,439,808
    gpt      gpt2_medium        24      1024     16     4096   50257   1024     354,823,168
    bert     bert_base          12      768      12     3072   30522   512      109,482,240
    bert     bert_large         24      1024     16     4096   30522   512      335,141,888
    seq2seq  transformer_base   6+6     512      8      2048   37000   256*     63,082,496
    seq2seq  transformer_big    6+6     1024     16     4096   37000   256*     214,245,376

(*) Vaswani et al. use sinusoidal positions, which have no length limit; the
preset's `max_length` is only the enforced input limit. Their vocabulary is
the shared 37000-token BPE of WMT'14 EN-DE. The seq2seq counts are with the
shared, tied embedding of the paper (no output bias).

`tiny` is a small configuration for tests and smoke runs (every family).
"""

import copy

PRESETS = {
    "gpt": {
        "tiny": dict(
            vocabulary_size=64, max_length=32, num_layers=2, num_heads=2, d_model=32, d_ff=64, dropout=0.0
        ),
        "gpt2_small": dict(
            vocabulary_size=50257,
            max_length=1024,
            num_layers=12,
            num_heads=12,
            d_model=768,
            d_ff=3072,
            dropout=0.1,
        ),
        "gpt2_medium": dict(
            vocabulary_size=50257,
            max_length=1024,
            num_layers=24,
            num_heads=16,
            d_model=1024,
            d_ff=4096,
            dropout=0.1,
        ),
    },
    "bert": {
        "tiny": dict(
            vocabulary_size=64,
            max_length=32,
            num_segments=2,
            num_layers=2,
            num_heads=2,
            d_model=32,
            d_ff=64,
            dropout=0.0,
        ),
        "bert_base": dict(
            vocabulary_size=30522,
            max_length=512,
            num_segments=2,
            num_layers=12,
            num_heads=12,
            d_model=768,
            d_ff=3072,
            dropout=0.1,
        ),
        "bert_large": dict(
            vocabulary_size=30522,
            max_length=512,
            num_segments=2,
            num_layers=24,
            num_heads=16,
            d_model=1024,
            d_ff=4096,
            dropout=0.1,
        ),
    },
    "seq2seq": {
        "tiny": dict(
            vocabulary_size=32, max_length=16, num_layers=2, num_heads=4, d_model=64, d_ff=128, dropout=0.0
        ),
        "transformer_base": dict(
            vocabulary_size=37000,
            max_length=256,
            num_layers=6,
            num_heads=8,
            d_model=512,
            d_ff=2048,
            dropout=0.1,
            label_smoothing=0.1,
        ),
        "transformer_big": dict(
            vocabulary_size=37000,
            max_length=256,
            num_layers=6,
            num_heads=16,
            d_model=1024,
            d_ff=4096,
            dropout=0.3,
            label_smoothing=0.1,
        ),
    },
}

# Keys that describe training, not architecture: kept in the preset table for
# reference (`get_preset`) but never passed to a builder.
TRAINING_KEYS = ("label_smoothing",)


def list_presets(family=None):
    """Preset names, for one family ("gpt", "bert", "seq2seq") or all of them."""
    if family is None:
        return {f: sorted(p) for f, p in PRESETS.items()}
    _check_family(family)
    return sorted(PRESETS[family])


def _check_family(family):
    if family not in PRESETS:
        raise ValueError(f"Unknown model family {family!r}; expected one of {sorted(PRESETS)}.")


def get_preset(family, preset):
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


def resolve_options(family, preset, defaults, given, required):
    """Merges builder defaults, a preset and explicit options.

    Args:
        family: preset family.
        preset: preset name or None.
        defaults: dict of builder defaults (also the set of known options).
        given: dict of explicit options; `None` values mean "not given".
        required: option names that must end up not None.

    Returns:
        The merged dict.

    Raises:
        TypeError: an option is not known to the builder.
        ValueError: unknown preset, or a required option is missing.
    """
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(
            f"Unknown option(s) {unknown} for {family} models; expected some of {sorted(defaults)}."
        )
    options = dict(defaults)
    if preset is not None:
        for key, value in get_preset(family, preset).items():
            if key not in TRAINING_KEYS:
                options[key] = value
    for key, value in given.items():
        if value is not None:
            options[key] = value
    missing = [k for k in required if options.get(k) is None]
    if missing:
        raise ValueError(
            f"Missing {missing}: give them explicitly or pass a `preset` (one of {sorted(PRESETS[family])})."
        )
    return options


def check_sizes(d_model, num_heads, key_dim=None, position=None):
    """Raises a ValueError when attention sizes are inconsistent."""
    for name, value in (("d_model", d_model), ("num_heads", num_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int; received {value!r}.")
    if key_dim is None and d_model % num_heads:
        raise ValueError(f"`d_model`={d_model} must be divisible by `num_heads`={num_heads}.")
    head_dim = key_dim or d_model // num_heads
    if position == "rope" and head_dim % 2:
        raise ValueError(f"position='rope' needs an even head size; d_model / num_heads = {head_dim}.")
