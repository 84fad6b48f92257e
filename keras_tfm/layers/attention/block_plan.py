"""The block plan of one chunked attention call (`chunked.py`): `BlockPlan`.

Everything the forward and backward loops of `chunked_attention` fix before
they run: the chunk sizes cq × ck, the block counts nq = ⌈Tq / cq⌉ and
nk = ⌈Tk / ck⌉ and the zero padding of the last blocks, whether the key blocks
are aligned to the causal diagonal (r = ck / cq query blocks wide) and whether
the last key block is ragged, the `BlockList` of every operand, the padded
mask, the bias layout, and the additive fills of the edge blocks. Sizes are
Python ints when static and scalar tensors otherwise (`lengths.py`).
"""

from typing import Any, NamedTuple

from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention.core import AttentionInputs
from keras_tfm.layers.attention.lengths import ceil_div, is_int, minimum, pad_axis, static_or_dynamic_length
from keras_tfm.layers.attention.masks import expand_mask
from keras_tfm.layers.attention.row_blocks import BlockList, augment, blocks_of
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias, expand_bias

#: Finite "minus infinity" for masked scores and the running max; exp(NEG_INF - finite) == 0.
NEG_INF = -1e30


def _chunk_size(option, length, name):
    check_positive_int(name, option)
    return min(option, length) if is_int(length) else option


class Operands(NamedTuple):
    """The float32 operands of one call, in row blocks (block index first).

    Fields:
        qs: scaled queries, `(nq, B, H, cq, d)`.
        k_aug: keys with a column of ones, `(nk, B, H, ck, d + 1)`.
        v_aug: values with a column of ones, `(nk, B, H, ck, dv + 1)`.
        bias: the padded bias the score blocks read, or None: the Toeplitz offset
            table `(H | 1, nq·cq + nk·ck − 1)`, or the rank-4 bias padded to
            `nq·cq` rows and `nk·ck` columns (broadcast axes kept).
    """

    qs: Any
    k_aug: Any
    v_aug: Any
    bias: Any


