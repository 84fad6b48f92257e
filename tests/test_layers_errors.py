"""Bad inputs raise a ValueError/TypeError whose message names the argument."""

import numpy as np
import pytest

from keras_tfm import layers as L

B, T, D, H = 2, 5, 16, 4
X = np.zeros((B, T, D), "float32")


def test_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match="num_heads"):
        L.MultiHeadSelfAttention(3)(X)
    with pytest.raises(ValueError, match="num_heads"):
        L.TransformerBlock(16, 3, 32)
    with pytest.raises(ValueError, match="num_heads"):
        L.CrossAttention(3)(X, X)


@pytest.mark.parametrize("num_heads", [2.0, "2", None, True])
def test_non_int_num_heads(num_heads):
    with pytest.raises(TypeError, match="num_heads"):
        L.MultiHeadSelfAttention(num_heads)
    with pytest.raises(TypeError, match="num_heads"):
        L.TransformerBlock(D, num_heads, 32)


@pytest.mark.parametrize("num_heads", [0, -2])
def test_non_positive_num_heads(num_heads):
    with pytest.raises(ValueError, match="num_heads"):
        L.MultiHeadSelfAttention(num_heads)
    with pytest.raises(ValueError, match="num_heads"):
        L.AlibiBias(num_heads)


@pytest.mark.parametrize(
    "make",
    [
        lambda: L.MultiHeadSelfAttention(H),
        lambda: L.PositionalEncoding(),
        lambda: L.LearnedPositionalEmbedding(8),
        lambda: L.TransformerBlock(D, H, 32),
    ],
    ids=["mhsa", "sinusoidal", "learned", "block"],
)
def test_wrong_input_rank(make):
    with pytest.raises(ValueError, match="inputs"):
        make()(np.zeros((B, D), "float32"))


def test_wrong_rank_for_cross_attention_and_rotary():
    with pytest.raises(ValueError, match="context"):
        L.CrossAttention(H)(X, np.zeros((B, D), "float32"))
    with pytest.raises(ValueError, match="inputs"):
        L.RotaryEmbedding()(X)


def test_padding_mask_shape_mismatch():
    layer = L.MultiHeadSelfAttention(H)
    with pytest.raises(ValueError, match="padding_mask"):
        layer(X, padding_mask=np.ones((B, T + 1), bool))
    with pytest.raises(ValueError, match="padding_mask"):
        layer(X, padding_mask=np.ones((B, T, 1), bool))
    with pytest.raises(ValueError, match="padding_mask"):
        L.TransformerBlock(D, H, 32)(X, padding_mask=np.ones((B + 1, T), bool))
    with pytest.raises(ValueError, match="context_mask"):
        L.CrossAttention(H)(X, X[:, :3], context_mask=np.ones((B, 4), bool))


def test_attention_mask_shape_mismatch():
    with pytest.raises(ValueError, match="attention_mask"):
        L.MultiHeadSelfAttention(H)(X, attention_mask=np.ones((B, T, T + 2), bool))
    with pytest.raises(ValueError, match="attention_mask"):
        L.MultiHeadSelfAttention(H)(X, attention_mask=np.ones((T,), bool))
    with pytest.raises(ValueError, match="attention_mask"):
        L.CrossAttention(H)(X, X[:, :3], attention_mask=np.ones((B, T, T), bool))


def test_unknown_activation():
    with pytest.raises(ValueError, match="activation"):
        L.FeedForward(32, activation="swishy")
    with pytest.raises(ValueError, match="activation"):
        L.TransformerBlock(D, H, 32, activation="tanhh")


def test_unknown_position_scheme():
    with pytest.raises(ValueError, match="position"):
        L.MultiHeadSelfAttention(H, position="learned")
    with pytest.raises(ValueError, match="position"):
        L.TransformerBlock(D, H, 32, position="sinusoid")
    with pytest.raises(ValueError, match="position"):
        L.TokenAndPositionEmbedding(10, D, max_length=8, position="rope")


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5])
def test_bad_dropout(rate):
    with pytest.raises(ValueError, match="dropout"):
        L.MultiHeadSelfAttention(H, dropout=rate)
    with pytest.raises(ValueError, match="dropout"):
        L.FeedForward(32, dropout=rate)
    with pytest.raises(ValueError, match="dropout"):
        L.TransformerBlock(D, H, 32, dropout=rate)
    with pytest.raises(ValueError, match="attention_dropout"):
        L.TransformerBlock(D, H, 32, attention_dropout=rate)


def test_non_number_dropout():
    with pytest.raises(TypeError, match="dropout"):
        L.FeedForward(32, dropout="0.1")


