"""The core Transformer layers of keras_tfm."""

# Registered attention-core implementations (import for the side effect).
from keras_tfm.layers import attention  # noqa: F401
from keras_tfm.layers.attention.alibi import AlibiBias, alibi_slopes
from keras_tfm.layers.attention.core import (
    ATTENTION_IMPLS,
    attention_weights,
    dot_product_attention,
    register_attention_impl,
)
from keras_tfm.layers.attention.cross_attention import CrossAttention
from keras_tfm.layers.attention.masks import causal_mask, merge_masks
from keras_tfm.layers.attention.multi_head import MultiHeadAttentionBase
from keras_tfm.layers.attention.relative_position_bias import RelativePositionBias, relative_position_bucket
from keras_tfm.layers.attention.self_attention import MultiHeadSelfAttention
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding, TokenEmbedding
from keras_tfm.layers.feed_forward import FeedForward
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_tfm.layers.output_head import OutputHead, softmax_with_temperature
from keras_tfm.layers.patch_embedding import ClassToken, PatchEmbedding  # noqa: E402,F401
from keras_tfm.layers.positional_encoding import PositionalEncoding, sinusoidal_table
from keras_tfm.layers.positional_encoding_2d import PositionalEncoding2D, sinusoidal_table_2d  # noqa: E402,F401
from keras_tfm.layers.rms_norm import RMSNorm
from keras_tfm.layers.rotary_embedding import RotaryEmbedding
from keras_tfm.layers.transformer_block import TransformerBlock
