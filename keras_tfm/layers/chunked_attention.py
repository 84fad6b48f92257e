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
pass; `keras.ops.custom_gradient` recomputes every score block there
(P = exp(S - L), dV += Pᵀ dO, dS = P ⊙ (dO Vᵀ - rowsum(dO ⊙ O)), dQ += dS K,
dK += dSᵀ Q, dB = dS), so neither the forward nor the backward pass ever holds
more than one `(B, H, query_chunk, key_chunk)` block of scores. Both loops are
`keras.ops` loops (`fori_loop`; on TensorFlow a `tf.while_loop` with
`parallel_iterations=1`, so iterations never overlap), which run eagerly, in
`tf.function`, under XLA and under `jax.jit`, keep the graph size independent
of T, and run on the TensorFlow, JAX and PyTorch backends.

What a block costs beyond its matmuls is kept small, because the causal path
has as many blocks as the non-causal one, each half the size:
  * Q, K, V, dO, the outputs and the gradients are held as lists of row blocks
    (`row_blocks.BlockList`; a `TensorList` on TensorFlow), so reading a block or
    accumulating into dQ touches that block only, never a T-long buffer.
  * The row terms ride along in the matmuls through one extra feature column:
    [Q | 0]·[K | 1]ᵀ = S, P·[V | 1] = [P·V | rowsum P] in the forward;
    [Q | -L]·[K | 1]ᵀ = S - L and [dO | -δ]·[V | 1]ᵀ = dP - δ in the backward
    (δ = rowsum(dO ⊙ O)), which saves three elementwise passes per block.
  * Masks are additive (0 / -1e30); the diagonal blocks of the default square
    causal blocks share one precomputed fill.

Causal attention (`causal=True`, the flag the layers pass) skips the blocks
above the diagonal in the forward AND the backward pass (about half the work)
and builds the causal mask per block from indices; only the blocks that cross
the diagonal (and the ragged last key block) are masked at all. A
`ToeplitzBias` (ALiBi, T5 relative positions) is gathered per block from its
O(T) offset table, and its gradient is summed per block along the diagonals.
So no T × T tensor reaches this path from the layers; an explicit dense `mask`
or `bias` argument is still honoured (sliced per block).

All arithmetic is float32 (inputs are cast once; gradients are cast back), the
mask/bias contract is the one of `attention_core`, and a query whose keys are
all masked gets a zero output and zero gradients (never NaN).

Options (`attention_options`): `query_chunk_size` (default 512) and
`key_chunk_size` (default 1024, or `query_chunk_size` under `causal=True`), each
clipped to the sequence length; a ragged last chunk is zero-padded and its
padded keys masked out. Causal attention defaults to square blocks because the
blocks on the diagonal are computed in full and half wasted: with 512 × 1024
blocks at T = 8192 it computes 72 of 128 blocks (56 %), with 512 × 512 blocks
136 of 256 (53 %).

