"""The token choice of `keras_tfm.generation.samplers` in NumPy, for the LiteRT runner.

LiteRT has no bitwise AND kernel, so the random stream of `samplers` (a 32-bit integer
hash) cannot run inside a `.tflite` signature; the runner chooses tokens here instead,
from the float32 logits the `decode` signature returns. Every step is the arithmetic of
`samplers.sample` and `samplers.greedy`:

    greedy:  token = argmax_v logits[v]                 (lowest index on ties)
    sample:  z = logits / T;  z = filter_top_p(filter_top_k(z, k), p)
             token = argmax_v (z_v - log(-log u_v)),   u = uniform_noise(split_seed(seed, step))

The integer hash, the seed split and the uniform numbers are bit-identical to
`samplers.split_seed` and `samplers.uniform_noise` (uint32 arithmetic wraps as int32
does); the float steps (softmax and cumulative sum of the top-p filter, the logarithms
of the Gumbel noise) round as NumPy rounds, so a token can differ only where two
candidates tie to the last bit. Row `r` of a batch draws the noise of row `r`, so
prompts generated one at a time draw what they draw in a batch.
"""

import numpy as np

from keras_tfm.generation.samplers import MASK_VALUE, MIN_TEMPERATURE

__all__ = ["choose_token", "constrain", "split_seed", "uniform_noise"]

_MASK32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9


def _word(value):
    """The bits of an int32 value as a Python int in [0, 2^32)."""
    return int(value) & _MASK32


def _mix_word(x):
    """`samplers._mix` on one 32-bit word (Python ints, multiplication taken modulo 2^32)."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _MASK32
    return x ^ (x >> 16)


def _mix(x):
    """`samplers._mix` on a uint32 array (NumPy's uint32 multiplication wraps modulo 2^32)."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def split_seed(seed: np.ndarray, step: int) -> np.ndarray:
    """`samplers.split_seed`: int32 `(2,)` seed of decoding step `step`."""
    s0, s1 = (_word(value) for value in np.asarray(seed).reshape(-1))
    step = _word(step)
    first = _mix_word(s0 ^ _mix_word((step + _GOLDEN) & _MASK32))
    second = _mix_word(s1 ^ _mix_word(step ^ s0))
    return np.array([first, second], np.uint32).view(np.int32)


_COLUMN_KEYS = {}


def _column_keys(columns):
    """`h(c + φ)` of every column (the same for every seed and step: computed once per width)."""
    if columns not in _COLUMN_KEYS:
        _COLUMN_KEYS[columns] = _mix(np.arange(columns, dtype=np.uint32) + np.uint32(_GOLDEN))
    return _COLUMN_KEYS[columns]


def uniform_noise(seed: np.ndarray, rows: np.ndarray, columns: int) -> np.ndarray:
    """`samplers.uniform_noise(seed, (R, columns))` restricted to the row indices `rows`:
    float32 `(len(rows), columns)` in (0, 1), bit-identical."""
    s0, s1 = (_word(value) for value in np.asarray(seed).reshape(-1))
    key = _mix_word(s0 ^ _GOLDEN) ^ s1
    row_keys = np.array(
        [_mix_word((key + _mix_word(_word(r))) & _MASK32) for r in np.reshape(rows, -1)], np.uint32
    )
    bits = _mix(row_keys[:, None] ^ _column_keys(columns)[None, :])
    return ((bits >> np.uint32(9)).astype(np.float32) * np.float32(2.0) + np.float32(1.0)) * np.float32(
        1.0 / (1 << 24)
    )


def _clean(logits):
    logits = np.asarray(logits, np.float32)
    return np.where(np.isnan(logits), np.float32(MASK_VALUE), logits)


def _top_k(logits, k):
    vocabulary = logits.shape[-1]
    if k <= 0 or k >= vocabulary:
        return logits
    kth = -np.sort(-logits, axis=-1)[:, k - 1 : k]
    return np.where(logits >= kth, logits, np.float32(MASK_VALUE))


def _top_p(logits, p):
    if p >= 1.0:
        return logits
    ordered = -np.sort(-logits, axis=-1)
    shifted = np.exp(ordered - ordered[:, :1])
    probabilities = shifted / np.sum(shifted, axis=-1, keepdims=True)
    mass_before = np.cumsum(probabilities, axis=-1, dtype=np.float32) - probabilities
    keep = np.maximum(np.sum(mass_before < np.float32(p), axis=-1, keepdims=True), 1)
    threshold = np.take_along_axis(ordered, keep - 1, axis=-1)
    return np.where(logits >= threshold, logits, np.float32(MASK_VALUE))


def choose_token(
    logits: np.ndarray,
    step: int,
    *,
    sampler: str,
    seed: np.ndarray,
    temperature: float,
    top_k: int,
    top_p: float,
    rows: np.ndarray,
) -> np.ndarray:
    """Tokens of decoding step `step` from float32 logits `(R, V)`, as the in-process loop
    chooses them (`decoding.make_selector`): `sampler` "greedy" or "sample" (checked
    values, `checks.check_sampling`), `seed` int32 `(2,)` (`prompts.make_seed`),
    `rows` the batch rows the logits belong to (their noise). Returns int32 `(R,)`."""
    logits = _clean(logits)
    greedy = np.argmax(logits, axis=-1).astype(np.int32)
    if sampler == "greedy" or temperature < MIN_TEMPERATURE:
        return greedy
    scaled = logits / np.float32(temperature)
    scaled = _top_p(_top_k(scaled, int(top_k)), float(top_p))
    noise = uniform_noise(split_seed(seed, step), np.asarray(rows), logits.shape[-1])
    gumbel = -np.log(-np.log(noise))
    return np.argmax(scaled + gumbel, axis=-1).astype(np.int32)


def constrain(logits, step, constraints, max_new_tokens, prompt_length):
    """One row's logits `(1, V)` with a request's `TokenConstraints` applied, in NumPy, as
    `constraints.apply_constraints` applies them in process: suppressed ids −∞ at every step;
    the forced BOS the only choice at step 0 of a one-token prompt; the forced EOS the only
    choice at step `max_new_tokens - 1`."""
    if not constraints.active:
        return logits
    logits = np.array(logits, np.float32)
    if constraints.suppressed_ids:
        logits[..., list(constraints.suppressed_ids)] = MASK_VALUE
    for token, acts in (
        (constraints.forced_bos_id, step == 0 and prompt_length == 1),
        (constraints.forced_eos_id, step == max_new_tokens - 1),
    ):
        if token is not None and acts:
            logits[...] = MASK_VALUE
            logits[..., token] = 0.0
    return logits
