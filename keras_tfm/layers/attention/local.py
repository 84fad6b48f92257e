"""Sliding-window (local) attention: `attention_impl="local"`.

Query i attends to the keys j with |i - j| ≤ w (`window=w`), or, with
`causal=True`, to i - w ≤ j ≤ i; optionally the first `global_tokens=g`
positions are global (Longformer-style): they attend to every key and every
query attends to them.

Blocked computation, O(T·w) time and memory: the sequence is split into blocks
of w queries; block n attends to the keys of blocks n-1, n, n+1 (causal: n-1,
n), i.e. a `(w, 3w)` score block, gathered from K and V without ever forming a
T × T matrix. The band (and the window edges inside it) is masked exactly, the
g global keys are appended to every block's keys, and the g global queries are
computed as ordinary rows over all keys (O(g·T)). Softmax in float32, fully
masked rows give zeros, as in the core (`core.py`).

Any mask and bias of the core's contract are supported: only the
band entries of a full (Tq, Tk) mask / bias are read (gathered blockwise), and
key-padding masks `(B, 1, Tk)` are broadcast. Causal masks passed by the layers
are therefore honoured even without `causal=True`; `causal=True` additionally
skips the future block (2w instead of 3w keys per block) and applies the
causal restriction itself. Self-attention only (query_length == key_length).

A `ToeplitzBias` (ALiBi / relative positions, as the layers pass it) is read
on the band only: within a block the key − query offset does not depend on
the block, so the whole band bias is one `(H, w, nkw)` gather.

Attention-weight dropout is applied to the banded weights; `return_attention_scores`
raises a `ValueError` (the T × T weights are never formed). Written with
`keras.ops`: runs on the TensorFlow, JAX and PyTorch backends.
"""

from typing import Any, NamedTuple

from keras import ops

from keras_tfm.checks import check_non_negative_int, check_positive_int
from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import static_or_dynamic_length
from keras_tfm.layers.attention.masks import MASK_FILL_VALUE, expand_mask
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias, expand_bias


def _band(x4, nb, w, nkw, t, fill):
    """Gathers the band entries of a rank-4 `(xb, xh, Tq|1, Tk|1)` tensor.

    Returns `(xb, xh, nb, w|1, nkw|1)` with entry `[.., n, r, c]` = x at query
    `n*w + r` and key `(n-1)*w + c` (`fill` outside the sequence).
    """
    xq, xk = x4.shape[2], x4.shape[3]
    if xq != 1:
        x4 = ops.pad(x4, [[0, 0], [0, 0], [0, nb * w - t], [0, 0]], constant_values=fill)
        sh = ops.shape(x4)
        x4 = ops.reshape(x4, (sh[0], sh[1], nb, w, sh[3]))
    else:
        x4 = x4[:, :, :, None, :]
    if xk == 1:
        return x4
    x4 = ops.pad(x4, [[0, 0], [0, 0], [0, 0], [0, 0], [w, (nb + 2) * w - w - t]], constant_values=fill)
    idx = ops.arange(nb, dtype="int32")[:, None] * w + ops.arange(nkw, dtype="int32")[None, :]  # (nb, nkw)
    if xq != 1:
        return ops.take_along_axis(x4, idx[None, None, :, None, :], axis=4)  # (xb, xh, nb, w, nkw)
    return ops.take(x4[:, :, 0, 0, :], idx, axis=2)[:, :, :, None, :]


def _rows(x4, nb, w, t, fill, cols):
    """Rows of `(xb, xh, Tq|1, Tk|1)` blocked as `(xb, xh, nb|1, w|1, cols)`."""
    if x4.shape[3] != 1:
        x4 = x4[:, :, :, :cols]
    if x4.shape[2] == 1:
        return x4[:, :, :, None, :]
    x4 = ops.pad(x4, [[0, 0], [0, 0], [0, nb * w - t], [0, 0]], constant_values=fill)
    sh = ops.shape(x4)
    return ops.reshape(x4, (sh[0], sh[1], nb, w, sh[3]))


def _toeplitz_at(bias, t, offsets):
    """`ToeplitzBias` values at key − query `offsets` (int tensor), clipped to the
    table (out-of-range entries are masked by the caller): `(1, H|1, *offsets.shape)`."""
    index = ops.clip(offsets + (t - 1), 0, 2 * t - 2)
    return ops.take(ops.cast(bias.values, "float32"), index, axis=1)[None]


