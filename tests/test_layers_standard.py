"""Standard checks (shape, weights, config, functional, saving, mixed precision,
XLA) of every keras_tfm layer, through the shared `run_layer_test` helper."""

import numpy as np
import pytest
from layer_test_utils import run_layer_test

from keras_tfm import layers as L

B, T, D, H = 2, 6, 16, 2
rng = np.random.default_rng(0)
X = rng.normal(size=(B, T, D)).astype("float32")
CONTEXT = rng.normal(size=(B, 4, D)).astype("float32")
PADDING = np.array([[True] * T, [True] * 4 + [False] * 2])
CONTEXT_PADDING = np.array([[True] * 4, [True] * 3 + [False]])
IDS = np.array([[3, 5, 7, 1, 2, 9], [4, 8, 2, 0, 0, 0]], dtype="int32")

POSITIONS = [None, "rope", "alibi", "relative"]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("position", POSITIONS)
def test_self_attention(position, causal):
    n_weights = 8 + (position == "relative")
    run_layer_test(
        L.MultiHeadSelfAttention,
        dict(num_heads=H, causal=causal, position=position, relative_num_buckets=8, relative_max_distance=16),
        X,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=n_weights,
        call_kwargs=dict(padding_mask=PADDING),
    )


def test_self_attention_returns_scores_and_other_dims():
    run_layer_test(
        L.MultiHeadSelfAttention,
        dict(num_heads=H, key_dim=4, value_dim=6, output_dim=8, use_bias=False),
        X,
        expected_output_shape=[(B, T, 8), (B, H, T, T)],
        expected_num_trainable_weights=4,
        call_kwargs=dict(return_attention_scores=True),
        run_mixed_precision=False,
    )


def test_cross_attention():
    run_layer_test(
        L.CrossAttention,
        dict(num_heads=H),
        (X, CONTEXT),
        expected_output_shape=[(B, T, D), (B, H, T, 4)],
        expected_num_trainable_weights=8,
        call_kwargs=dict(context_mask=CONTEXT_PADDING, return_attention_scores=True),
    )


def test_positional_encoding():
    run_layer_test(
        L.PositionalEncoding,
        {},
        X,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=0,
        call_kwargs=dict(start_index=3),
    )


def test_learned_positional_embedding():
    run_layer_test(
        L.LearnedPositionalEmbedding,
        dict(max_length=10),
        X,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=1,
        call_kwargs=dict(start_index=2),
    )


def test_rotary_embedding():
    q = rng.normal(size=(B, T, H, 8)).astype("float32")
    run_layer_test(
        L.RotaryEmbedding,
        {},
        q,
        expected_output_shape=(B, T, H, 8),
        expected_num_trainable_weights=0,
        call_kwargs=dict(start_index=1),
    )


