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

What a block costs beyond its matmuls is kept small (a long sequence has
hundreds of blocks):
  * Q, K, V, dO, the outputs and the gradients are held as lists of row blocks
    (`row_blocks.BlockList`; a `TensorList` on TensorFlow), so reading a block or
    accumulating into dQ touches that block only, never a T-long buffer.
  * The row terms ride along in the matmuls through one extra feature column:
    [Q | 0]·[K | 1]ᵀ = S, P·[V | 1] = [P·V | rowsum P] in the forward;
    [Q | -L]·[K | 1]ᵀ = S - L and [dO | -δ]·[V | 1]ᵀ = dP - δ in the backward
    (δ = rowsum(dO ⊙ O)), which saves three elementwise passes per block.
  * Masks are additive (0 / -1e30); in the aligned causal case below the edge
    blocks share r precomputed fills.

Causal attention (`causal=True`, the flag the layers pass) skips the blocks
above the diagonal in the forward AND the backward pass (about half the work)
and builds the causal mask per block from indices; only the blocks that cross
the diagonal (and the ragged last key block) are masked at all. A
`ToeplitzBias` (ALiBi, T5 relative positions) is gathered per block from its
O(T) offset table, and its gradient is summed per block along the diagonals.
So no T × T tensor reaches this path from the layers; an explicit dense `mask`
or `bias` argument is still honoured (sliced per block).

