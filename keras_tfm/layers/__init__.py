"""The Transformer layers of keras_tfm: attention (`attention/`), positions,
embeddings, the feed-forward network, norms, the output head and the block."""

from keras_tfm.layers.attention import (
    ATTENTION_IMPLS,
    AlibiBias,
    CrossAttention,
    MultiHeadAttentionBase,
    MultiHeadSelfAttention,
    RelativePositionBias,
    ToeplitzBias,
    alibi_slopes,
    attention_weights,
    causal_mask,
    dot_product_attention,
    merge_masks,
    register_attention_impl,
    relative_position_bucket,
)
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding, TokenEmbedding
from keras_tfm.layers.feed_forward import FeedForward
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_tfm.layers.output_head import LogitsBias, OutputHead, softmax_with_temperature
from keras_tfm.layers.patch_embedding import ClassToken, PatchEmbedding
from keras_tfm.layers.positional_encoding import PositionalEncoding, sinusoidal_table
from keras_tfm.layers.positional_encoding_2d import PositionalEncoding2D, sinusoidal_table_2d
from keras_tfm.layers.rms_norm import RMSNorm
from keras_tfm.layers.rotary_embedding import RotaryEmbedding
from keras_tfm.layers.transformer_block import TransformerBlock

__all__ = [
    "ATTENTION_IMPLS",
    "AlibiBias",
    "ClassToken",
    "CrossAttention",
    "FeedForward",
    "LearnedPositionalEmbedding",
    "LogitsBias",
    "MultiHeadAttentionBase",
    "MultiHeadSelfAttention",
    "OutputHead",
    "PatchEmbedding",
    "PositionalEncoding",
    "PositionalEncoding2D",
    "RMSNorm",
    "RelativePositionBias",
    "RotaryEmbedding",
    "ToeplitzBias",
    "TokenAndPositionEmbedding",
    "TokenEmbedding",
    "TransformerBlock",
    "alibi_slopes",
    "attention_weights",
    "causal_mask",
    "clone_initializer",
    "dot_product_attention",
    "merge_masks",
    "register_attention_impl",
    "relative_position_bucket",
    "sinusoidal_table",
    "sinusoidal_table_2d",
    "softmax_with_temperature",
]