def test_alibi_bias():
    _, (bias,) = run_layer_test(
        L.AlibiBias,
        dict(num_heads=4),
        (3, 5),
        expected_output_shape=(4, 3, 5),
        expected_num_trainable_weights=0,
        call_kwargs=dict(query_offset=2),
        tensor_inputs=False,
        float32_outputs=True,
    )
    # Query 0 sits at position 2: zero bias on key 2, −m·|2 − j| elsewhere.
    np.testing.assert_allclose(bias[:, 0, 2], 0.0)
    np.testing.assert_allclose(bias[0, 0, :], -0.25 * np.array([2, 1, 0, 1, 2]), rtol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bias(bidirectional):
    layer, (bias,) = run_layer_test(
        L.RelativePositionBias,
        dict(
            num_heads=H,
            num_buckets=8,
            max_distance=16,
            bidirectional=bidirectional,
            embeddings_initializer="random_normal",
        ),
        (4, 4),
        expected_output_shape=(H, 4, 4),
        expected_num_trainable_weights=1,
        tensor_inputs=False,
        float32_outputs=True,
    )
    table = layer.get_weights()[0]
    buckets = np.asarray(
        L.relative_position_bucket(np.arange(4)[None, :] - np.arange(4)[:, None], bidirectional, 8, 16)
    )
    np.testing.assert_allclose(bias, np.transpose(table[buckets], (2, 0, 1)), rtol=1e-6)


@pytest.mark.parametrize("scale", [False, True])
def test_token_embedding(scale):
    run_layer_test(
        L.TokenEmbedding,
        dict(vocabulary_size=10, d_model=D, scale=scale, mask_zero=True),
        IDS,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=1,
    )


def test_token_embedding_reverse():
    layer, (logits,) = run_layer_test(
        L.TokenEmbedding,
        dict(vocabulary_size=10, d_model=D),
        X,
        expected_output_shape=(B, T, 10),
        expected_num_trainable_weights=1,
        call_kwargs=dict(reverse=True),
        float32_outputs=True,
    )
    np.testing.assert_allclose(logits, X @ layer.get_weights()[0].T, atol=1e-5)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", None])
def test_token_and_position_embedding(position):
    run_layer_test(
        L.TokenAndPositionEmbedding,
        dict(vocabulary_size=10, d_model=D, max_length=8, position=position, scale=True, mask_zero=True),
        IDS,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=1 + (position == "learned"),
    )


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_feed_forward(activation):
    run_layer_test(
        L.FeedForward,
        dict(d_ff=32, activation=activation, dropout=0.1),
        X,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=4,
    )


BLOCK_CASES = [
    dict(),  # post-norm encoder block
    dict(norm_first=True),
    dict(causal=True, norm_first=True),
    dict(causal=True, position="rope"),
    dict(causal=True, position="alibi", norm_first=True),
    dict(position="relative"),
    dict(causal=True, cross_attention=True, activation="gelu"),
]


@pytest.mark.parametrize(
    "kwargs", BLOCK_CASES, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "default"
)
def test_transformer_block(kwargs):
    cross = kwargs.get("cross_attention", False)
    n_weights = 8 + 4 + 2 + 2 + (8 + 2 if cross else 0) + (kwargs.get("position") == "relative")
    call_kwargs = dict(padding_mask=PADDING)
    args = (X,)
    if cross:
        args = (X, CONTEXT)
        call_kwargs["context_mask"] = CONTEXT_PADDING
    run_layer_test(
        L.TransformerBlock,
        dict(d_model=D, num_heads=H, d_ff=32, dropout=0.1, **kwargs),
        args,
        expected_output_shape=(B, T, D),
        expected_num_trainable_weights=n_weights,
        call_kwargs=call_kwargs,
    )


def test_output_head_logits():
    run_layer_test(
        L.OutputHead,
        dict(vocabulary_size=12),
        X,
        expected_output_shape=(B, T, 12),
        expected_num_trainable_weights=2,
        float32_outputs=True,
    )


def test_output_head_probabilities_with_temperature():
    layer, (probs,) = run_layer_test(
        L.OutputHead,
        dict(vocabulary_size=12, output="probabilities", temperature=0.5, use_bias=False),
        X,
        expected_output_shape=(B, T, 12),
        expected_num_trainable_weights=1,
        float32_outputs=True,
    )
    logits = X @ layer.get_weights()[0]
    expected = np.exp(logits / 0.5 - (logits / 0.5).max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(probs, expected, atol=1e-5)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    # A per-call temperature overrides the default; higher τ flattens.
    hot = np.asarray(layer(X, temperature=4.0))
    assert hot.max() < probs.max()


# ------------------------------------------------------------------ vision tokens
def test_patch_embedding_equals_dense_on_flattened_patches():
    x = np.random.default_rng(1).random((2, 8, 12, 3)).astype("float32")
    layer, (y,) = run_layer_test(
        L.PatchEmbedding,
        dict(patch_size=4, d_model=16),
        x,
        expected_output_shape=(2, 6, 16),
        expected_num_trainable_weights=2,
    )
    kernel, bias = layer.get_weights()  # (4, 4, 3, 16), (16,)
    # patch (row 1, col 2) is token 1·3 + 2 = 5
    expected = np.einsum("bhwc,hwcd->bd", x[:, 4:8, 8:12, :], kernel) + bias
    np.testing.assert_allclose(y[:, 5], expected, rtol=1e-5, atol=1e-5)
    assert layer.compute_output_shape((None, 8, 12, 3)) == (None, 6, 16)
    rectangular = L.PatchEmbedding((2, 4), 8)
    assert L.PatchEmbedding.from_config(rectangular.get_config()).get_config() == rectangular.get_config()


def test_class_token_prepends_a_learned_vector():
    _, (y,) = run_layer_test(
        L.ClassToken,
        {},
        np.ones((2, 5, 4), "float32"),
        expected_output_shape=(2, 6, 4),
        expected_num_trainable_weights=1,
    )
    np.testing.assert_array_equal(y[:, 0], 0.0)  # zeros-initialised [CLS] vector
    np.testing.assert_array_equal(y[:, 1:], 1.0)


def test_positional_encoding_2d_halves_encode_row_and_column():
    rows, cols, d = 3, 4, 8
    table = np.asarray(L.sinusoidal_table_2d(rows, cols, d))
    row_table = np.asarray(L.sinusoidal_table(np.arange(rows, dtype="float32"), d // 2))
    col_table = np.asarray(L.sinusoidal_table(np.arange(cols, dtype="float32"), d // 2))
    for r in range(rows):
        for c in range(cols):
            np.testing.assert_allclose(table[r * cols + c, : d // 2], row_table[r], atol=1e-6)
            np.testing.assert_allclose(table[r * cols + c, d // 2 :], col_table[c], atol=1e-6)
    # with a [CLS] prefix: the prefix gets nothing
    _, (y,) = run_layer_test(
        L.PositionalEncoding2D,
        dict(grid_size=(rows, cols), num_prefix_tokens=1),
        np.zeros((1, 1 + rows * cols, d), "float32"),
        expected_output_shape=(1, 1 + rows * cols, d),
        expected_num_trainable_weights=0,
    )
    np.testing.assert_array_equal(y[0, 0], 0.0)
    np.testing.assert_allclose(y[0, 1:], table, atol=1e-6)
    # grid inputs
    grid = np.asarray(L.PositionalEncoding2D()(np.zeros((1, rows, cols, d), "float32")))
    np.testing.assert_allclose(grid.reshape(rows * cols, d), table, atol=1e-6)
