"""Attention, the heart of the Transformer.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V
    MultiHead(X_q, X_kv) = Concat(head_1, …, head_H) W^O,
        head_h = Attention(X_q W_h^Q, X_kv W_h^K, X_kv W_h^V)

Read in this order:
    reference.py        the formula, as it reads (autodiff); every other
                        implementation is tested against it
    core.py             `dot_product_attention`: the contract (layouts, masks,
                        biases, causal) and the registry of implementations
    masks.py            boolean masks, True = may attend
    toeplitz_bias.py    score biases B, dense or stored in O(T)
    offset_bias.py, alibi.py, relative_position_bias.py
                        the position biases (functions of key − query)
    multi_head.py       the projections and the call into the core
    self_attention.py, cross_attention.py
                        the layers
Implementations and fast paths:
    standard.py         the full score matrix with a memory-saving gradient
    fused.py            the backend's kernel (cuDNN flash attention on JAX GPUs)
    auto.py             the default choice among standard / chunked / fused
    chunked.py, row_blocks.py, lengths.py
                        exact attention in O(T) memory
    local.py, linear.py sliding window; kernelized linear attention
    projections.py      Q, K, V in one matmul for plain float kernels
    decoding.py         the key/value cache and the single-query step
"""

# Importing the implementations registers them in ATTENTION_IMPLS.
from keras_tfm.layers.attention import auto, chunked, fused, linear, local, reference, standard  # noqa: F401
from keras_tfm.layers.attention.alibi import AlibiBias, alibi_slopes
from keras_tfm.layers.attention.core import (
    ATTENTION_IMPLS,
    AttentionInputs,
    dot_product_attention,
    register_attention_impl,
)
from keras_tfm.layers.attention.cross_attention import CrossAttention
from keras_tfm.layers.attention.masks import causal_mask, merge_masks
from keras_tfm.layers.attention.multi_head import ATTENTION_POSITIONS, MultiHeadAttentionBase
from keras_tfm.layers.attention.offset_bias import OffsetBias
from keras_tfm.layers.attention.reference import attention_weights, reference_attention
from keras_tfm.layers.attention.relative_position_bias import RelativePositionBias, relative_position_bucket
from keras_tfm.layers.attention.self_attention import MultiHeadSelfAttention
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias

__all__ = [
    "ATTENTION_IMPLS",
    "ATTENTION_POSITIONS",
    "AlibiBias",
    "AttentionInputs",
    "CrossAttention",
    "MultiHeadAttentionBase",
    "MultiHeadSelfAttention",
    "OffsetBias",
    "RelativePositionBias",
    "ToeplitzBias",
    "alibi_slopes",
    "attention_weights",
    "causal_mask",
    "dot_product_attention",
    "merge_masks",
    "reference_attention",
    "register_attention_impl",
    "relative_position_bucket",
]