Aligned causal blocks. When a key block is r query blocks wide (self-attention,
static T; the causal default is 512 × 1024, r = 2), query block i sees key
blocks [0, i // r) whole and only the first (i % r + 1)·query_chunk_size keys of
key block i // r, the last query_chunk_size of them holding the diagonal. That
edge block is cut to this width (a static one: the query loop runs once per
residue i % r), so nothing is computed beyond the diagonal's own square, in
blocks of the non-causal size. Square blocks (r = 1) compute the same scores
in twice as many half-size blocks, each with its own per-operation cost
(timings in bench/RESULTS.md). Padded keys come after every real query, so
causality masks them. Other shapes (key block not a multiple of the query block, a length known
only at run time, cross-attention) take the general path, masking whole edge
blocks.

All arithmetic is float32 (inputs are cast once; gradients are cast back), the
mask/bias contract is the one of `core.py`, and a query whose keys are
all masked gets a zero output and zero gradients (never NaN).

Options (`attention_options`): `query_chunk_size` (default 512) and
`key_chunk_size` (default 1024, or 2 × `query_chunk_size` under `causal=True`),
each clipped to the sequence length; a ragged last chunk is zero-padded and its
padded keys masked out.

The full weight matrix is never formed, so `return_attention_scores=True` and attention
dropout during training raise a `ValueError`.
"""

from typing import Any

from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import ceil_div, is_int, minimum, pad_axis, static_or_dynamic_length
from keras_tfm.layers.attention.masks import expand_mask
from keras_tfm.layers.attention.row_blocks import (
    BlockList,
    after,
    augment,
    blocks_of,
    diagonal_sums,
    fori_loop,
    from_blocks,
)
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias, expand_bias

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
def chunked_attention(
    inputs: AttentionInputs, query_chunk_size: int = 512, key_chunk_size: int | None = None
) -> tuple[Any, None]:
    """Exact attention in O(T) memory (forward and backward); see module docs."""
    inputs.refuse_weights("chunked")
    query, key, value = inputs[:3]
    mask, bias, causal, scale = inputs.mask, inputs.bias, inputs.causal, inputs.score_scale()
    if key_chunk_size is None:
        check_positive_int("query_chunk_size", query_chunk_size)
        key_chunk_size = 2 * query_chunk_size if causal else 1024
    tq = static_or_dynamic_length(query)
    tk = static_or_dynamic_length(key)
    cq = _chunk_size(query_chunk_size, tq, "query_chunk_size")
    ck = _chunk_size(key_chunk_size, tk, "key_chunk_size")
    nq, nk = ceil_div(tq, cq), ceil_div(tk, ck)
    pad_q, pad_k = nq * cq - tq, nk * ck - tk
    # Causal self-attention with key blocks r query blocks wide: edge blocks cut to the diagonal.
    aligned = causal and is_int(tq) and tq == tk and ck % cq == 0
    r = ck // cq
    # Unless T is statically a multiple of the chunk, the last key block is masked; in the
    # aligned case its padded keys come after every real query, so causality masks them.
    ragged_k = not aligned and not (is_int(pad_k) and pad_k == 0)
    heads, d, dv = query.shape[2], query.shape[3], value.shape[3]
    batch = static_or_dynamic_length(query, 0)

    mask4 = None
    if mask is not None:
        mask4 = expand_mask(mask)
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
        b4 = expand_bias(bias_in)
        bias_dims = tuple(b4.shape)
    need_bias_grad = bias is not None and (not toeplitz or bias.trainable)

    q_dtype, k_dtype, v_dtype = query.dtype, key.dtype, value.dtype
    # Row blocks, block index first. Every query/key/value block carries one extra column
    # (`augment`), so the matmuls also compute the row terms: [Q | 0]·[K | 1]ᵀ = S in the
    # forward and [Q | -L]·[K | 1]ᵀ = S - L in the backward; P·[V | 1] = [P·V | rowsum P];
    # [dO | -δ]·[V | 1]ᵀ = dP - δ (one more column of matmul depth).
    q_list, k_list = BlockList((batch, heads, cq, d + 1)), BlockList((batch, heads, ck, d + 1))
    v_list, do_list = BlockList((batch, heads, ck, dv + 1)), BlockList((batch, heads, cq, dv + 1))
    o_list, stat_list = BlockList((batch, heads, cq, dv)), BlockList((batch, heads, cq))

    def edge_fill(i0, j0, width):
        """0 where the `cq × width` block at (i0, j0) is causal-visible and a real key, else _NEG (rank 4)."""
        keys = ops.arange(width, dtype="int32")[None, :]
        m = None
        if causal:  # query i0 + a sees key j0 + b iff a - b >= j0 - i0
            m = (ops.arange(cq, dtype="int32")[:, None] - keys) >= (j0 - i0)
        if ragged_k:
            valid = keys < tk - j0
            m = valid if m is None else ops.logical_and(m, valid)
        return ops.where(m, 0.0, _NEG)[None, None]

    # Aligned: query block i sees key blocks [0, i // r) whole and the first (i % r + 1)·cq keys
    # of key block i // r, the last cq of them holding the diagonal; that edge block's fill
    # depends on i % r only (j0 - i0 = -(i % r)·cq).
    edge_fills = [edge_fill(rho * cq, 0, (rho + 1) * cq) for rho in range(r)] if aligned else None

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
            bias4 = expand_bias(bias_args[0])
            if bias_dims[2] != 1:
                bias4 = pad_axis(bias4, 2, pad_q)
            if bias_dims[3] != 1:
                bias4 = pad_axis(bias4, 3, pad_k)

        def leading_keys(block, width):
            """The first `width` keys (axis 2) of a key or value block."""
            return block if width == ck else block[:, :, :width]

        def scores(qc, kc, i0, j0, fill=None):
            """The score block of query block `qc` (rows i0…) and the keys `kc` (columns j0…);
            `fill` (0 / _NEG, rank 4) masks an edge block."""
            width = kc.shape[2]
            s = ops.einsum("bhqd,bhkd->bhqk", qc, kc)
            if toeplitz:
                offsets = diag0 if width == ck else diag0[:, :width]
                s = s + ops.take(table, offsets + (j0 - i0), axis=1)[None]
            elif bias is not None:
                s = s + _block(bias4, i0, j0, cq, width)
            m = None if mask4 is None else _block(mask4, i0, j0, cq, width)
            if fill is None:
                return s if m is None else s + ops.where(m, 0.0, _NEG)
            return s + (fill if m is None else ops.where(m, fill, _NEG))

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

        def k_step(qc, i0, width=ck, fill_of=None):
            """Loop body: folds the first `width` keys of key block j into the running softmax."""

            def body(j, c):
                m_run, acc = c  # acc = [Σ p·v | Σ p], rescaled to the running max
                kc, vc = leading_keys(k_list.read(kb, j), width), leading_keys(v_list.read(vb, j), width)
                s = scores(qc, kc, i0, j * ck, None if fill_of is None else fill_of(j))
                m_new = ops.maximum(m_run, ops.max(s, axis=-1))
                p = ops.exp(s - m_new[..., None])
                acc = acc * ops.exp(m_run - m_new)[..., None]
                return m_new, acc + ops.einsum("bhqk,bhkd->bhqd", p, vc)

            return body

        def q_step(i, carry, rho=None):
            """Attention of query block i; `rho` = i % r in the aligned case."""
            out_blocks, lse_blocks = carry
            i0 = i * cq
            qc = q_list.read(qb, i)
            c = (
                ops.full((batch, heads, cq), _NEG, "float32"),
                ops.zeros((batch, heads, cq, dv + 1), "float32"),
            )
            if rho is not None:
                edge = i // r  # the key block holding the diagonal
                c = fori_loop(0, edge, k_step(qc, i0), c)
                c = k_step(qc, i0, (rho + 1) * cq, lambda j: edge_fills[rho])(edge, c)
            else:
                plain, end = forward_range(i)
                c = fori_loop(0, plain, k_step(qc, i0), c)
                if causal or ragged_k:  # else no block needs the edge mask
                    c = fori_loop(plain, end, k_step(qc, i0, fill_of=lambda j: edge_fill(i0, j * ck, ck)), c)
            m_run, acc = c
            # A row that saw no key kept m ≈ _NEG (its acc is junk).
            has_keys = m_run > 0.5 * _NEG
            safe_l = ops.where(has_keys, acc[..., dv], 1.0)
            out = ops.where(has_keys[..., None], acc[..., :dv] / safe_l[..., None], 0.0)
            lse = ops.where(has_keys, m_run + ops.log(safe_l), 0.0)
            return o_list.write(out_blocks, i, out), stat_list.write(lse_blocks, i, lse)

        carry = (o_list.zeros(nq), stat_list.zeros(nq))
        if aligned:  # one loop per residue i % r, so that each edge block has a static width
            for rho in range(min(r, nq)):
                carry = fori_loop(
                    0, ceil_div(nq - rho, r), lambda t, c, rho=rho: q_step(rho + r * t, c, rho), carry
                )
        else:
            carry = fori_loop(0, nq, q_step, carry)
        out_blocks, lse_blocks = carry
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

            def block_grads(i, kc, vc, j0, fill, dq_blocks, db_buf, wait=False):
                """One block's gradients: the dK and dV parts of its keys; dQ and dB accumulated.
                (dK, dV carry one junk column, as the augmented blocks do.) `wait`: start once
                the previous block has written its dQ (unrolled blocks would run side by side)."""
                i0 = i * cq
                qc, doc = q_list.read(qlb, i), do_list.read(dob, i)
                if wait:
                    qc, doc = after((qc, doc), dq_blocks)
                p = ops.exp(scores(qc, kc, i0, j0, fill))  # exp(S - L)
                dv_part = ops.einsum("bhqk,bhqd->bhkd", p, doc)
                ds = p * ops.einsum("bhqd,bhkd->bhqk", doc, vc)  # P ⊙ (dP - δ)
                dk_part = ops.einsum("bhqk,bhqd->bhkd", ds, qc)
                dq = q_list.read(dq_blocks, i) + ops.einsum("bhqk,bhkd->bhqd", ds, kc)
                dq_blocks = q_list.write(dq_blocks, i, dq)
                if need_bias_grad:
                    db_buf = add_bias_grad(db_buf, ds, i0, j0)
                return dk_part, dv_part, dq_blocks, db_buf

            def q_step(kc, vc, j0, fill_of=None):
                def body(i, c):
                    dk, dv_acc, dq_blocks, db_buf = c
                    fill = None if fill_of is None else fill_of(i)
                    dk_part, dv_part, dq_blocks, db_buf = block_grads(i, kc, vc, j0, fill, dq_blocks, db_buf)
                    return dk + dk_part, dv_acc + dv_part, dq_blocks, db_buf

                return body

            def k_step(j, carry, edges=r):
                """Gradients of key block j; `edges` query blocks meet its diagonal (aligned case)."""
                dq_blocks, dk_blocks, dv_blocks, db_buf = carry
                j0 = j * ck
                kc, vc = k_list.read(kb, j), v_list.read(vb, j)
                dk = ops.zeros((batch, heads, ck, d + 1), "float32")
                dv_acc = ops.zeros((batch, heads, ck, dv + 1), "float32")
                carry = (dk, dv_acc, dq_blocks, db_buf)
                if aligned:  # the whole blocks, then query block r·j + rho on the first (rho + 1)·cq keys
                    dk, dv_acc, dq_blocks, db_buf = fori_loop(r * (j + 1), nq, q_step(kc, vc, j0), carry)
                    for rho in range(edges):
                        width = (rho + 1) * cq
                        dk_part, dv_part, dq_blocks, db_buf = block_grads(
                            r * j + rho,
                            leading_keys(kc, width),
                            leading_keys(vc, width),
                            j0,
                            edge_fills[rho],
                            dq_blocks,
                            db_buf,
                            wait=True,
                        )
                        dk = dk + pad_axis(dk_part, 2, ck - width)
                        dv_acc = dv_acc + pad_axis(dv_part, 2, ck - width)
                else:
                    first, plain = backward_range(j)
                    if causal or ragged_k:
                        carry = fori_loop(
                            first, plain, q_step(kc, vc, j0, lambda i: edge_fill(i * cq, j0, ck)), carry
                        )
                    dk, dv_acc, dq_blocks, db_buf = fori_loop(plain, nq, q_step(kc, vc, j0), carry)
                return dq_blocks, k_list.write(dk_blocks, j, dk), v_list.write(dv_blocks, j, dv_acc), db_buf

            def add_bias_grad(db_buf, ds, i0, j0):
                if toeplitz:
                    ds = ops.sum(ds, axis=0) if bias_heads != 1 else ops.sum(ds, axis=(0, 1))[None]
                    sums = diagonal_sums(ds, cq, ds.shape[-1])  # offsets (j0 - i0) + [-(cq-1), width-1]
                    start = j0 - i0 + nq * cq - cq
                    return ops.slice_update(
                        db_buf, (0, start), ops.slice(db_buf, (0, start), sums.shape) + sums
                    )
                axes = tuple(a for a in range(4) if bias_dims[a] == 1)
                if axes:
                    ds = ops.sum(ds, axis=axes, keepdims=True)
                rows, cols = bias_dims[2] != 1, bias_dims[3] != 1
                starts = (0, 0, i0 if rows else 0, j0 if cols else 0)
                sizes = (-1, -1, cq if rows else 1, ds.shape[3] if cols else 1)
                return ops.slice_update(db_buf, starts, ops.slice(db_buf, starts, sizes) + ds)

            if not need_bias_grad:
                db_buf = ops.zeros((1,), "float32")
            elif toeplitz:
                db_buf = ops.zeros((bias_heads, nq * cq + nk * ck - 1), "float32")
            else:
                db_buf = ops.zeros_like(bias4)
            carry = (q_list.zeros(nq), k_list.zeros(nk), v_list.zeros(nk), db_buf)
            if aligned:  # the last key block may meet fewer than r (real) query blocks
                carry = fori_loop(0, nk - 1, k_step, carry)
                carry = k_step(nk - 1, carry, edges=nq - r * (nk - 1))
            else:
                carry = fori_loop(0, nk, k_step, carry)
            dq_blocks, dk_blocks, dv_blocks, db_buf = carry
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
