"""A generation request's token ids, checked and padded into length buckets (eager, NumPy).

    prepare(generator, method, inputs, max_new_tokens, request)
                                        → padded int32 inputs, max_new_tokens, cache length, slide
    pad_prompts(name, prompts, ...)     ragged or right-padded ids → padded int32 bucket
    make_seed(seed)                     int / (2,) array / None → int32 (2,)

Length buckets. Under XLA every shape is static: a call compiles once per shape.
Prompts are padded to `prompt_bucket(longest)` (a power of two, at least
`MIN_PROMPT_LENGTH`) and a call's cache has `call_cache_length(P, max_new_tokens)
= P + next_pow2(max_new_tokens)` slots (at least `P + MIN_CACHE_LENGTH`), so a
short generation never pays for a long cache and calls whose lengths fall into
the same buckets reuse one trace; inside the call the loop grows its cache in
segments (`cache.segment_sizes`).

The rules are the ones the served signatures check in the graph (`keras_tfm.export`):
ids in [0, V), at least one token per row, at most `MAX_NEW_TOKENS` new tokens; the
plain arguments (`max_new_tokens`, `eos_id`, sampling options, int seeds) are checked by
`keras_tfm.checks` before a request comes here.
"""

import secrets

import keras
import numpy as np

from keras_tfm.checks import SEED_MAX, check_token_id
from keras_tfm.generation.constraints import CONSTRAINT_KEYS, TokenConstraints, check_ids

#: Most new tokens of one generation call. Past the model's context the caches
#: slide and stay bounded, but the returned token buffer grows with
#: `max_new_tokens`; larger requests raise a ValueError (generate in pieces).
MAX_NEW_TOKENS = 1 << 20
#: Smallest cache length bucket.
MIN_CACHE_LENGTH = 64
#: Smallest prompt length bucket.
MIN_PROMPT_LENGTH = 8


def next_power_of_two(n: int, minimum: int = 1) -> int:
    """Smallest power of two >= max(n, minimum) (Python ints)."""
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


def prompt_bucket(length: int, minimum: int = MIN_PROMPT_LENGTH) -> int:
    """Padded prompt length for a longest prompt of `length` tokens."""
    return next_power_of_two(length, minimum)


def cache_bucket(total_length: int, minimum: int = MIN_CACHE_LENGTH) -> int:
    """Cache length for `prompt_bucket + max_new_tokens` positions (the exports' one length)."""
    return next_power_of_two(total_length, minimum)


def call_cache_length(prompt_length: int, max_new_tokens: int, minimum: int = MIN_CACHE_LENGTH) -> int:
    """Cache length of an in-process call: `P + next_pow2(max(max_new_tokens, minimum))`,
    e.g. 272 for P = 16 and 256 new tokens (segments 272; 1040 → 272, 528, 1040)."""
    return int(prompt_length) + next_power_of_two(max_new_tokens, minimum)


# ------------------------------------------------------------------ model defaults
def model_pad_id(model):
    """The padding id of a model's inputs: its `pad_id` (a checkpoint's, e.g. BART's 1), else 0
    (keras_tfm's models pad with id 0)."""
    pad_id = getattr(model, "pad_id", None)
    return 0 if pad_id is None else int(pad_id)


def model_defaults(model: object) -> dict:
    """The `generation_config` of a model (an empty dict when it has none)."""
    return dict(getattr(model, "generation_config", None) or {})


def request_eos(model: object, eos_id: object, unset: object) -> int:
    """A request's stop id (-1: none): its checked `eos_id`, or where it is `unset`, the model's
    `generation_config` `eos_id` (checked when it was set)."""
    if eos_id is unset:
        eos_id = model_defaults(model).get("eos_id")
    return -1 if eos_id is None else int(eos_id)


def request_constraints(model: object, request: dict) -> TokenConstraints:
    """The constraints of a request: the model's defaults, with the request's `CONSTRAINT_KEYS`
    (popped from `request`, checked against the model's vocabulary) over them."""
    vocabulary = model.vocabulary_size
    values = {key: model_defaults(model).get(key) for key in CONSTRAINT_KEYS}
    for key in CONSTRAINT_KEYS:
        if key in request:
            value = request.pop(key)
            if key == "suppressed_ids":
                values[key] = () if value is None else check_ids(key, value, vocabulary)
            else:
                values[key] = None if value is None else check_token_id(key, value, vocabulary)
    return TokenConstraints(
        values["forced_bos_id"], values["forced_eos_id"], tuple(values["suppressed_ids"] or ())
    )