def test_sequence_longer_than_max_length():
    with pytest.raises(ValueError, match="max_length"):
        L.LearnedPositionalEmbedding(4)(X)
    with pytest.raises(ValueError, match="max_length"):
        L.LearnedPositionalEmbedding(6)(X, start_index=2)
    ids = np.ones((B, T), "int32")
    with pytest.raises(ValueError, match="max_length"):
        L.TokenAndPositionEmbedding(10, D, max_length=4)(ids)
    with pytest.raises(ValueError, match="max_length"):
        L.TokenAndPositionEmbedding(10, D, max_length=4, position="sinusoidal")(ids)
    with pytest.raises(ValueError, match="max_length"):
        L.TokenAndPositionEmbedding(10, D, position="learned")


def test_float_inputs_to_token_embedding():
    with pytest.raises(TypeError, match="inputs"):
        L.TokenEmbedding(10, D)(np.ones((B, T), "float32"))
    with pytest.raises(TypeError, match="inputs"):
        L.TokenAndPositionEmbedding(10, D, position=None)(np.ones((B, T), "float32"))


def test_unknown_attention_impl():
    with pytest.raises(ValueError, match="attention_impl"):
        L.MultiHeadSelfAttention(H, attention_impl="flashy")
    with pytest.raises(ValueError, match="attention_impl"):
        L.TransformerBlock(D, H, 32, attention_impl="flashy")
    with pytest.raises(ValueError, match="attention_impl"):
        L.dot_product_attention(X[:, :, None], X[:, :, None], X[:, :, None], attention_impl="flashy")


def test_cross_attention_with_position():
    with pytest.raises(ValueError, match="position"):
        L.CrossAttention(H, position="rope")


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_output_head_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        L.OutputHead(10, temperature=temperature)
    with pytest.raises(ValueError, match="temperature"):
        L.softmax_with_temperature(np.zeros((1, 3), "float32"), temperature)
    with pytest.raises(ValueError, match="temperature"):
        L.OutputHead(10, output="probabilities")(X, temperature=temperature)


def test_output_head_unknown_output():
    with pytest.raises(ValueError, match="output"):
        L.OutputHead(10, output="argmax")


def test_transformer_block_input_width():
    with pytest.raises(ValueError, match="d_model"):
        L.TransformerBlock(32, H, 64)(X)


def test_cross_attention_block_without_context():
    layer = L.TransformerBlock(D, H, 32, cross_attention=True)
    with pytest.raises(ValueError, match="context"):
        layer(X)
    with pytest.raises(ValueError, match="context"):
        L.TransformerBlock(D, H, 32)(X, X)
    with pytest.raises(ValueError, match="context"):
        L.CrossAttention(H)(X)


def test_cache_arguments():
    layer = L.MultiHeadSelfAttention(H, causal=True)
    layer(X)
    cache = layer.init_cache(B, 8)
    with pytest.raises(ValueError, match="cache_index"):
        layer(X, cache=cache)
    with pytest.raises(ValueError, match="cache"):
        layer(X, cache=cache[0], cache_index=0)
    # Only the (keys, values) pair of `init_cache` is a cache; a stacked rank-5 tensor is not.
    with pytest.raises(ValueError, match=r"pair \(keys, values\) made by `init_cache`.*rank 5"):
        layer(X, cache=np.zeros((B, 2, 8, H, D // H), "float32"), cache_index=0)


def test_rope_needs_even_head_dim():
    with pytest.raises(ValueError, match="key_dim"):
        L.MultiHeadSelfAttention(H, key_dim=5, position="rope")(X)
    with pytest.raises(ValueError, match="even"):
        L.RotaryEmbedding()(np.zeros((B, T, H, 5), "float32"))


def test_bad_attention_core_ranks():
    with pytest.raises(ValueError, match="query"):
        L.dot_product_attention(X, X[:, :, None], X[:, :, None])
    q = X.reshape(B, T, H, D // H)
    with pytest.raises(ValueError, match="mask"):
        L.dot_product_attention(q, q, q, mask=np.ones((T,), bool))


def test_patch_embedding_errors():
    with pytest.raises(ValueError, match="patch_size"):
        L.PatchEmbedding(3, 8)(np.zeros((1, 8, 8, 1), "float32"))
    with pytest.raises(ValueError, match="patch_size"):
        L.PatchEmbedding((2, 2, 2), 8)
    with pytest.raises(ValueError, match="d_model"):
        L.PatchEmbedding(2, 0)


def test_positional_encoding_2d_errors():
    with pytest.raises(ValueError, match="even"):
        L.PositionalEncoding2D(grid_size=(2, 2))(np.zeros((1, 4, 5), "float32"))
    with pytest.raises(ValueError, match="grid_size"):
        L.PositionalEncoding2D()(np.zeros((1, 4, 4), "float32"))
    with pytest.raises(ValueError, match="length"):
        L.PositionalEncoding2D(grid_size=(2, 2))(np.zeros((1, 5, 4), "float32"))
    with pytest.raises(ValueError, match="grid_size"):
        L.PositionalEncoding2D(grid_size=(2,))
