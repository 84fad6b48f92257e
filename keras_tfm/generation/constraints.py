"""A model's generation defaults and the token constraints of a request (HuggingFace's processors).

    config = check_generation_config({"decoder_start_id": 2, "eos_id": 2, "forced_bos_id": 0}, V)
    constraints = TokenConstraints(forced_bos_id=0, forced_eos_id=2, suppressed_ids=(1,))
    scores = apply_constraints(scores, step, constraints, max_new_tokens, prompt_lengths)

A checkpoint model (a `Seq2Seq` loaded from T5, BART or Marian) carries the defaults of its
`generation_config.json` as `model.generation_config`, a dict with the keys of
`GENERATION_CONFIG_KEYS`: `decoder_start_id` (the first decoder token), `eos_id` (the stop
id), and the constraints, which act on the scores of every step before a token is chosen:

    suppressed_ids  scores[:, v] = −∞ for each v          every step
                    (HF `bad_words_ids` of single tokens: `NoBadWordsLogitsProcessor`)
    forced_bos_id   scores[b, :] = −∞, scores[b, bos] = 0  at step 0, rows whose prompt is one
                    token (the decoder start) (`ForcedBOSTokenLogitsProcessor`)
    forced_eos_id   scores[:, :] = −∞, scores[:, eos] = 0  at step max_new_tokens − 1, the last
                    token a call may add (`ForcedEOSTokenLogitsProcessor`)

`apply_constraints` is a pure function of one step's `(rows, V)` scores, for every decoding
loop: greedy and sampling apply it to the logits (before temperature and the filters, as
HuggingFace runs its processors before its warpers), beam search to the log-probabilities
(HuggingFace adds the constrained log-probs to the beam scores without renormalising them,
so a forced token adds 0). −∞ is the finite `samplers.MASK_VALUE`. `Generator` takes a
request's constraints from the model's `generation_config`, a request's keyword arguments
(`forced_bos_id`, `forced_eos_id`, `suppressed_ids`; None turns one off) over them.
"""

from typing import Any, NamedTuple

from keras import ops

from keras_tfm.checks import check_token_id
from keras_tfm.generation.cache import tile_beams
from keras_tfm.generation.samplers import MASK_VALUE

#: The keys of a model's `generation_config` (each optional).
GENERATION_CONFIG_KEYS = ("decoder_start_id", "eos_id", "forced_bos_id", "forced_eos_id", "suppressed_ids")
#: The request keywords that override the model's constraints.
CONSTRAINT_KEYS = ("forced_bos_id", "forced_eos_id", "suppressed_ids")


class TokenConstraints(NamedTuple):
    """The constraints of a request (module docstring); hashable, a static option of a loop.

    Fields: `forced_bos_id`, `forced_eos_id` (int or None) and `suppressed_ids` (a sorted tuple).
    """

    forced_bos_id: int | None = None
    forced_eos_id: int | None = None
    suppressed_ids: tuple = ()

    @property
    def active(self) -> bool:
        """Whether any constraint acts."""
        return self.forced_bos_id is not None or self.forced_eos_id is not None or bool(self.suppressed_ids)


def check_ids(name: str, value: Any, vocabulary_size: int) -> tuple:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"`{name}` must be a list of token ids; received {value!r}.")
    ids = [check_token_id(f"{name}[{i}]", v, vocabulary_size) for i, v in enumerate(value)]
    return tuple(sorted(set(ids)))


