"""Token samplers: pure, stateless, compilable functions over logits (every backend).

Every function takes float32 logits `[batch, vocab]` and returns int32 token
ids `[batch]` (or filtered logits). Randomness comes only from an explicit
`seed` (int32 tensor of shape `[2]`), so a call is a deterministic function
of its inputs and there is no RNG state variable to save, restore or share
between requests. `temperature`, `top_k` and `top_p` may be Python numbers or
tensors (scalars, or `[batch]` for one value per row), so they can be request
inputs of a TF-Serving signature; the code never branches in Python on their
values.

The random stream is written in `keras.ops` integer arithmetic, the same on
TensorFlow, JAX and PyTorch, compiled or not: a counter-based hash of
(seed, row, token id) gives one uniform number per logit, and the draw is the
Gumbel-max trick (see `sample`). `keras.random` cannot serve here: its seeded
streams differ per backend and it takes an int or a `SeedGenerator` (a state
variable), not a seed tensor. Same seed and same logits → same token on every
backend; the logits of one model differ across backends by float rounding
only, so seeded sampling (like greedy decoding) gives the same tokens unless
two candidates are tied to that rounding.
"""

import keras
import numpy as np
from keras import ops

from keras_tfm.checks import SAMPLERS, check_sampling_args

#: Tensors of any backend (and numbers) accepted by the samplers.
TensorLike = object

#: Value given to filtered-out logits: a large negative *finite* float32
#: (half of float32's most negative value), so `x - max(x)` never overflows to
#: -inf/NaN and filtered tokens get probability exactly 0.
MASK_VALUE = float(np.finfo(np.float32).min) / 2.0

#: Temperatures below this are treated as 0, i.e. greedy decoding.
MIN_TEMPERATURE = 1e-6


