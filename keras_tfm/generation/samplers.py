"""Token samplers: pure, stateless, XLA-compilable functions over logits.

Every function takes float32 logits `[batch, vocab]` and returns int32 token
ids `[batch]` (or filtered logits). Randomness comes only from an explicit
`seed` (int32 tensor of shape `[2]`) through TensorFlow's stateless RNG, so a
call is a deterministic function of its inputs and there is no RNG state
variable to save, restore or share between requests. `temperature`, `top_k`
and `top_p` may be Python numbers or tensors (scalars, or `[batch]` for one
value per row), so they can be request inputs of a TF-Serving signature; the
code never branches in Python on their values.

`keras.random` only accepts an int or a `SeedGenerator` (a state variable)
as seed, so the categorical draw and the seed folding use
`tf.random.stateless_categorical` / `tf.random.experimental.stateless_fold_in`;
everything else is `keras.ops`.

Note: a stateless draw is reproducible for a given seed on a given device and
compilation mode; XLA (`jit_compile=True`) and the non-XLA kernels may draw
different tokens for the same seed.
"""

import numpy as np
import tensorflow as tf
from keras import ops

from keras_tfm.checks import check_float, check_int

TensorLike = tf.types.experimental.TensorLike

#: Value given to filtered-out logits: a large negative *finite* float32
#: (half of float32's most negative value), so `x - max(x)` never overflows to
#: -inf/NaN and filtered tokens get probability exactly 0.
MASK_VALUE = float(np.finfo(np.float32).min) / 2.0

#: Temperatures below this are treated as 0, i.e. greedy decoding.
MIN_TEMPERATURE = 1e-6

#: The `sampler` names of the decoding loops: `greedy`, or `sample` (temperature,
#: top-k and top-p are arguments of `sample`; each filter is off at its default).
SAMPLERS = ("greedy", "sample")


def check_sampling_args(
    temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, vocabulary_size: int | None = None
) -> tuple[float, int, float]:
    """Validates Python sampling arguments before they reach a graph.

    Rules (the same for `generate`, `sample` and the served `generate`
    signature, which checks its tensor inputs the same way):

    * `temperature` 0 (or below 1e-6) means greedy decoding; NaN, inf and
      negative values are refused.
    * `top_k` 0 disables the filter; `top_k` equal to the vocabulary size
      keeps every token (no filter); a Python `top_k` *larger* than the
      vocabulary is refused (it is almost always a mistake: the model has
      fewer tokens than asked for). A tensor `top_k` cannot be checked
      inside a compiled graph and larger values then mean "no filter".
    * `top_p` must be in (0, 1]; 1 disables the filter.

    Args:
        temperature: float >= 0 (values < 1e-6 mean greedy).
        top_k: int >= 0 (0 disables top-k filtering), at most
            `vocabulary_size` when that is given.
        top_p: float in (0, 1] (1 disables nucleus filtering).
        vocabulary_size: the model's vocabulary size, or None (not checked).

    Returns:
        The tuple `(float(temperature), int(top_k), float(top_p))`.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: an argument is out of range.
    """
    temperature = check_float("temperature", temperature, low=0.0)
    top_k = check_int("top_k", top_k, minimum=0, maximum=vocabulary_size, maximum_name="the vocabulary size")
    top_p = check_float("top_p", top_p, low=0.0, high=1.0, low_open=True)
    return float(temperature), int(top_k), float(top_p)