class BlockPlan:
    """The static plan of one chunked attention call.

    Args:
        inputs: the call's `AttentionInputs`.
        query_chunk_size: positive int, rows per query block (clipped to Tq).
        key_chunk_size: positive int or None, keys per key block (clipped to
            Tk); None: 2 × `query_chunk_size` under `inputs.causal`, else 1024.

    Attributes:
        cq, ck, nq, nk, pad_q, pad_k: block sizes, counts and padding.
        aligned: causal self-attention of static length with ck = r·cq: query
            block i sees key blocks [0, i // r) whole and the first
            (i % r + 1)·cq keys of key block i // r (`edge_fills[i % r]`).
        ragged_k: the last key block holds padded keys that need a mask.
        toeplitz, has_bias, need_bias_grad: the bias kind and whether dB is computed.
        bias_in: the float32 bias tensor (Toeplitz values or dense), or None.
        q_list, k_list, v_list, do_list, o_list, stat_list: the `BlockList`s.

    Raises:
        ValueError: a chunk size that is not a positive int.
    """

    def __init__(self, inputs: AttentionInputs, query_chunk_size: int, key_chunk_size: int | None):
        query, key, value = inputs[:3]
        causal = self.causal = inputs.causal
        self.scale = inputs.score_scale()
        if key_chunk_size is None:
            check_positive_int("query_chunk_size", query_chunk_size)
            key_chunk_size = 2 * query_chunk_size if causal else 1024
        tq = self.tq = static_or_dynamic_length(query)
        tk = self.tk = static_or_dynamic_length(key)
        cq = self.cq = _chunk_size(query_chunk_size, tq, "query_chunk_size")
        ck = self.ck = _chunk_size(key_chunk_size, tk, "key_chunk_size")
        self.nq, self.nk = ceil_div(tq, cq), ceil_div(tk, ck)
        self.pad_q, self.pad_k = self.nq * cq - tq, self.nk * ck - tk
        self.aligned = causal and is_int(tq) and tq == tk and ck % cq == 0
        self.r = ck // cq
        # Unless T is statically a multiple of the chunk, the last key block is masked; in the
        # aligned case its padded keys come after every real query, so causality masks them.
        self.ragged_k = not self.aligned and not (is_int(self.pad_k) and self.pad_k == 0)
        heads, d, dv = self.heads, self.d, self.dv = query.shape[2], query.shape[3], value.shape[3]
        batch = self.batch = static_or_dynamic_length(query, 0)
        self.mask4 = self._padded_mask(inputs.mask)
        self._plan_bias(inputs.bias)
        self.dtypes = (query.dtype, key.dtype, value.dtype)
        # Every query/key/value block carries one extra column (`augment`), so the matmuls
        # also compute the row terms: [Q | 0]·[K | 1]ᵀ = S in the forward and
        # [Q | -L]·[K | 1]ᵀ = S - L in the backward; P·[V | 1] = [P·V | rowsum P];
        # [dO | -δ]·[V | 1]ᵀ = dP - δ (one more column of matmul depth).
        q_rows, k_rows = (batch, heads, cq), (batch, heads, ck)
        self.q_list, self.do_list = BlockList((*q_rows, d + 1)), BlockList((*q_rows, dv + 1))
        self.k_list, self.v_list = BlockList((*k_rows, d + 1)), BlockList((*k_rows, dv + 1))
        self.o_list, self.stat_list = BlockList((*q_rows, dv)), BlockList(q_rows)
        # The edge block of query block i depends on i % r only (j0 - i0 = -(i % r)·cq).
        self.edge_fills = (
            [self.edge_fill(rho * cq, 0, (rho + 1) * cq) for rho in range(self.r)] if self.aligned else None
        )

    def _padded_mask(self, mask):
        """The rank-4 mask, padded with False to `nq·cq` rows and `nk·ck` columns, or None."""
        if mask is None:
            return None
        mask4 = expand_mask(mask)
        if mask4.shape[2] != 1:
            mask4 = pad_axis(mask4, 2, self.pad_q, False)
        if mask4.shape[3] != 1:
            mask4 = pad_axis(mask4, 3, self.pad_k, False)
        return mask4

    def _plan_bias(self, bias):
        """Sets `bias_in` and the bias layout: for a `ToeplitzBias` its heads and the
        offset table index `diag0` of a block; for a dense bias its shape and rank-4 dims."""
        self.has_bias = bias is not None
        self.toeplitz = isinstance(bias, ToeplitzBias)
        self.bias_in = None
        if self.toeplitz:
            self.bias_in = ops.cast(bias.values, "float32")
            self.bias_heads = self.bias_in.shape[0]
            # Padded offset table: entry q_pad - 1 + (j - i) for padded positions i, j.
            diag0 = ops.arange(self.ck, dtype="int32")[None, :] - ops.arange(self.cq, dtype="int32")[:, None]
            self.diag0 = diag0 + ops.cast(self.nq * self.cq - 1, "int32")
        elif bias is not None:
            self.bias_in = ops.cast(bias, "float32")
            self.bias_shape = ops.shape(self.bias_in)
            self.bias_dims = tuple(expand_bias(self.bias_in).shape)
        self.need_bias_grad = bias is not None and (not self.toeplitz or bias.trainable)

    def operands(self, q_in: Any, k_in: Any, v_in: Any, bias_in: Any = None) -> Operands:
        """The `Operands` of the tensors `(B, T, H, D)` and the float32 bias given to the
        custom gradient (their row blocks, zero-padded; the bias padded)."""
        qs = blocks_of(q_in, self.batch, self.cq, self.pad_q, self.heads, self.d) * self.scale
        k_aug = augment(blocks_of(k_in, self.batch, self.ck, self.pad_k, self.heads, self.d), 1.0)
        v_aug = augment(blocks_of(v_in, self.batch, self.ck, self.pad_k, self.heads, self.dv), 1.0)
        if self.toeplitz:
            bias = pad_axis(ops.flip(pad_axis(ops.flip(bias_in, 1), 1, self.pad_q), 1), 1, self.pad_k)
        elif self.has_bias:
            bias = expand_bias(bias_in)
            if self.bias_dims[2] != 1:
                bias = pad_axis(bias, 2, self.pad_q)
            if self.bias_dims[3] != 1:
                bias = pad_axis(bias, 3, self.pad_k)
        else:
            bias = None
        return Operands(qs, k_aug, v_aug, bias)

    def edge_fill(self, i0: Any, j0: Any, width: int) -> Any:
        """Rank 4: 0 where the `cq × width` block at (i0, j0) is causal-visible and a real key, else NEG_INF."""
        keys = ops.arange(width, dtype="int32")[None, :]
        m = None
        if self.causal:  # query i0 + a sees key j0 + b iff a - b >= j0 - i0
            m = (ops.arange(self.cq, dtype="int32")[:, None] - keys) >= (j0 - i0)
        if self.ragged_k:
            valid = keys < self.tk - j0
            m = valid if m is None else ops.logical_and(m, valid)
        return ops.where(m, 0.0, NEG_INF)[None, None]

    def forward_range(self, i: Any) -> tuple[Any, Any]:
        """`(plain, end)` for query block i: key blocks [0, plain) need no causal/padding
        mask, [plain, end) do."""
        nk, ck = self.nk, self.ck
        end, plain = nk, nk
        if self.causal:
            end = minimum(nk, ((i + 1) * self.cq - 1) // ck + 1)
            plain = minimum(end, (i * self.cq + 1) // ck)
        if self.ragged_k:
            plain = minimum(plain, nk - 1)
        return plain, end

    def backward_range(self, j: Any) -> tuple[Any, Any]:
        """`(first, plain)` for key block j: query blocks [first, plain) need the
        causal/padding mask, [plain, nq) don't."""
        first, plain = 0, 0
        if self.causal:
            first = (j * self.ck) // self.cq
            plain = minimum(self.nq, ceil_div((j + 1) * self.ck - 1, self.cq))
        if self.ragged_k:
            plain = ops.where(j == self.nk - 1, self.nq, plain)
        return first, plain

    def leading_keys(self, block: Any, width: int) -> Any:
        """The first `width` keys (axis 2) of a key or value block."""
        return block if width == self.ck else block[:, :, :width]
