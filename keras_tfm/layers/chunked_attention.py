"""Memory-efficient exact attention: `attention_impl="chunked"`.

Exact softmax attention computed block by block with an online (streaming)
softmax, as in Rabe & Staats (2021), "Self-attention does not need O(n²)
memory", and FlashAttention (Dao et al., 2022):

    for each query chunk Q_i:
        m = -inf, l = 0, acc = 0
        for each key chunk (K_j, V_j):
            S = Q_i K_jᵀ · scale + B_ij          (masked entries excluded)
            m' = max(m, rowmax S);  P = exp(S - m')
            l = l·exp(m - m') + rowsum P;  acc = acc·exp(m - m') + P V_j;  m = m'
        O_i = acc / l;   L_i = m + log l         (log-sum-exp, kept for backward)

Only `O` and the per-row log-sum-exp `L` (O(T)) are kept for the backward
pass; `tf.custom_gradient` recomputes every score block there
(P = exp(S - L), dV += Pᵀ dO, dS = P ⊙ (dO Vᵀ - rowsum(dO ⊙ O)), dQ += dS K,
dK += dSᵀ Q, dB = dS), so neither the forward nor the backward pass ever holds
more than one `(B, H, query_chunk, key_chunk)` block of scores. Both loops are
`tf.while_loop`s (parallel_iterations=1), which run eagerly, in `tf.function`
and under XLA (`jit_compile=True`) and keep the graph size independent of T.

All arithmetic is float32 (inputs are cast once; gradients are cast back), the
mask/bias contract is the one of `attention_core`, and a query whose keys are
all masked gets a zero output and zero gradients (never NaN).

Options (`attention_options`): `query_chunk_size` (default 512) and
`key_chunk_size` (default 1024), each clipped to the sequence length; a ragged
last chunk is zero-padded and its padded keys masked out. `causal` (default
False): apply the causal restriction (key j ≤ query i, self-attention) inside
the kernel and skip the key blocks above the diagonal — about half the work;
the layers' mask (which already contains the causal mask of a causal layer) is
still applied, so `causal=True` is an optimisation hint that must only be set
on causal layers.

The full weight matrix is never formed, so `return_weights=True` and attention
dropout during training raise a `ValueError`.
"""

import math

import tensorflow as tf

from keras_tfm.layers.attention_core import _expand_bias, _expand_mask, register_attention_impl

# Finite "minus infinity" for the running max; exp(_NEG - finite) == 0 in float32.
_NEG = -1e30


def check_no_weights(impl, dropout, training, return_weights):
    """Raises for the requests an implementation without a weight matrix can't serve."""
    if return_weights:
        raise ValueError(
            f"attention_impl={impl!r} never materialises the attention weights, so "
            "`return_weights=True` (`return_attention_scores=True`) is not supported; "
            "use attention_impl='standard' to inspect the weights."
        )
    rate = getattr(dropout, "rate", 0.0) if dropout is not None else 0.0
    if rate and training:
        raise ValueError(
            f"attention_impl={impl!r} does not support attention-weight `dropout` "
            f"(rate={rate}) in training; set the layer's `dropout=0.0` (or "
            "`attention_dropout=0.0` on TransformerBlock) or use attention_impl='standard'."
        )


def _static_or_dynamic(x, axis):
    d = x.shape[axis]
    return d if d is not None else tf.shape(x)[axis]


def _pad_axis(x, axis, pad, value=0):
    """Pads `pad` (int or scalar tensor) entries at the end of `axis`."""
    if isinstance(pad, int) and pad == 0:
        return x
    paddings = [[0, 0] for _ in range(len(x.shape))]
    paddings[axis] = [0, pad]
    return tf.pad(x, paddings, constant_values=value)


def _slice_axis(x, axis, start, size):
    """`x[..., start:start+size, ...]` on `axis` unless that axis broadcasts (1)."""
    if x.shape[axis] == 1:
        return x
    begin = [0] * len(x.shape)
    sizes = [-1] * len(x.shape)
    begin[axis] = start
    sizes[axis] = size
    return tf.slice(x, tf.stack(begin), sizes)