def _is_python_number(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _per_row(value, dtype):
    """Scalar or `[batch]` argument → tensor broadcastable against `[batch, vocab]`."""
    return ops.reshape(ops.cast(value, dtype), (-1, 1))


def _logits(logits):
    """float32 `[batch, vocab]` logits with NaN entries replaced by `MASK_VALUE`.

    NaN logits (a diverged model) would make `stateless_categorical` return
    the out-of-range id `vocab`; eagerly they raise a ValueError naming
    `logits`, and inside a compiled loop (where no error can be raised) a NaN
    entry is never chosen: a row with some NaN samples among the others, an
    all-NaN row yields id 0.
    """
    logits = ops.cast(logits, "float32")
    if len(logits.shape) != 2:
        raise ValueError(f"`logits` must have rank 2 `[batch, vocab]`; received shape {tuple(logits.shape)}.")
    nan = ops.isnan(logits)
    if tf.executing_eagerly() and bool(ops.convert_to_numpy(ops.any(nan))):
        raise ValueError("`logits` hold NaN values (the model diverged or its weights are NaN).")
    return ops.where(nan, MASK_VALUE, logits)


def greedy(logits: TensorLike) -> tf.Tensor:
    """Most likely token of every row.

        token_b = argmax_v logits[b, v]   (lowest index on ties)

    Args:
        logits: float `[batch, vocab]`.

    Returns:
        int32 `[batch]`.
    """
    return ops.cast(ops.argmax(_logits(logits), axis=-1), "int32")


def _sorted_descending(logits):
    return ops.flip(ops.sort(logits, axis=-1), axis=-1)


def filter_top_k(logits: TensorLike, k: int | TensorLike) -> tf.Tensor:
    """Keeps the `k` largest logits of every row, masks the others.

        τ_b = k-th largest logits[b, :]
        out[b, v] = logits[b, v] if logits[b, v] >= τ_b else MASK_VALUE

    `k` <= 0 or `k` >= vocab disables the filter. Implemented with a full sort
    and a gather of the k-th value, so `k` may be a tensor (XLA needs no
    static `k`). Tokens tied with the k-th value are all kept.

    Args:
        logits: float32 `[batch, vocab]`.
        k: int, or int tensor scalar / `[batch]`.

    Returns:
        float32 `[batch, vocab]`.
    """
    logits = _logits(logits)
    if _is_python_number(k) and (k <= 0):
        return logits
    vocab = ops.shape(logits)[-1]
    k = _per_row(k, "int32")
    k = ops.where(ops.logical_or(k <= 0, k > vocab), vocab, k)
    kth = ops.take_along_axis(
        _sorted_descending(logits), ops.broadcast_to(k - 1, (ops.shape(logits)[0], 1)), axis=-1
    )
    return ops.where(logits >= kth, logits, MASK_VALUE)


def filter_top_p(logits: TensorLike, p: float | TensorLike) -> tf.Tensor:
    """Nucleus filter: keeps the smallest set of top tokens with mass >= `p`.

    With probabilities π = softmax(logits) sorted in decreasing order
    π_(1) >= π_(2) >= ..., token (j) is kept iff the mass strictly before it is
    below `p`:

        keep (j)  ⇔  Σ_{i<j} π_(i) < p        (always true for j = 1)
        out[b, v] = logits[b, v] if kept else MASK_VALUE

    `p` >= 1 disables the filter; the top-1 token is always kept (so `p` <= 0
    degenerates to greedy). Implemented by thresholding at the smallest kept
    logit, so tokens tied with it are kept too.

    Args:
        logits: float32 `[batch, vocab]`.
        p: float, or float tensor scalar / `[batch]`.

    Returns:
        float32 `[batch, vocab]`.
    """
    logits = _logits(logits)
    if _is_python_number(p) and p >= 1.0:
        return logits
    p = _per_row(p, "float32")
    sorted_logits = _sorted_descending(logits)
    sorted_probs = ops.softmax(sorted_logits, axis=-1)
    mass_before = ops.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep = mass_before < p
    num_keep = ops.maximum(ops.sum(ops.cast(keep, "int32"), axis=-1, keepdims=True), 1)
    threshold = ops.take_along_axis(sorted_logits, num_keep - 1, axis=-1)
    filtered = ops.where(logits >= threshold, logits, MASK_VALUE)
    return ops.where(p >= 1.0, logits, filtered)


def _check_seed(seed):
    seed = ops.convert_to_tensor(seed)
    if tuple(seed.shape) != (2,):
        raise ValueError(f"`seed` must be an int tensor of shape [2]; received shape {tuple(seed.shape)}.")
    return ops.cast(seed, "int32")


def split_seed(seed: TensorLike, step: int | TensorLike) -> tf.Tensor:
    """Derives an independent per-step seed, statelessly.

        seed_step = stateless_fold_in(seed, step)

    Use it inside a decoding loop (`step` may be the loop counter tensor) so
    every step draws fresh randomness from one request seed.

    Args:
        seed: int32 tensor `[2]`.
        step: int or int tensor scalar.

    Returns:
        int32 tensor `[2]`.
    """
    seed = _check_seed(seed)
    folded = tf.random.experimental.stateless_fold_in(seed, ops.cast(step, "int32"))
    return ops.cast(folded, "int32")


def sample(
    logits: TensorLike,
    seed: TensorLike,
    temperature: float | TensorLike = 1.0,
    top_k: int | TensorLike = 0,
    top_p: float | TensorLike = 1.0,
) -> tf.Tensor:
    """Temperature / top-k / top-p sampling of one token per row.

        z  = logits / T
        z  = filter_top_k(z, top_k)      (top_k = 0: disabled)
        z  = filter_top_p(z, top_p)      (top_p = 1: disabled)
        token ~ Categorical(softmax(z))  (stateless, from `seed`)
        token = argmax(logits)  where T < 1e-6   (greedy, chosen per row by `where`)

    Arguments may be Python values (checked with `check_sampling_args`; a
    Python `top_k` larger than the static vocabulary is refused) or tensors
    (scalar or `[batch]`, not checked: top_k <= 0 or >= vocab and top_p >= 1
    disable their filter). NaN logits: see `_logits` (raise eagerly, never
    sampled inside a compiled loop).

    Args:
        logits: float32 `[batch, vocab]` (other float dtypes are cast).
        seed: int32 tensor `[2]`; same seed and inputs → same tokens.
        temperature: float >= 0.
        top_k: int >= 0.
        top_p: float in (0, 1].

    Returns:
        int32 `[batch]`.
    """
    check_sampling_args(
        temperature if _is_python_number(temperature) else 1.0,
        top_k if _is_python_number(top_k) else 0,
        top_p if _is_python_number(top_p) else 1.0,
        vocabulary_size=logits.shape[-1] if len(logits.shape) == 2 else None,
    )
    logits = _logits(logits)
    seed = _check_seed(seed)
    temperature = _per_row(temperature, "float32")
    is_greedy = temperature < MIN_TEMPERATURE
    scaled = logits / ops.where(is_greedy, 1.0, temperature)
    scaled = filter_top_k(scaled, top_k)
    scaled = filter_top_p(scaled, top_p)
    sampled = tf.random.stateless_categorical(scaled, 1, seed=seed, dtype=tf.int32)
    sampled = ops.squeeze(sampled, axis=-1)
    return ops.where(ops.squeeze(is_greedy, axis=-1), greedy(logits), sampled)