def check_generation_config(config: dict | None, vocabulary_size: int) -> dict | None:
    """A model's generation defaults checked: a dict with keys of `GENERATION_CONFIG_KEYS`, ids
    in [0, vocabulary_size) or None, `suppressed_ids` a list of ids; None stays None."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise TypeError(f"`generation_config` must be a dict or None; received {type(config).__name__}.")
    unknown = sorted(set(config) - set(GENERATION_CONFIG_KEYS))
    if unknown:
        raise ValueError(
            f"`generation_config` has unknown keys {unknown}; expected some of {list(GENERATION_CONFIG_KEYS)}."
        )
    checked = {}
    for key, value in config.items():
        if key == "suppressed_ids":
            checked[key] = list(check_ids(f"generation_config['{key}']", value or (), vocabulary_size))
        elif value is not None:
            checked[key] = check_token_id(f"generation_config['{key}']", value, vocabulary_size)
        else:
            checked[key] = None
    return checked


def _force(scores: Any, token_id: int, rows: Any) -> Any:
    """`scores` with every entry of the `rows` (bool `(rows,)` or scalar) −∞ but `token_id`'s, 0."""
    vocabulary = scores.shape[-1]
    forced = ops.where(ops.arange(vocabulary) == token_id, 0.0, MASK_VALUE)[None, :]
    rows = ops.reshape(ops.cast(rows, "bool"), (-1, 1))
    return ops.where(rows, ops.cast(forced, scores.dtype), scores)


def apply_constraints(
    scores: Any, step: Any, constraints: TokenConstraints, max_new_tokens: Any, prompt_lengths: Any = None
) -> Any:
    """One step's scores `(rows, V)` (logits or log-probabilities) with the constraints applied.

    Args:
        scores: float `(rows, V)`.
        step: int32 scalar, the index of the token being chosen (0 = the first new token).
        constraints: a `TokenConstraints`.
        max_new_tokens: int32 scalar, the tokens the call may add (forced EOS at the last).
        prompt_lengths: int32 `(rows,)`, tokens of each row's (decoder) prompt: forced BOS
            acts on rows whose prompt is one token; None: every row.

    Returns:
        The scores, float32 `(rows, V)`.
    """
    scores = ops.cast(scores, "float32")
    if not constraints.active:
        return scores
    vocabulary = scores.shape[-1]
    if constraints.suppressed_ids:
        banned = ops.any(
            ops.arange(vocabulary)[:, None] == ops.convert_to_tensor(constraints.suppressed_ids)[None, :],
            axis=1,
        )
        scores = ops.where(banned[None, :], MASK_VALUE, scores)
    step = ops.cast(step, "int32")
    if constraints.forced_bos_id is not None:
        rows = step == 0
        if prompt_lengths is not None:
            rows = ops.logical_and(rows, ops.equal(ops.cast(prompt_lengths, "int32"), 1))
        scores = _force(scores, constraints.forced_bos_id, rows)
    if constraints.forced_eos_id is not None:
        scores = _force(scores, constraints.forced_eos_id, step == ops.cast(max_new_tokens, "int32") - 1)
    return scores


def beam_constrain(constraints, max_new_tokens, lengths, num_beams, processor=None):
    """The `processor(log_probs (B·K, V), step) -> log_probs` of a beam search: `processor` (an
    optional log-prob processor), then `constraints` (`apply_constraints`, `lengths` `(B,)` the
    decoder prompts' lengths, tiled to the K beams); None when neither acts."""
    if not constraints.active:
        return processor
    beam_lengths = tile_beams(ops.cast(lengths, "int32"), num_beams)

    def constrain(scores, step):
        scores = scores if processor is None else processor(scores, step)
        return apply_constraints(scores, step, constraints, max_new_tokens, beam_lengths)

    return constrain


def constrained_selector(
    select: Any, constraints: TokenConstraints, max_new_tokens: Any, prompt_lengths: Any
) -> Any:
    """`select(logits, step)` (a decoding loop's token chooser) choosing from constrained logits."""
    if not constraints.active:
        return select
    return lambda logits, step: select(
        apply_constraints(logits, step, constraints, max_new_tokens, prompt_lengths), step
    )


__all__ = [
    "CONSTRAINT_KEYS",
    "GENERATION_CONFIG_KEYS",
    "TokenConstraints",
    "apply_constraints",
    "beam_constrain",
    "check_generation_config",
    "check_ids",
    "constrained_selector",
]