def _ceil_div(a, b):
    return -(-a // b) if isinstance(a, int) else (a + b - 1) // b


def _chunk_size(option, length, name):
    if isinstance(option, bool) or not isinstance(option, int) or option <= 0:
        raise ValueError(f"`{name}` must be a positive int; received {option!r}.")
    return min(option, length) if isinstance(length, int) else option


@register_attention_impl("chunked")
@tf.autograph.experimental.do_not_convert
def chunked_attention(
    query,
    key,
    value,
    mask=None,
    bias=None,
    scale=None,
    dropout=None,
    training=None,
    return_weights=False,
    query_chunk_size=512,
    key_chunk_size=1024,
    causal=False,
):
    """Exact attention in O(T) memory (forward and backward); see module docs."""
    check_no_weights("chunked", dropout, training, return_weights)
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be a bool; received {causal!r}.")
    if scale is None:
        scale = 1.0 / math.sqrt(float(query.shape[-1]))
    tq = _static_or_dynamic(query, 1)
    tk = _static_or_dynamic(key, 1)
    cq = _chunk_size(query_chunk_size, tq, "query_chunk_size")
    ck = _chunk_size(key_chunk_size, tk, "key_chunk_size")
    nq = _ceil_div(tq, cq)
    nk = _ceil_div(tk, ck)
    pad_q = nq * cq - tq
    pad_k = nk * ck - tk
    # Padded keys must be masked unless T is statically a multiple of the chunk.
    need_key_valid = not (isinstance(pad_k, int) and pad_k == 0)
    if causal and isinstance(tq, int) and isinstance(tk, int) and tq != tk:
        raise ValueError(
            "attention_impl='chunked' with causal=True needs query_length == key_length; "
            f"received {tq} and {tk} (pass a causal mask instead)."
        )

    mask4 = None
    if mask is not None:
        mask4 = _expand_mask(mask)
        if mask4.shape[2] != 1:
            mask4 = _pad_axis(mask4, 2, pad_q, False)
        if mask4.shape[3] != 1:
            mask4 = _pad_axis(mask4, 3, pad_k, False)

    def mask_block(i, j):
        m = None
        if mask4 is not None:
            m = _slice_axis(_slice_axis(mask4, 2, i * cq, cq), 3, j * ck, ck)
        if need_key_valid:
            valid = (j * ck + tf.range(ck)) < tk
            valid = valid[None, None, None, :]
            m = valid if m is None else tf.logical_and(m, valid)
        if causal:
            below = (i * cq + tf.range(cq))[:, None] >= (j * ck + tf.range(ck))[None, :]
            below = below[None, None]
            m = below if m is None else tf.logical_and(m, below)
        return m

    def key_chunks_for(i):
        # Key chunks holding a key visible to query chunk i (all of them unless causal).
        if not causal:
            return nk
        return tf.minimum(nk, ((i + 1) * cq + ck - 1) // ck)

    def first_query_chunk_for(j):
        # First query chunk that sees a key of chunk j (0 unless causal).
        return (j * ck) // cq if causal else 0

    def to_blocks(x, pad):
        # (B, T, H, D) -> float32 (B, H, T + pad, D)
        x = tf.transpose(tf.cast(x, tf.float32), [0, 2, 1, 3])
        return _pad_axis(x, 2, pad)

    q_dtype, k_dtype, v_dtype = query.dtype, key.dtype, value.dtype

    def run(q_in, k_in, v_in, bias_in=None):
        qh = to_blocks(q_in, pad_q) * scale
        kh = to_blocks(k_in, pad_k)
        vh = to_blocks(v_in, pad_k)
        bias4 = None
        if bias_in is not None:
            bias4 = _expand_bias(bias_in)
            if bias4.shape[2] != 1:
                bias4 = _pad_axis(bias4, 2, pad_q)
            if bias4.shape[3] != 1:
                bias4 = _pad_axis(bias4, 3, pad_k)
        batch = tf.shape(qh)[0]
        heads = qh.shape[1] if qh.shape[1] is not None else tf.shape(qh)[1]
        dv = vh.shape[-1]

        def scores(qc, i, j):
            kc = tf.slice(kh, tf.stack([0, 0, j * ck, 0]), [-1, -1, ck, -1])
            s = tf.matmul(qc, kc, transpose_b=True)
            if bias4 is not None:
                s = s + _slice_axis(_slice_axis(bias4, 2, i * cq, cq), 3, j * ck, ck)
            m = mask_block(i, j)
            if m is not None:
                s = tf.where(m, s, _NEG)
            return s, m, kc

        # ---------------------------------------------------------- forward
        def q_step(i, out_ta, lse_ta):
            qc = tf.slice(qh, tf.stack([0, 0, i * cq, 0]), [-1, -1, cq, -1])

            def k_step(j, m_run, l_run, acc):
                s, m, _ = scores(qc, i, j)
                vc = tf.slice(vh, tf.stack([0, 0, j * ck, 0]), [-1, -1, ck, -1])
                m_new = tf.maximum(m_run, tf.reduce_max(s, axis=-1))
                p = tf.exp(s - m_new[..., None])
                if m is not None:
                    p = tf.where(m, p, 0.0)
                alpha = tf.exp(m_run - m_new)
                l_run = l_run * alpha + tf.reduce_sum(p, axis=-1)
                acc = acc * alpha[..., None] + tf.matmul(p, vc)
                return j + 1, m_new, l_run, acc

            init = (
                tf.constant(0),
                tf.fill(tf.stack([batch, heads, cq]), _NEG),
                tf.zeros(tf.stack([batch, heads, cq])),
                tf.zeros(tf.stack([batch, heads, cq, dv])),
            )
            last = key_chunks_for(i)
            _, m_run, l_run, acc = tf.while_loop(lambda j, *_: j < last, k_step, init, parallel_iterations=1)
            has_keys = l_run > 0.0
            safe_l = tf.where(has_keys, l_run, 1.0)
            out = acc / safe_l[..., None]
            lse = tf.where(has_keys, m_run + tf.math.log(safe_l), 0.0)
            return i + 1, out_ta.write(i, out), lse_ta.write(i, lse)

        _, out_ta, lse_ta = tf.while_loop(
            lambda i, *_: i < nq,
            q_step,
            (
                tf.constant(0),
                tf.TensorArray(tf.float32, size=nq, element_shape=None),
                tf.TensorArray(tf.float32, size=nq, element_shape=None),
            ),
            parallel_iterations=1,
        )
        # (nq, B, H, cq, Dv) -> (B, H, nq*cq, Dv)
        out_h = tf.transpose(out_ta.stack(), [1, 2, 0, 3, 4])
        out_h = tf.reshape(out_h, tf.stack([batch, heads, nq * cq, dv]))
        lse = tf.reshape(tf.transpose(lse_ta.stack(), [1, 2, 0, 3]), tf.stack([batch, heads, nq * cq]))
        output = tf.transpose(out_h[:, :, :tq], [0, 2, 1, 3])

        # --------------------------------------------------------- backward
        def grad(d_out):
            do_h = to_blocks(d_out, pad_q)  # (B, H, Tq_pad, Dv)
            delta = tf.reduce_sum(do_h * out_h, axis=-1)  # rowsum(dO ⊙ O)
            d = qh.shape[-1]
            bias_dims = (
                None if bias4 is None else (bias4.shape[0], bias4.shape[1], bias4.shape[2], bias4.shape[3])
            )

            def reduce_to_bias(ds):
                axes = [a for a in range(4) if bias_dims[a] == 1]
                return tf.reduce_sum(ds, axis=axes, keepdims=True) if axes else ds

            def k_step(j, dq_all, dk_ta, dv_ta, db_ta, db_sum):
                vc = tf.slice(vh, tf.stack([0, 0, j * ck, 0]), [-1, -1, ck, -1])

                def q_step(i, dk, dv_acc, dq_all, db_row_ta, db_row_sum):
                    qc = tf.slice(qh, tf.stack([0, 0, i * cq, 0]), [-1, -1, cq, -1])
                    s, m, kc = scores(qc, i, j)
                    lse_c = tf.slice(lse, tf.stack([0, 0, i * cq]), [-1, -1, cq])
                    p = tf.exp(s - lse_c[..., None])
                    if m is not None:
                        p = tf.where(m, p, 0.0)
                    doc = tf.slice(do_h, tf.stack([0, 0, i * cq, 0]), [-1, -1, cq, -1])
                    dv_acc = dv_acc + tf.matmul(p, doc, transpose_a=True)
                    dp = tf.matmul(doc, vc, transpose_b=True)
                    delta_c = tf.slice(delta, tf.stack([0, 0, i * cq]), [-1, -1, cq])
                    ds = p * (dp - delta_c[..., None])
                    dk = dk + tf.matmul(ds, qc, transpose_a=True)
                    dq_all = tf.tensor_scatter_nd_add(dq_all, tf.reshape(i, [1, 1]), tf.matmul(ds, kc)[None])
                    if bias4 is not None:
                        db = reduce_to_bias(ds)
                        if bias_dims[2] == 1:
                            db_row_sum = db_row_sum + db
                        else:
                            db_row_ta = db_row_ta.write(i, db)
                    return i + 1, dk, dv_acc, dq_all, db_row_ta, db_row_sum

                i0 = tf.convert_to_tensor(first_query_chunk_for(j))
                db_row_ta = tf.TensorArray(tf.float32, size=nq, element_shape=None)
                if causal and bias4 is not None and bias_dims[2] != 1:
                    # Query chunks above the diagonal get zero bias gradients.
                    zero_db = tf.zeros_like(reduce_to_bias(tf.zeros(tf.stack([batch, heads, cq, ck]))))
                    _, db_row_ta = tf.while_loop(
                        lambda i, ta: i < i0,
                        lambda i, ta: (i + 1, ta.write(i, zero_db)),
                        (tf.constant(0), db_row_ta),
                    )
                zeros_k = tf.zeros(tf.stack([batch, heads, ck, d]))
                zeros_v = tf.zeros(tf.stack([batch, heads, ck, dv]))
                db_row_sum = (
                    tf.zeros([1])
                    if bias4 is None
                    else tf.zeros_like(reduce_to_bias(tf.zeros(tf.stack([batch, heads, cq, ck]))))
                )
                _, dk, dv_acc, dq_all, db_row_ta, db_row_sum = tf.while_loop(
                    lambda i, *_: i < nq,
                    q_step,
                    (
                        i0,
                        zeros_k,
                        zeros_v,
                        dq_all,
                        db_row_ta,
                        db_row_sum,
                    ),
                    parallel_iterations=1,
                )
                dk_ta = dk_ta.write(j, dk)
                dv_ta = dv_ta.write(j, dv_acc)
                if bias4 is not None:
                    if bias_dims[2] == 1:
                        db_col = db_row_sum  # (b, h, 1, ck | 1)
                    else:
                        # (nq, b, h, cq, c) -> (b, h, nq*cq, c)
                        rows = db_row_ta.stack()
                        sh = tf.shape(rows)
                        db_col = tf.reshape(
                            tf.transpose(rows, [1, 2, 0, 3, 4]), tf.stack([sh[1], sh[2], nq * cq, sh[4]])
                        )
                    if bias_dims[3] == 1:
                        db_sum = db_sum + db_col
                    else:
                        db_ta = db_ta.write(j, db_col)
                return j + 1, dq_all, dk_ta, dv_ta, db_ta, db_sum

            db_sum = tf.zeros([1])
            if bias4 is not None and bias_dims[3] == 1:
                rows = 1 if bias_dims[2] == 1 else nq * cq
                db_sum = tf.zeros(
                    tf.stack([batch if bias_dims[0] != 1 else 1, heads if bias_dims[1] != 1 else 1, rows, 1])
                )
            _, dq_all, dk_ta, dv_ta, db_ta, db_sum = tf.while_loop(
                lambda j, *_: j < nk,
                k_step,
                (
                    tf.constant(0),
                    tf.zeros(tf.stack([nq, batch, heads, cq, d])),
                    tf.TensorArray(tf.float32, size=nk, element_shape=None),
                    tf.TensorArray(tf.float32, size=nk, element_shape=None),
                    tf.TensorArray(tf.float32, size=nk, element_shape=None),
                    db_sum,
                ),
                parallel_iterations=1,
            )

            def from_chunks(x, n, c, length, dtype):
                # (n, B, H, c, D) -> (B, length, H, D)
                x = tf.transpose(x, [1, 2, 0, 3, 4])
                x = tf.reshape(x, tf.stack([batch, heads, n * c, tf.shape(x)[-1]]))
                return tf.cast(tf.transpose(x[:, :, :length], [0, 2, 1, 3]), dtype)

            dq = from_chunks(dq_all, nq, cq, tq, q_dtype) * tf.cast(scale, q_dtype)
            dk = from_chunks(dk_ta.stack(), nk, ck, tk, k_dtype)
            dvv = from_chunks(dv_ta.stack(), nk, ck, tk, v_dtype)
            if bias4 is None:
                return dq, dk, dvv
            if bias_dims[3] == 1:
                db = db_sum
            else:
                cols = db_ta.stack()  # (nk, b, h, r, ck)
                sh = tf.shape(cols)
                db = tf.reshape(tf.transpose(cols, [1, 2, 3, 0, 4]), tf.stack([sh[1], sh[2], sh[3], nk * ck]))
                db = db[:, :, :, :tk]
            if bias_dims[2] != 1:
                db = db[:, :, :tq, :]
            db = tf.cast(tf.reshape(db, tf.shape(bias_in)), bias_in.dtype)
            return dq, dk, dvv, db

        return output, grad

    if bias is None:

        @tf.custom_gradient
        def attend(q_in, k_in, v_in):
            return run(q_in, k_in, v_in)

        output = attend(query, key, value)
    else:
        bias = tf.convert_to_tensor(bias)
        if not bias.dtype.is_floating:
            bias = tf.cast(bias, tf.float32)

        @tf.custom_gradient
        def attend_bias(q_in, k_in, v_in, b_in):
            return run(q_in, k_in, v_in, b_in)

        output = attend_bias(query, key, value, bias)
    return output, None