def _is_python_number(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _per_row(value, dtype):
    """Scalar or `[batch]` argument → tensor broadcastable against `[batch, vocab]`."""
    return ops.reshape(ops.cast(value, dtype), (-1, 1))


def _is_concrete(x):
    """Whether `x` holds values now (eager), not a symbol of a function being traced."""
    if not hasattr(x, "shape") or isinstance(x, np.ndarray):
        return True
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.executing_eagerly()
    if backend == "jax":
        import jax

        return not isinstance(x, jax.core.Tracer)
    return True


def _logits(logits, check=True):
    """float32 `[batch, vocab]` logits with NaN entries replaced by `MASK_VALUE`.

    NaN logits (a diverged model) would otherwise be drawn or chosen; eagerly
    they raise a ValueError naming `logits`, and inside a decoding loop
    (`check=False`, and wherever no error can be raised) a NaN entry is never
    chosen: a row with some NaN samples among the others, an all-NaN row
    yields id 0.
    """
    logits = ops.cast(logits, "float32")
    if len(logits.shape) != 2:
        raise ValueError(f"`logits` must have rank 2 `[batch, vocab]`; received shape {tuple(logits.shape)}.")
    nan = ops.isnan(logits)
    if check and _is_concrete(logits) and bool(ops.convert_to_numpy(ops.any(nan))):
        raise ValueError("`logits` hold NaN values (the model diverged or its weights are NaN).")
    return ops.where(nan, MASK_VALUE, logits)


def greedy(logits: TensorLike, *, check_nan: bool = True):
    """Most likely token of every row.

        token_b = argmax_v logits[b, v]   (lowest index on ties)

    Args:
        logits: float `[batch, vocab]`.
        check_nan: raise on NaN logits when they hold values (eager); the
            decoding loops pass False (a NaN entry is then never chosen).

    Returns:
        int32 `[batch]`.
    """
    return ops.cast(ops.argmax(_logits(logits, check_nan), axis=-1), "int32")


def _sorted_descending(logits):
    return ops.flip(ops.sort(logits, axis=-1), axis=-1)


def filter_top_k(logits: TensorLike, k: int | TensorLike):
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
    return _top_k(_logits(logits), k)


def _top_k(logits, k):
    if _is_python_number(k) and (k <= 0):
        return logits
    vocab = ops.shape(logits)[-1]
    k = _per_row(k, "int32")
    k = ops.where(ops.logical_or(k <= 0, k > vocab), vocab, k)
    kth = ops.take_along_axis(
        _sorted_descending(logits), ops.broadcast_to(k - 1, (ops.shape(logits)[0], 1)), axis=-1
    )
    return ops.where(logits >= kth, logits, MASK_VALUE)


def filter_top_p(logits: TensorLike, p: float | TensorLike):
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
    return _top_p(_logits(logits), p)


def _top_p(logits, p):
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


# --------------------------------------------------------------------------- random stream
def _as_int32(value):
    """An unsigned 32-bit constant as the int32 with the same bits."""
    return value - (1 << 32) if value >= 1 << 31 else value


_GOLDEN = _as_int32(0x9E3779B9)


def _shift_right(x, bits):
    """Logical right shift of int32 bits (the arithmetic shift, sign bits masked off)."""
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def _mix(x):
    """A 32-bit integer hash ("lowbias32": xor-shift / multiply rounds) on int32
    tensors; multiplication wraps modulo 2^32 on every backend, so the bits
    are the same everywhere."""
    x = ops.bitwise_xor(x, _shift_right(x, 16))
    x = x * _as_int32(0x7FEB352D)
    x = ops.bitwise_xor(x, _shift_right(x, 15))
    x = x * _as_int32(0x846CA68B)
    return ops.bitwise_xor(x, _shift_right(x, 16))


def _check_seed(seed):
    seed = ops.convert_to_tensor(seed)
    if tuple(seed.shape) != (2,):
        raise ValueError(f"`seed` must be an int tensor of shape [2]; received shape {tuple(seed.shape)}.")
    return ops.cast(seed, "int32")


def split_seed(seed: TensorLike, step: int | TensorLike):
    """Derives an independent per-step seed, statelessly.

        seed_step = (h(s0 ⊕ h(step + φ)), h(s1 ⊕ h(step ⊕ s0)))

    with `h` a 32-bit integer hash and φ = 0x9E3779B9 (int32 arithmetic, the
    same bits on every backend). Use it inside a decoding loop (`step` may be
    the loop counter tensor) so every step draws fresh randomness from one
    request seed.

    Args:
        seed: int32 tensor `[2]`.
        step: int or int tensor scalar.

    Returns:
        int32 tensor `[2]`.
    """
    seed = _check_seed(seed)
    step = ops.cast(step, "int32")
    first = _mix(ops.bitwise_xor(seed[0], _mix(step + _GOLDEN)))
    second = _mix(ops.bitwise_xor(seed[1], _mix(ops.bitwise_xor(step, seed[0]))))
    return ops.stack([first, second])


def uniform_noise(seed: TensorLike, shape: tuple[int, int]):
    """Uniform float32 numbers in (0, 1), one per entry of a `[rows, columns]`
    array, a pure function of `seed` (int32 `[2]`) and the entry's indices:

        key_r  = h(h(s0 ⊕ φ) ⊕ s1 + h(r))
        bits   = h(key_r ⊕ h(c + φ))                    (32 bits)
        u[r, c] = (2 · (bits >> 9) + 1) / 2^24          (24 exact bits)

    Every step is int32 arithmetic or an exact float32 operation, so the
    numbers are bit-identical on every backend, compiled or not.
    """
    seed = _check_seed(seed)
    rows = ops.arange(shape[0], dtype="int32")
    columns = ops.arange(shape[1], dtype="int32")
    key = ops.bitwise_xor(_mix(ops.bitwise_xor(seed[0], _GOLDEN)), seed[1])
    row_keys = _mix(key + _mix(rows))
    bits = _mix(ops.bitwise_xor(row_keys[:, None], _mix(columns + _GOLDEN)[None, :]))
    return (ops.cast(_shift_right(bits, 9), "float32") * 2.0 + 1.0) * (1.0 / (1 << 24))


def sample(
    logits: TensorLike,
    seed: TensorLike,
    temperature: float | TensorLike = 1.0,
    top_k: int | TensorLike = 0,
    top_p: float | TensorLike = 1.0,
    *,
    check_nan: bool = True,
):
    """Temperature / top-k / top-p sampling of one token per row.

        z  = logits / T
        z  = filter_top_k(z, top_k)      (top_k = 0: disabled)
        z  = filter_top_p(z, top_p)      (top_p = 1: disabled)
        token = argmax_v (z_v + g_v),  g_v = -log(-log u_v)   (Gumbel-max:
                token ~ Categorical(softmax(z)); u = `uniform_noise(seed)`)
        token = argmax(logits)  where T < 1e-6   (greedy, chosen per row by `where`)

    Arguments may be Python values (checked with `check_sampling_args`; a
    Python `top_k` larger than the static vocabulary is refused) or tensors
    (scalar or `[batch]`, not checked: top_k <= 0 or >= vocab and top_p >= 1
    disable their filter). NaN logits: see `_logits` (raise eagerly unless
    `check_nan` is False, never sampled).

    Args:
        logits: float32 `[batch, vocab]` (other float dtypes are cast).
        seed: int32 tensor `[2]`; same seed and inputs → same tokens, on
            every backend.
        temperature: float >= 0.
        top_k: int >= 0.
        top_p: float in (0, 1].
        check_nan: as in `greedy`.

    Returns:
        int32 `[batch]`.
    """
    check_sampling_args(
        temperature if _is_python_number(temperature) else 1.0,
        top_k if _is_python_number(top_k) else 0,
        top_p if _is_python_number(top_p) else 1.0,
        vocabulary_size=logits.shape[-1] if len(logits.shape) == 2 else None,
    )
    logits = _logits(logits, check_nan)
    seed = _check_seed(seed)
    temperature = _per_row(temperature, "float32")
    is_greedy = temperature < MIN_TEMPERATURE
    scaled = logits / ops.where(is_greedy, 1.0, temperature)
    scaled = _top_p(_top_k(scaled, top_k), top_p)
    noise = uniform_noise(seed, (ops.shape(logits)[0], logits.shape[-1]))
    gumbel = -ops.log(-ops.log(noise))
    sampled = ops.cast(ops.argmax(scaled + gumbel, axis=-1), "int32")
    chosen = ops.cast(ops.argmax(logits, axis=-1), "int32")
    return ops.where(ops.squeeze(is_greedy, axis=-1), chosen, sampled)


# --------------------------------------------------------------------------- the loops' chooser
def choose_token(logits, step, seed, temperature, top_k, top_p):
    """One token per row at decoding step `step`: greedy when every row's `temperature` is below
    1e-6 (decided at run time, so a served request picks it), else `sample` with
    `split_seed(seed, step)` (which is greedy for such rows too). NaN
    logits are never chosen (the loops cannot raise)."""
    return ops.cond(
        ops.all(ops.cast(temperature, "float32") < MIN_TEMPERATURE),
        lambda: greedy(logits, check_nan=False),
        lambda: sample(logits, split_seed(seed, step), temperature, top_k, top_p, check_nan=False),
    )


def make_selector(sampler, seed, temperature, top_k, top_p, choose=choose_token):
    """`select(logits, step) -> int32 (batch,)`, the token chooser of the decoding loops.

    Args:
        sampler: "greedy" (argmax; the other arguments are unused) or "sample"
            (`choose`: greedy at temperature 0, else seeded temperature / top-k / top-p).
        seed: int32 `(2,)`; temperature, top_k, top_p: scalars or `(batch,)`.
        choose: the function `choose(logits, step, seed, temperature, top_k, top_p)`
            (an exporter passes one traced function shared by all its loops).
    """
    if sampler == "greedy":
        return lambda logits, step: greedy(logits, check_nan=False)
    if sampler != "sample":
        raise ValueError(f"Unknown `sampler` {sampler!r}; expected one of {list(SAMPLERS)}.")
    seed = ops.cast(seed, "int32")
    return lambda logits, step: choose(logits, step, seed, temperature, top_k, top_p)
