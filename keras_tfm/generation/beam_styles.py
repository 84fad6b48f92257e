"""Which beam search a call runs: `beam_options` (GNMT's or HuggingFace's, and their defaults).

    length_penalty_style="gnmt"   `beam.beam_search_loop`: ((5 + n) / 6)^α at every step
    length_penalty_style="hf"     `beam_hf.hf_beam_search_loop`: HuggingFace `generate`'s search

A model may carry `generation_defaults` (a dict with `length_penalty_style`,
`length_penalty` and `early_stopping`, and `eos_id` for the exporters): `from_preset` of
a HuggingFace checkpoint sets it to HuggingFace's style with the checkpoint's `generation_config.json` values (or
HuggingFace's defaults α = 1, early_stopping False), so `beam_search` on that model
gives HuggingFace's tokens. Without it a beam search is GNMT's with α = 0.6.
"""

from keras_tfm.checks import check_choice, check_length_penalty
from keras_tfm.generation.beam_hf import check_early_stopping

#: `length_penalty_style` values: GNMT's ((5 + n) / 6)^α (`beam`), HuggingFace's n^α (`beam_hf`).
BEAM_STYLES = ("gnmt", "hf")
#: The beam search of a model without `generation_defaults`.
GNMT_DEFAULTS = {"length_penalty_style": "gnmt", "length_penalty": 0.6, "early_stopping": None}
#: HuggingFace `generate`'s defaults (GenerationConfig: length_penalty 1.0, early_stopping False).
HF_DEFAULTS = {"length_penalty_style": "hf", "length_penalty": 1.0, "early_stopping": False}


def beam_options(model: object, length_penalty_style=None, length_penalty=None, early_stopping=None) -> dict:
    """The checked `(length_penalty_style, length_penalty, early_stopping)` of a beam search, each
    None taken from `model.generation_defaults` (else the style's defaults: `GNMT_DEFAULTS`,
    `HF_DEFAULTS`). `early_stopping` is HuggingFace's (True, False, "never"): a TypeError with
    the GNMT style, which stops when every beam has finished."""
    defaults = dict(getattr(model, "generation_defaults", None) or GNMT_DEFAULTS)
    style = check_choice(
        "length_penalty_style",
        defaults["length_penalty_style"] if length_penalty_style is None else length_penalty_style,
        BEAM_STYLES,
    )
    if style != defaults["length_penalty_style"]:
        defaults = GNMT_DEFAULTS if style == "gnmt" else HF_DEFAULTS
    if style == "gnmt":
        if early_stopping is not None:
            raise TypeError(
                "`early_stopping` is an option of length_penalty_style='hf' (HuggingFace's beam search); "
                "the GNMT search stops when every beam has finished."
            )
        return {
            "style": style,
            "length_penalty": check_length_penalty(
                defaults["length_penalty"] if length_penalty is None else length_penalty
            ),
            "early_stopping": None,
        }
    alpha = defaults["length_penalty"] if length_penalty is None else length_penalty
    early = defaults["early_stopping"] if early_stopping is None else early_stopping
    return {
        "style": style,
        "length_penalty": check_length_penalty(alpha),
        "early_stopping": check_early_stopping(early),
    }


__all__ = ["BEAM_STYLES", "GNMT_DEFAULTS", "HF_DEFAULTS", "beam_options"]
