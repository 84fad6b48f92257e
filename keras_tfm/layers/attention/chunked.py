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

Code: `BlockPlan` (`block_plan.py`) fixes the sizes, lists, mask, bias layout and
edge fills of a call; `_scores` computes one score block; `_forward` and
`_Backward` are the two loops above.
"""

from typing import Any

from keras import ops

from keras_tfm.layers.attention.block_plan import NEG_INF, BlockPlan, Operands
from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import ceil_div, pad_axis
from keras_tfm.layers.attention.row_blocks import (
    after,
    augment,
    blocks_of,
    diagonal_sums,
    fori_loop,
    from_blocks,
)


def _block(x4, i0, j0, cq, ck):
    """Rows `i0:i0+cq`, columns `j0:j0+ck` of a rank-4 tensor (broadcast axes kept)."""
    rows, cols = x4.shape[2] != 1, x4.shape[3] != 1
    return ops.slice(
        x4, (0, 0, i0 if rows else 0, j0 if cols else 0), (-1, -1, cq if rows else 1, ck if cols else 1)
    )


def _scores(plan: BlockPlan, qc: Any, kc: Any, i0: Any, j0: Any, bias: Any, fill: Any = None) -> Any:
    """The score block S_ij = Q_i K_jᵀ·scale + B_ij + M_ij of the scaled query block `qc`
    (rows i0…) and the keys `kc` (columns j0…), with the bias block read from `bias`
    (`Operands.bias`); `fill` (0 / NEG_INF, rank 4) masks an edge block."""
    width = kc.shape[2]
    s = ops.einsum("bhqd,bhkd->bhqk", qc, kc)
    if plan.toeplitz:
        offsets = plan.diag0 if width == plan.ck else plan.diag0[:, :width]
        s = s + ops.take(bias, offsets + (j0 - i0), axis=1)[None]
    elif bias is not None:
        s = s + _block(bias, i0, j0, plan.cq, width)
    m = None if plan.mask4 is None else _block(plan.mask4, i0, j0, plan.cq, width)
    if fill is None:
        return s if m is None else s + ops.where(m, 0.0, NEG_INF)
    return s + (fill if m is None else ops.where(m, fill, NEG_INF))


@register_attention_impl("chunked")
def chunked_attention(
    inputs: AttentionInputs, query_chunk_size: int = 512, key_chunk_size: int | None = None
) -> tuple[Any, None]:
    """Exact attention in O(T) memory, forward and backward (module docstring).

    Args:
        inputs: the call (`core.py`'s contract); weights and weight dropout are refused.
        query_chunk_size: positive int, queries per block.
        key_chunk_size: positive int or None, keys per block (None: 2 × `query_chunk_size`
            under causal attention, else 1024).

    Returns:
        `(output, None)`: the float32 `(B, Tq, H, Dv)` output, differentiable with respect to
        query, key, value and the bias (`keras.ops.custom_gradient`).

    Raises:
        ValueError: `return_attention_scores`, weight dropout in training, or a chunk size
            that is not a positive int.
    """
    inputs.refuse_weights("chunked")
    plan = BlockPlan(inputs, query_chunk_size, key_chunk_size)

    def attend(q_in, k_in, v_in, *bias_args):
        # The backward pass rebuilds its own lists from these dense tensors: a gradient function that
        # captured a forward TensorList (a variant tensor) could not be saved in a SavedModel.
        x = plan.operands(q_in, k_in, v_in, *bias_args)
        out_b, lse_b = _forward(plan, x)
        output = from_blocks(out_b, plan.batch, plan.tq, "float32")

        def grad(*args, upstream=None):
            d_out = args[0] if upstream is None else upstream
            return _Backward(plan, x, out_b, lse_b, d_out).gradients(*bias_args)

        return output, grad

    attend_with_grad = ops.custom_gradient(attend)
    query, key, value = inputs[:3]
    if not plan.has_bias:
        return attend_with_grad(query, key, value), None
    return attend_with_grad(query, key, value, plan.bias_in), None


def _forward(plan: BlockPlan, x: Operands) -> tuple[Any, Any]:
    """The forward loops: the output blocks `(nq, B, H, cq, dv)` and the log-sum-exp
    `L` of every row, `(nq, B, H, cq)` (0 for a row that sees no key)."""
    batch, heads, cq, ck, r, dv = plan.batch, plan.heads, plan.cq, plan.ck, plan.r, plan.dv
    qb = plan.q_list.from_tensor(augment(x.qs, 0.0))
    kb, vb = plan.k_list.from_tensor(x.k_aug), plan.v_list.from_tensor(x.v_aug)

    def k_step(qc, i0, width=ck, fill_of=None):
        """Loop body: folds the first `width` keys of key block j into the running softmax."""

        def body(j, c):
            m_run, acc = c  # acc = [Σ p·v | Σ p], rescaled to the running max
            kc = plan.leading_keys(plan.k_list.read(kb, j), width)
            vc = plan.leading_keys(plan.v_list.read(vb, j), width)
            s = _scores(plan, qc, kc, i0, j * ck, x.bias, None if fill_of is None else fill_of(j))
            m_new = ops.maximum(m_run, ops.max(s, axis=-1))
            p = ops.exp(s - m_new[..., None])
            acc = acc * ops.exp(m_run - m_new)[..., None]
            return m_new, acc + ops.einsum("bhqk,bhkd->bhqd", p, vc)

        return body

    def q_step(i, carry, rho=None):
        """Attention of query block i; `rho` = i % r in the aligned case."""
        out_blocks, lse_blocks = carry
        i0 = i * cq
        qc = plan.q_list.read(qb, i)
        c = (
            ops.full((batch, heads, cq), NEG_INF, "float32"),
            ops.zeros((batch, heads, cq, dv + 1), "float32"),
        )
        if rho is not None:
            edge = i // r  # the key block holding the diagonal
            c = fori_loop(0, edge, k_step(qc, i0), c)
            c = k_step(qc, i0, (rho + 1) * cq, lambda j: plan.edge_fills[rho])(edge, c)
        else:
            plain, end = plan.forward_range(i)
            c = fori_loop(0, plain, k_step(qc, i0), c)
            if plan.causal or plan.ragged_k:  # else no block needs the edge mask
                c = fori_loop(plain, end, k_step(qc, i0, fill_of=lambda j: plan.edge_fill(i0, j * ck, ck)), c)
        m_run, acc = c
        # A row that saw no key kept m ≈ NEG_INF (its acc is junk).
        has_keys = m_run > 0.5 * NEG_INF
        safe_l = ops.where(has_keys, acc[..., dv], 1.0)
        out = ops.where(has_keys[..., None], acc[..., :dv] / safe_l[..., None], 0.0)
        lse = ops.where(has_keys, m_run + ops.log(safe_l), 0.0)
        return plan.o_list.write(out_blocks, i, out), plan.stat_list.write(lse_blocks, i, lse)

    nq = plan.nq
    carry = (plan.o_list.zeros(nq), plan.stat_list.zeros(nq))
    if plan.aligned:  # one loop per residue i % r, so that each edge block has a static width
        for rho in range(min(r, nq)):
            carry = fori_loop(
                0, ceil_div(nq - rho, r), lambda t, c, rho=rho: q_step(rho + r * t, c, rho), carry
            )
    else:
        carry = fori_loop(0, nq, q_step, carry)
    out_blocks, lse_blocks = carry
    return plan.o_list.stack(out_blocks), plan.stat_list.stack(lse_blocks)


class _Backward:
    """The backward pass of one call: for every key block j (outer loop) and the query blocks i
    that see it, P = exp(S - L), dV_j += Pᵀ dO_i, dS = P ⊙ (dO_i V_jᵀ - δ_i), dK_j += dSᵀ Q_i,
    dQ_i += dS K_j and dB_ij = dS, with δ = rowsum(dO ⊙ O).

    Args:
        plan: the call's `BlockPlan`.
        x: the `Operands` of the forward pass.
        out_b, lse_b: the forward output blocks and log-sum-exp rows.
        d_out: the upstream gradient, `(B, Tq, H, Dv)`.
    """

    def __init__(self, plan: BlockPlan, x: Operands, out_b: Any, lse_b: Any, d_out: Any):
        self.plan, self.x = plan, x
        do_b = blocks_of(d_out, plan.batch, plan.cq, plan.pad_q, plan.heads, plan.dv)  # padded rows: zero
        delta = ops.sum(do_b * out_b, axis=-1)  # rowsum(dO ⊙ O)
        self.dob = plan.do_list.from_tensor(ops.concatenate([do_b, -delta[..., None]], axis=-1))
        self.qlb = plan.q_list.from_tensor(ops.concatenate([x.qs, -lse_b[..., None]], axis=-1))
        self.kb, self.vb = plan.k_list.from_tensor(x.k_aug), plan.v_list.from_tensor(x.v_aug)

    def gradients(self, bias_in: Any = None) -> tuple[Any, ...]:
        """`(dQ, dK, dV)` in the input dtypes, and `dB` (float32, the shape of `bias_in`)
        when the call has a bias."""
        plan = self.plan
        nq, nk, r = plan.nq, plan.nk, plan.r
        if not plan.need_bias_grad:
            db_buf = ops.zeros((1,), "float32")
        elif plan.toeplitz:
            db_buf = ops.zeros((plan.bias_heads, nq * plan.cq + nk * plan.ck - 1), "float32")
        else:
            db_buf = ops.zeros_like(self.x.bias)
        carry = (plan.q_list.zeros(nq), plan.k_list.zeros(nk), plan.v_list.zeros(nk), db_buf)
        if plan.aligned:  # the last key block may meet fewer than r (real) query blocks
            carry = fori_loop(0, nk - 1, self.key_block, carry)
            carry = self.key_block(nk - 1, carry, edges=nq - r * (nk - 1))
        else:
            carry = fori_loop(0, nk, self.key_block, carry)
        dq_blocks, dk_blocks, dv_blocks, db_buf = carry
        (q_dtype, k_dtype, v_dtype), batch, d, dv = plan.dtypes, plan.batch, plan.d, plan.dv
        grads = (
            from_blocks(plan.q_list.stack(dq_blocks), batch, plan.tq, q_dtype, d)
            * ops.cast(plan.scale, q_dtype),
            from_blocks(plan.k_list.stack(dk_blocks), batch, plan.tk, k_dtype, d),
            from_blocks(plan.v_list.stack(dv_blocks), batch, plan.tk, v_dtype, dv),
        )
        if not plan.has_bias:
            return grads
        if not plan.need_bias_grad:
            db = ops.zeros_like(bias_in)
        elif plan.toeplitz:
            db = ops.slice(db_buf, (0, plan.pad_q), (-1, plan.tq + plan.tk - 1))
        else:
            dims = plan.bias_dims
            sizes = (-1, -1, plan.tq if dims[2] != 1 else 1, plan.tk if dims[3] != 1 else 1)
            db = ops.reshape(ops.slice(db_buf, (0, 0, 0, 0), sizes), plan.bias_shape)
        return grads + (db,)

    def key_block(self, j: Any, carry: tuple, edges: int | None = None) -> tuple:
        """Gradients of key block j: its dK and dV, and its part of dQ and dB. In the aligned
        case `edges` (default r) query blocks meet its diagonal."""
        plan = self.plan
        dq_blocks, dk_blocks, dv_blocks, db_buf = carry
        j0, ck = j * plan.ck, plan.ck
        kc, vc = plan.k_list.read(self.kb, j), plan.v_list.read(self.vb, j)
        dk = ops.zeros((plan.batch, plan.heads, ck, plan.d + 1), "float32")
        dv_acc = ops.zeros((plan.batch, plan.heads, ck, plan.dv + 1), "float32")
        carry = (dk, dv_acc, dq_blocks, db_buf)
        if plan.aligned:  # the whole blocks, then query block r·j + rho on the first (rho + 1)·cq keys
            r = plan.r
            dk, dv_acc, dq_blocks, db_buf = fori_loop(
                r * (j + 1), plan.nq, self.query_blocks(kc, vc, j0), carry
            )
            for rho in range(r if edges is None else edges):
                width = (rho + 1) * plan.cq
                k_edge, v_edge = plan.leading_keys(kc, width), plan.leading_keys(vc, width)
                dk_part, dv_part, dq_blocks, db_buf = self.block(
                    r * j + rho, k_edge, v_edge, j0, plan.edge_fills[rho], dq_blocks, db_buf, wait=True
                )
                dk = dk + pad_axis(dk_part, 2, ck - width)
                dv_acc = dv_acc + pad_axis(dv_part, 2, ck - width)
        else:
            first, plain = plan.backward_range(j)
            if plan.causal or plan.ragged_k:
                edge_fill = lambda i: plan.edge_fill(i * plan.cq, j0, ck)  # noqa: E731
                carry = fori_loop(first, plain, self.query_blocks(kc, vc, j0, edge_fill), carry)
            dk, dv_acc, dq_blocks, db_buf = fori_loop(plain, plan.nq, self.query_blocks(kc, vc, j0), carry)
        return dq_blocks, plan.k_list.write(dk_blocks, j, dk), plan.v_list.write(dv_blocks, j, dv_acc), db_buf

    def query_blocks(self, kc: Any, vc: Any, j0: Any, fill_of: Any = None) -> Any:
        """Loop body over query blocks i: adds block (i, j)'s dK and dV parts to the carry."""

        def body(i, c):
            dk, dv_acc, dq_blocks, db_buf = c
            fill = None if fill_of is None else fill_of(i)
            dk_part, dv_part, dq_blocks, db_buf = self.block(i, kc, vc, j0, fill, dq_blocks, db_buf)
            return dk + dk_part, dv_acc + dv_part, dq_blocks, db_buf

        return body

    def block(self, i, kc, vc, j0, fill, dq_blocks, db_buf, wait=False):
        """One block's gradients: the dK and dV parts of its keys; dQ and dB accumulated.
        (dK, dV carry one junk column, as the augmented blocks do.) `wait`: start once
        the previous block has written its dQ (unrolled blocks would run side by side)."""
        plan = self.plan
        i0 = i * plan.cq
        qc, doc = plan.q_list.read(self.qlb, i), plan.do_list.read(self.dob, i)
        if wait:
            qc, doc = after((qc, doc), dq_blocks)
        p = ops.exp(_scores(plan, qc, kc, i0, j0, self.x.bias, fill))  # exp(S - L)
        dv_part = ops.einsum("bhqk,bhqd->bhkd", p, doc)
        ds = p * ops.einsum("bhqd,bhkd->bhqk", doc, vc)  # P ⊙ (dP - δ)
        dk_part = ops.einsum("bhqk,bhqd->bhkd", ds, qc)
        dq = plan.q_list.read(dq_blocks, i) + ops.einsum("bhqk,bhkd->bhqd", ds, kc)
        dq_blocks = plan.q_list.write(dq_blocks, i, dq)
        if plan.need_bias_grad:
            db_buf = self.add_bias_grad(db_buf, ds, i0, j0)
        return dk_part, dv_part, dq_blocks, db_buf

    def add_bias_grad(self, db_buf: Any, ds: Any, i0: Any, j0: Any) -> Any:
        """`db_buf` plus one block's dB = dS: summed along its diagonals into the Toeplitz
        table, or over the bias's broadcast axes into the padded dense bias."""
        plan = self.plan
        if plan.toeplitz:
            ds = ops.sum(ds, axis=0) if plan.bias_heads != 1 else ops.sum(ds, axis=(0, 1))[None]
            sums = diagonal_sums(ds, plan.cq, ds.shape[-1])  # offsets (j0 - i0) + [-(cq-1), width-1]
            start = j0 - i0 + plan.nq * plan.cq - plan.cq
            return ops.slice_update(db_buf, (0, start), ops.slice(db_buf, (0, start), sums.shape) + sums)
        dims = plan.bias_dims
        axes = tuple(a for a in range(4) if dims[a] == 1)
        if axes:
            ds = ops.sum(ds, axis=axes, keepdims=True)
        rows, cols = dims[2] != 1, dims[3] != 1
        starts = (0, 0, i0 if rows else 0, j0 if cols else 0)
        sizes = (-1, -1, plan.cq if rows else 1, ds.shape[3] if cols else 1)
        return ops.slice_update(db_buf, starts, ops.slice(db_buf, starts, sizes) + ds)