# --------------------------------------------------------------------------- ids
def to_id_array(name: str, x: object) -> np.ndarray:
    """Ids (list, NumPy, a tensor of any backend) as a NumPy array, its dtype checked."""
    if type(x).__name__ == "RaggedTensor":
        raise TypeError(f"`{name}`: pass a list of sequences instead of a RaggedTensor.")
    if not isinstance(x, (np.ndarray, list, tuple)) and hasattr(x, "shape") and hasattr(x, "dtype"):
        x = keras.ops.convert_to_numpy(x)
    arr = np.asarray(x)
    if arr.dtype == object or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(
            f"`{name}` must hold integer token ids (or text, with a tokenizer); received dtype {arr.dtype}."
        )
    return arr


def _rows(name, prompts, prompt_lengths):
    """`(list of 1-D id arrays, lengths)` of a list of sequences or a 2-D array."""
    if isinstance(prompts, (list, tuple)) and (len(prompts) == 0 or not np.isscalar(prompts[0])):
        if len(prompts) == 0:
            raise ValueError(f"`{name}` is an empty batch; pass at least one sequence.")
        if prompt_lengths is not None:
            raise ValueError("`prompt_lengths` is only accepted with a 2-D array of prompts.")
        rows = [to_id_array(f"{name}[{b}]", p) for b, p in enumerate(prompts)]
        for b, r in enumerate(rows):
            if r.ndim != 1:
                raise ValueError(f"`{name}[{b}]` must be a 1-D sequence of ids; received shape {r.shape}.")
        return rows, np.array([len(r) for r in rows], dtype=np.int32)
    arr = to_id_array(name, prompts)
    if arr.ndim != 2:
        raise ValueError(
            f"`{name}` must be a batch: a 2-D array (batch, length) or a list of sequences; received "
            f"shape {arr.shape}."
        )
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` is an empty batch; pass at least one sequence.")
    if prompt_lengths is None:
        lengths = np.full((arr.shape[0],), arr.shape[1], np.int32)
    else:
        lengths = to_id_array("prompt_lengths", prompt_lengths)
        if lengths.ndim != 1 or lengths.shape[0] != arr.shape[0]:
            raise ValueError(
                f"`prompt_lengths` must be 1-D (one length per row of {arr.shape[0]}); received shape "
                f"{lengths.shape}."
            )
        lengths = lengths.astype(np.int32)
        if np.any(lengths > arr.shape[1]):
            raise ValueError(f"`prompt_lengths` exceed the prompt array length {arr.shape[1]}.")
    return [arr[b, : lengths[b]] for b in range(arr.shape[0])], lengths


def pad_prompts(
    name: str,
    prompts: object,
    prompt_lengths: object = None,
    pad_id: int = 0,
    vocabulary_size: int | None = None,
    side: str = "left",
    minimum: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Ragged or right-padded prompts → padded int32 array of bucket length.

    Args:
        name: the argument's name (in errors).
        prompts: a list of 1-D id sequences of any lengths, or a 2-D array
            `(batch, T)` (every row of length T unless `prompt_lengths` says
            how many leading entries of each row are real).
        prompt_lengths: optional `(batch,)` lengths for a 2-D array.
        pad_id: the padding id.
        vocabulary_size: ids must lie in [0, vocabulary_size) (None: not checked).
        side: "left" (decoder prompts) or "right" (encoder inputs).
        minimum: smallest bucket (default `MIN_PROMPT_LENGTH`).

    Returns:
        `(padded (batch, bucket) int32, lengths (batch,) int32)`.
    """
    rows, lengths = _rows(name, prompts, prompt_lengths)
    if np.any(lengths < 1):
        raise ValueError(
            f"Every sequence of `{name}` needs at least one token; lengths are {lengths.tolist()}."
        )
    for r in rows:
        if r.min() < 0 or (vocabulary_size is not None and r.max() >= vocabulary_size):
            raise ValueError(
                f"`{name}` holds ids outside [0, {vocabulary_size}): min {r.min()}, max {r.max()}."
            )
    width = prompt_bucket(int(lengths.max()), minimum or MIN_PROMPT_LENGTH)
    out = np.full((len(rows), width), pad_id, np.int32)
    for b, r in enumerate(rows):
        if side == "left":
            out[b, width - len(r) :] = r
        else:
            out[b, : len(r)] = r
    return out, lengths


def fit_length(
    max_new_tokens: int, longest_prompt: int, max_length: int | None, sliding: bool = False
) -> bool:
    """Whether prompt + `max_new_tokens` (a checked int) pass the model's `max_length`, where
    `sliding` allows a sliding window (a prompt must still fit the model); a ValueError where
    they pass it without one."""
    if max_length is None or longest_prompt + max_new_tokens <= max_length:
        return False
    if sliding and longest_prompt <= max_length:
        return True
    if sliding:
        raise ValueError(
            f"A prompt of {longest_prompt} tokens exceeds the model's maximum length {max_length}; pass at "
            f"most its last {max_length} tokens."
        )
    raise ValueError(
        f"`max_new_tokens`={max_new_tokens} with a prompt of {longest_prompt} tokens exceeds the model's "
        f"maximum length {max_length} (at most {max(max_length - longest_prompt, 0)} new tokens)."
    )


def make_seed(seed: object) -> np.ndarray:
    """int / (2,) array / tensor / None → int32 NumPy `(2,)`. None draws a fresh seed in Python
    (outside every compiled function); an int `s` (checked: `checks.check_seed`) is `(0, s)`, as
    the served `seed` input."""
    if seed is None:
        return np.array([secrets.randbits(31), secrets.randbits(31)], np.int32)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.array([0, seed], np.int32)
    arr = to_id_array("seed", seed)
    if arr.shape != (2,):
        raise ValueError(f"`seed` must be an int or an int array of shape (2,); received shape {arr.shape}.")
    if arr.min() < 0 or arr.max() > SEED_MAX:  # astype(int32) would wrap them silently
        raise ValueError(f"`seed` entries must be seeds in [0, {SEED_MAX}]; received {arr.tolist()}.")
    return arr.astype(np.int32)


# --------------------------------------------------------------------------- a request
def _seq2seq_inputs(generator, source_ids, bos_id=None, source_lengths=None, decoder_prompt_ids=None):
    """Right-padded sources (cut to the model's length; padded with the model's pad id, 0 for
    keras_tfm's models) and left-padded decoder prompts."""
    model = generator.model
    source_size = getattr(model, "source_vocabulary_size", model.vocabulary_size)
    src, src_len = pad_prompts(
        "source_ids", source_ids, source_lengths, model_pad_id(model), source_size, side="right"
    )
    if model.max_length is not None and int(src_len.max()) > model.max_length:
        raise ValueError(
            f"A source of {int(src_len.max())} tokens exceeds the model's max_length {model.max_length}."
        )
    if model.max_length is not None:
        src = src[:, : max(model.max_length, int(src_len.max()))]
    if decoder_prompt_ids is not None and bos_id is not None:
        raise ValueError(
            "Pass `bos_id` or `decoder_prompt_ids`, not both: the decoder prompts start with their own "
            f"first token (received bos_id={bos_id!r})."
        )
    if decoder_prompt_ids is None:
        bos_id = generator.bos_id if bos_id is None else bos_id
        if bos_id is None:
            raise ValueError("`bos_id` is required (the first decoder token), or pass `decoder_prompt_ids`.")
        decoder_prompt_ids = np.full((src.shape[0], 1), bos_id, np.int32)
    dec, dec_len = pad_prompts(
        "decoder_prompt_ids", decoder_prompt_ids, None, generator.pad_id, model.vocabulary_size, minimum=1
    )
    if dec.shape[0] != src.shape[0]:
        raise ValueError(f"{dec.shape[0]} decoder prompts for {src.shape[0]} sources.")
    return (src, src_len, dec, dec_len), int(dec_len.max())


def prepare(generator: object, method: str, inputs: object, max_new_tokens: int, request: dict) -> tuple:
    """A request's padded inputs (eager): `(arrays, cache_length, slide)`.

    `arrays` are the `Generator.decoder_inputs` (GPT: left-padded prompts and their lengths;
    seq2seq: right-padded sources, their lengths, left-padded decoder prompts and theirs);
    `slide`: a GPT request passes the model's maximum length (a sliding window).
    `max_new_tokens` is a checked int; `request` the model kind's keyword arguments (GPT:
    `prompt_lengths`; seq2seq: `bos_id` (checked), `source_lengths`, `decoder_prompt_ids`);
    any other keyword is a TypeError naming `method`.
    """
    model = generator.model
    keys = ("bos_id", "source_lengths", "decoder_prompt_ids") if generator.seq2seq else ("prompt_lengths",)
    unknown = sorted(set(request) - set(keys))
    if unknown:
        raise TypeError(
            f"`{method}` got unexpected keyword argument(s) {unknown}; besides its documented arguments "
            f"it takes {list(keys)} for a {type(model).__name__}."
        )
    if generator.seq2seq:
        arrays, longest = _seq2seq_inputs(generator, inputs, **request)
        fit_length(max_new_tokens, longest, model.max_length)
        return arrays, call_cache_length(arrays[2].shape[1], max_new_tokens), False
    ids, lengths = pad_prompts(
        "prompt_ids", inputs, request.get("prompt_lengths"), generator.pad_id, model.vocabulary_size
    )
    slide = fit_length(max_new_tokens, int(lengths.max()), model.max_length, sliding=True)
    return (ids, lengths), call_cache_length(ids.shape[1], max_new_tokens), slide