The full weight matrix is never formed, so `return_weights=True` and attention
dropout during training raise a `ValueError`.
"""

from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention_core import (
    ToeplitzBias,
    _expand_bias,
    _expand_mask,
    register_attention_impl,
    static_or_dynamic_length,
)
from keras_tfm.layers.row_blocks import (
    BlockList,
    augment,
    blocks_of,
    ceil_div,
    diagonal_sums,
    fori_loop,
    from_blocks,
    is_int,
    minimum,
    pad_axis,
)

# Finite "minus infinity" for masked scores and the running max; exp(_NEG - finite) == 0.
_NEG = -1e30


def _chunk_size(option, length, name):
    check_positive_int(name, option)
    return min(option, length) if is_int(length) else option


def _block(x4, i0, j0, cq, ck):
    """Rows `i0:i0+cq`, columns `j0:j0+ck` of a rank-4 tensor (broadcast axes kept)."""
    rows, cols = x4.shape[2] != 1, x4.shape[3] != 1
    return ops.slice(
        x4, (0, 0, i0 if rows else 0, j0 if cols else 0), (-1, -1, cq if rows else 1, ck if cols else 1)
    )


@register_attention_impl("chunked")
def chunked_attention(inputs, query_chunk_size=512, key_chunk_size=None):
    """Exact attention in O(T) memory (forward and backward); see module docs."""
    inputs.refuse_weights("chunked")
    query, key, value = inputs[:3]
    mask, bias, causal, scale = inputs.mask, inputs.bias, inputs.causal, inputs.score_scale()
    if key_chunk_size is None:
        key_chunk_size = query_chunk_size if causal else 1024
    tq = static_or_dynamic_length(query)
    tk = static_or_dynamic_length(key)
    cq = _chunk_size(query_chunk_size, tq, "query_chunk_size")
    ck = _chunk_size(key_chunk_size, tk, "key_chunk_size")
    nq, nk = ceil_div(tq, cq), ceil_div(tk, ck)
    pad_q, pad_k = nq * cq - tq, nk * ck - tk
    # Unless T is statically a multiple of the chunk, the last key block is masked.
    ragged_k = not (is_int(pad_k) and pad_k == 0)
    heads, d, dv = query.shape[2], query.shape[3], value.shape[3]
    batch = static_or_dynamic_length(query, 0)

    mask4 = None
    if mask is not None:
        mask4 = _expand_mask(mask)
        if mask4.shape[2] != 1:
            mask4 = pad_axis(mask4, 2, pad_q, False)
        if mask4.shape[3] != 1:
            mask4 = pad_axis(mask4, 3, pad_k, False)

    toeplitz = isinstance(bias, ToeplitzBias)
    if toeplitz:
        bias_in = ops.cast(bias.values, "float32")
        bias_heads = bias_in.shape[0]
        bias_shape = None
        # Padded offset table: entry q_pad - 1 + (j - i) for padded positions i, j.
        diag0 = ops.arange(ck, dtype="int32")[None, :] - ops.arange(cq, dtype="int32")[:, None]
        diag0 = diag0 + ops.cast(nq * cq - 1, "int32")
    elif bias is not None:
        bias_in = ops.cast(bias, "float32")
        bias_shape = ops.shape(bias_in)
        b4 = _expand_bias(bias_in)
        bias_dims = tuple(b4.shape)
    need_bias_grad = bias is not None and (not toeplitz or bias.trainable)

    q_dtype, k_dtype, v_dtype = query.dtype, key.dtype, value.dtype
    # Row blocks, block index first. Every query/key/value block carries one extra column
    # (`augment`), so the matmuls also compute the row terms: [Q | 0]·[K | 1]ᵀ = S in the
    # forward and [Q | -L]·[K | 1]ᵀ = S - L in the backward; P·[V | 1] = [P·V | rowsum P];
    # [dO | -δ]·[V | 1]ᵀ = dP - δ. (The extra column is free: a depth of 65 costs what 64 does.)
    q_list, k_list = BlockList((batch, heads, cq, d + 1)), BlockList((batch, heads, ck, d + 1))
    v_list, do_list = BlockList((batch, heads, ck, dv + 1)), BlockList((batch, heads, cq, dv + 1))
    o_list, stat_list = BlockList((batch, heads, cq, dv)), BlockList((batch, heads, cq))

    def edge_fill(i0, j0):
        """0 where the block at (i0, j0) is causal-visible and a real key, else _NEG (rank 4)."""
        keys = ops.arange(ck, dtype="int32")[None, :]
        m = None
        if causal:  # query i0 + a sees key j0 + b iff a - b >= j0 - i0
            m = (ops.arange(cq, dtype="int32")[:, None] - keys) >= (j0 - i0)
        if ragged_k:
            valid = keys < tk - j0
            m = valid if m is None else ops.logical_and(m, valid)
        return ops.where(m, 0.0, _NEG)[None, None]

    # Square causal blocks and no ragged key block: every masked block is a diagonal one.
    diagonal_fill = edge_fill(0, 0) if causal and cq == ck and not ragged_k and mask4 is None else None

    def attend(q_in, k_in, v_in, *bias_args):
        qs = blocks_of(q_in, batch, cq, pad_q, heads, d) * scale
        # The backward pass rebuilds its own lists from these dense tensors: a gradient function that
        # captured a forward TensorList (a variant tensor) could not be saved in a SavedModel.
        k_aug = augment(blocks_of(k_in, batch, ck, pad_k, heads, d), 1.0)
        v_aug = augment(blocks_of(v_in, batch, ck, pad_k, heads, dv), 1.0)
        kb, vb = k_list.from_tensor(k_aug), v_list.from_tensor(v_aug)
        if toeplitz:
            table = pad_axis(ops.flip(pad_axis(ops.flip(bias_args[0], 1), 1, pad_q), 1), 1, pad_k)
        elif bias is not None:
            bias4 = _expand_bias(bias_args[0])
            if bias_dims[2] != 1:
                bias4 = pad_axis(bias4, 2, pad_q)
            if bias_dims[3] != 1:
                bias4 = pad_axis(bias4, 3, pad_k)

        def scores(qc, kc, i0, j0, edge):
            s = ops.einsum("bhqd,bhkd->bhqk", qc, kc)
            if toeplitz:
                s = s + ops.take(table, diag0 + (j0 - i0), axis=1)[None]
            elif bias is not None:
                s = s + _block(bias4, i0, j0, cq, ck)
            if edge and diagonal_fill is not None:
                return s + diagonal_fill
            m = None if mask4 is None else _block(mask4, i0, j0, cq, ck)
            if edge:
                fill = edge_fill(i0, j0)
                return s + (fill if m is None else ops.where(m, fill, _NEG))
            return s if m is None else s + ops.where(m, 0.0, _NEG)

        # ------------------------------------------------------ forward
        qb = q_list.from_tensor(augment(qs, 0.0))

        def forward_range(i):
            """Key blocks [0, plain) need no causal/padding mask, [plain, end) do."""
            end, plain = nk, nk
            if causal:
                end = minimum(nk, ((i + 1) * cq - 1) // ck + 1)
                plain = minimum(end, (i * cq + 1) // ck)
            if ragged_k:
                plain = minimum(plain, nk - 1)
            return plain, end

        def q_step(i, carry):
            out_blocks, lse_blocks = carry
            i0 = i * cq
            qc = q_list.read(qb, i)

            def k_step(edge):
                def body(j, c):
                    m_run, acc = c  # acc = [Σ p·v | Σ p], rescaled to the running max
                    s = scores(qc, k_list.read(kb, j), i0, j * ck, edge)
                    m_new = ops.maximum(m_run, ops.max(s, axis=-1))
                    p = ops.exp(s - m_new[..., None])
                    acc = acc * ops.exp(m_run - m_new)[..., None]
                    return m_new, acc + ops.einsum("bhqk,bhkd->bhqd", p, v_list.read(vb, j))

                return body

            plain, end = forward_range(i)
            carry = (
                ops.full((batch, heads, cq), _NEG, "float32"),
                ops.zeros((batch, heads, cq, dv + 1), "float32"),
            )
            carry = fori_loop(0, plain, k_step(False), carry)
            if causal or ragged_k:  # else no block needs the edge mask
                carry = fori_loop(plain, end, k_step(True), carry)
            m_run, acc = carry
            # A row that saw no key kept m ≈ _NEG (its acc is junk).
            has_keys = m_run > 0.5 * _NEG
            safe_l = ops.where(has_keys, acc[..., dv], 1.0)
            out = ops.where(has_keys[..., None], acc[..., :dv] / safe_l[..., None], 0.0)
            lse = ops.where(has_keys, m_run + ops.log(safe_l), 0.0)
            return o_list.write(out_blocks, i, out), stat_list.write(lse_blocks, i, lse)

        out_blocks, lse_blocks = fori_loop(0, nq, q_step, (o_list.zeros(nq), stat_list.zeros(nq)))
        out_b = o_list.stack(out_blocks)  # (nq, B, H, cq, dv)
        lse_b = stat_list.stack(lse_blocks)  # (nq, B, H, cq)
        output = from_blocks(out_b, batch, tq, "float32")

        # ----------------------------------------------------- backward
        def grad(*args, upstream=None):
            d_out = args[0] if upstream is None else upstream
            do_b = blocks_of(d_out, batch, cq, pad_q, heads, dv)  # padded query rows get zero gradient
            delta = ops.sum(do_b * out_b, axis=-1)  # rowsum(dO ⊙ O)
            dob = do_list.from_tensor(ops.concatenate([do_b, -delta[..., None]], axis=-1))
            qlb = q_list.from_tensor(ops.concatenate([qs, -lse_b[..., None]], axis=-1))
            kb, vb = k_list.from_tensor(k_aug), v_list.from_tensor(v_aug)

            def backward_range(j):
                """Query blocks [first, plain) need the causal/padding mask, [plain, nq) don't."""
                first, plain = 0, 0
                if causal:
                    first = (j * ck) // cq
                    plain = minimum(nq, ceil_div((j + 1) * ck - 1, cq))
                if ragged_k:
                    plain = ops.where(j == nk - 1, nq, plain)
                return first, plain

            def k_step(j, carry):
                dq_blocks, dk_blocks, dv_blocks, db_buf = carry
                j0 = j * ck
                kc, vc = k_list.read(kb, j), v_list.read(vb, j)

                def q_step(edge):
                    def body(i, c):
                        # Accumulators are one column wider than the gradients (junk column).
                        dk, dv_acc, dq_blocks, db_buf = c
                        i0 = i * cq
                        qc, doc = q_list.read(qlb, i), do_list.read(dob, i)
                        p = ops.exp(scores(qc, kc, i0, j0, edge))  # exp(S - L)
                        dv_acc = dv_acc + ops.einsum("bhqk,bhqd->bhkd", p, doc)
                        ds = p * ops.einsum("bhqd,bhkd->bhqk", doc, vc)  # P ⊙ (dP - δ)
                        dk = dk + ops.einsum("bhqk,bhqd->bhkd", ds, qc)
                        dq = q_list.read(dq_blocks, i) + ops.einsum("bhqk,bhkd->bhqd", ds, kc)
                        dq_blocks = q_list.write(dq_blocks, i, dq)
                        if need_bias_grad:
                            db_buf = add_bias_grad(db_buf, ds, i0, j0)
                        return dk, dv_acc, dq_blocks, db_buf

                    return body

                first, plain = backward_range(j)
                carry = (
                    ops.zeros((batch, heads, ck, d + 1), "float32"),
                    ops.zeros((batch, heads, ck, dv + 1), "float32"),
                    dq_blocks,
                    db_buf,
                )
                if causal or ragged_k:
                    carry = fori_loop(first, plain, q_step(True), carry)
                dk, dv_acc, dq_blocks, db_buf = fori_loop(plain, nq, q_step(False), carry)
                return dq_blocks, k_list.write(dk_blocks, j, dk), v_list.write(dv_blocks, j, dv_acc), db_buf

            def add_bias_grad(db_buf, ds, i0, j0):
                if toeplitz:
                    ds = ops.sum(ds, axis=0) if bias_heads != 1 else ops.sum(ds, axis=(0, 1))[None]
                    sums = diagonal_sums(ds, cq, ck)  # offsets (j0 - i0) + [-(cq-1), ck-1]
                    start = j0 - i0 + nq * cq - cq
                    return ops.slice_update(
                        db_buf, (0, start), ops.slice(db_buf, (0, start), sums.shape) + sums
                    )
                axes = tuple(a for a in range(4) if bias_dims[a] == 1)
                if axes:
                    ds = ops.sum(ds, axis=axes, keepdims=True)
                rows, cols = bias_dims[2] != 1, bias_dims[3] != 1
                starts = (0, 0, i0 if rows else 0, j0 if cols else 0)
                sizes = (-1, -1, cq if rows else 1, ck if cols else 1)
                return ops.slice_update(db_buf, starts, ops.slice(db_buf, starts, sizes) + ds)

            if not need_bias_grad:
                db_buf = ops.zeros((1,), "float32")
            elif toeplitz:
                db_buf = ops.zeros((bias_heads, nq * cq + nk * ck - 1), "float32")
            else:
                db_buf = ops.zeros_like(bias4)
            dq_blocks, dk_blocks, dv_blocks, db_buf = fori_loop(
                0, nk, k_step, (q_list.zeros(nq), k_list.zeros(nk), v_list.zeros(nk), db_buf)
            )
            grads = (
                from_blocks(q_list.stack(dq_blocks), batch, tq, q_dtype, d) * ops.cast(scale, q_dtype),
                from_blocks(k_list.stack(dk_blocks), batch, tk, k_dtype, d),
                from_blocks(v_list.stack(dv_blocks), batch, tk, v_dtype, dv),
            )
            if bias is None:
                return grads
            if not need_bias_grad:
                db = ops.zeros_like(bias_args[0])
            elif toeplitz:
                db = ops.slice(db_buf, (0, pad_q), (-1, tq + tk - 1))
            else:
                sizes = (-1, -1, tq if bias_dims[2] != 1 else 1, tk if bias_dims[3] != 1 else 1)
                db = ops.reshape(ops.slice(db_buf, (0, 0, 0, 0), sizes), bias_shape)
            return grads + (db,)

        return output, grad

    attend_with_grad = ops.custom_gradient(attend)
    if bias is None:
        output = attend_with_grad(query, key, value)
    else:
        output = attend_with_grad(query, key, value, bias_in)
    return output, None