class _Band(NamedTuple):
    """The static layout of the band: `t` positions in `nb` blocks of `w` queries, each
    seeing `nkw` keys (2w causal, 3w otherwise) from key `(n - 1)·w` on; `g` global tokens."""

    t: Any
    w: int
    g: int
    nb: Any
    nkw: int
    causal: bool


@register_attention_impl("local")
def local_attention(inputs: AttentionInputs, window: int = 128, global_tokens: int = 0) -> tuple[Any, None]:
    """Sliding-window attention in O(T·window) (module docstring).

    Args:
        inputs: the call (`core.py`'s contract), self-attention only; weight dropout is
            applied to the banded weights, `return_attention_scores` is refused.
        window: positive int w: query i sees the keys j with |i - j| ≤ w (causal: i - w ≤ j ≤ i).
        global_tokens: non-negative int g: the first g positions attend to and are attended
            by every position.

    Returns:
        `(output, None)`: the float32 `(B, T, H, Dv)` output.

    Raises:
        ValueError: a bad `window` or `global_tokens`, query and key lengths that differ, or
            `return_attention_scores`.
    """
    inputs.refuse_weights("local", dropout=False)  # weight dropout is applied on the band
    check_positive_int("window", window)
    check_non_negative_int("global_tokens", global_tokens)
    query, key, value = inputs[:3]
    mask, bias, causal, scale = inputs.mask, inputs.bias, inputs.causal, inputs.score_scale()
    t = static_or_dynamic_length(query)
    tk = key.shape[1]
    if isinstance(t, int) and tk is not None and t != tk:
        raise ValueError(
            "attention_impl='local' is for self-attention (query_length == key_length); "
            f"received {t} and {tk}."
        )
    w = min(window, t) if isinstance(t, int) else window
    g = min(global_tokens, t) if isinstance(t, int) else global_tokens
    band = _Band(t, w, g, -(-t // w), 2 * w if causal else 3 * w, causal)
    batch = static_or_dynamic_length(query, 0)
    h, d, dv = query.shape[2], query.shape[3], value.shape[3]

    q = ops.cast(query, "float32") * scale
    k = ops.cast(key, "float32")
    v = ops.cast(value, "float32")
    mask4 = None if mask is None else expand_mask(mask)
    if bias is not None and not isinstance(bias, ToeplitzBias):
        bias = expand_bias(bias)  # rank 4; a ToeplitzBias is read on the band only

    # ------------------------------------------------ banded (local) part
    qb = ops.reshape(ops.pad(q, [[0, 0], [0, band.nb * w - t], [0, 0], [0, 0]]), (batch, band.nb, w, h, d))
    kw, vw = _windows(band, k, batch, h, d), _windows(band, v, batch, h, dv)
    s, valid = _band_scores(band, qb, kw, k, mask4, bias)
    s = ops.where(valid, s, MASK_FILL_VALUE)
    p = ops.softmax(s, axis=-1)
    p = _weight_dropout(inputs, ops.where(valid, p, 0.0))
    out = ops.einsum("bhnqk,bnkhe->bnqhe", p[..., g:], vw)
    if g:
        out = out + ops.einsum("bhnqk,bkhe->bnqhe", p[..., :g], v[:, :g])
    out = ops.reshape(out, (batch, band.nb * w, h, dv))[:, :t]
    if g:
        out = ops.concatenate([_global_queries(band, inputs, q, k, v, mask4, bias), out[:, g:]], axis=1)
    return out, None


def _weight_dropout(inputs, p):
    """The float32 weights `p` after the call's weight dropout (in the value dtype), if any."""
    if inputs.dropout is None:
        return p
    return ops.cast(inputs.dropout(ops.cast(p, inputs.value.dtype), training=inputs.training), "float32")


def _windows(band, x, batch, heads, dim):
    """The keys (or values) `(B, T, H, dim)` each query block sees: `(B, nb, nkw, H, dim)`."""
    nb, w = band.nb, band.w
    x = ops.pad(x, [[0, 0], [w, (nb + 2) * w - w - band.t], [0, 0], [0, 0]])
    x = ops.reshape(x, (batch, nb + 2, w, heads, dim))
    parts = [x[:, 0:nb], x[:, 1 : nb + 1]] + ([] if band.causal else [x[:, 2 : nb + 2]])
    return ops.concatenate(parts, axis=2)


def _band_scores(band, qb, kw, k, mask4, bias):
    """Scores and visibility of every query block: `(B, H, nb, w, g + nkw)` float32 and bool,
    the g global keys first, then the block's band of keys."""
    t, w, g, nb, nkw = band.t, band.w, band.g, band.nb, band.nkw
    s = ops.einsum("bnqhd,bnkhd->bhnqk", qb, kw)  # (B, H, nb, w, nkw)
    qpos = ops.arange(nb, dtype="int32")[:, None, None] * w + ops.arange(w, dtype="int32")[None, :, None]
    kpos = (ops.arange(nb, dtype="int32")[:, None, None] - 1) * w + ops.arange(nkw, dtype="int32")[
        None, None, :
    ]
    rel = qpos - kpos
    valid = (kpos >= 0) & (kpos < t) & (kpos >= g) & (rel <= w)
    valid = valid & ((rel >= 0) if band.causal else (rel >= -w))
    valid = valid[None, None]  # (1, 1, nb, w, nkw)
    if isinstance(bias, ToeplitzBias):
        # Offset k - q = c - r - w inside every block: one (H, w, nkw) gather.
        offsets = ops.arange(nkw, dtype="int32")[None, :] - ops.arange(w, dtype="int32")[:, None] - w
        s = s + _toeplitz_at(bias, t, offsets)[:, :, None]
    elif bias is not None:
        s = s + _band(bias, nb, w, nkw, t, 0.0)
    if mask4 is not None:
        valid = ops.logical_and(valid, _band(mask4, nb, w, nkw, t, False))
    if not g:
        return s, valid
    # Every query also attends to the g global keys.
    sg = ops.einsum("bnqhd,bkhd->bhnqk", qb, k[:, :g])  # (B, H, nb, w, g)
    valid_g = ops.ones((1, 1, 1, 1, g), "bool")
    if band.causal:
        valid_g = (qpos >= ops.arange(g, dtype="int32")[None, None, :])[None, None]
    if isinstance(bias, ToeplitzBias):
        sg = sg + _toeplitz_at(bias, t, ops.arange(g, dtype="int32")[None, None, :] - qpos)
    elif bias is not None:
        sg = sg + _rows(bias, nb, w, t, 0.0, g)
    if mask4 is not None:
        valid_g = ops.logical_and(valid_g, _rows(mask4, nb, w, t, False, g))
    s = ops.concatenate([sg, s], axis=-1)
    valid = ops.concatenate(
        [ops.broadcast_to(valid_g, ops.shape(sg)), ops.broadcast_to(valid, ops.shape(s[..., g:]))], -1
    )
    return s, valid


def _global_queries(band, inputs, q, k, v, mask4, bias):
    """The output of the g global queries, ordinary rows over every key (O(g·T)): `(B, g, H, Dv)`."""
    t, g = band.t, band.g
    sq = ops.einsum("bqhd,bkhd->bhqk", q[:, :g], k)
    valid_q = None
    if band.causal:
        valid_q = (ops.arange(g, dtype="int32")[:, None] >= ops.arange(t, dtype="int32")[None, :])[None, None]
    if isinstance(bias, ToeplitzBias):
        sq = sq + _toeplitz_at(
            bias, t, ops.arange(t, dtype="int32")[None, :] - ops.arange(g, dtype="int32")[:, None]
        )
    elif bias is not None:
        sq = sq + (bias if bias.shape[2] == 1 else bias[:, :, :g])
    if mask4 is not None:
        mq = mask4 if mask4.shape[2] == 1 else mask4[:, :, :g]
        valid_q = mq if valid_q is None else ops.logical_and(valid_q, mq)
    if valid_q is not None:
        sq = ops.where(valid_q, sq, MASK_FILL_VALUE)
    pq = ops.softmax(sq, axis=-1)
    if valid_q is not None:
        pq = ops.where(valid_q, pq, 0.0)
    return ops.einsum("bhqk,bkhe->bqhe", _weight_dropout(inputs, pq), v)
