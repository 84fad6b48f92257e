"""Vision tokens and the ViT classifier (random images: shapes, a training step, round trips)."""

import keras
import numpy as np
import pytest

from keras_tfm.analysis.inspection import attention_maps
from keras_tfm.layers import (
    ClassToken,
    PatchEmbedding,
    PositionalEncoding2D,
    sinusoidal_table,
    sinusoidal_table_2d,
)
from keras_tfm.models import vit_classifier


def _images(b=3, h=8, w=8, c=1, seed=0):
    return np.random.default_rng(seed).random((b, h, w, c)).astype("float32")


def test_patch_embedding_shapes_and_equals_dense_on_flattened_patches():
    layer = PatchEmbedding(4, 16)
    x = _images(2, 8, 12, 3)
    y = np.asarray(layer(x))
    assert y.shape == (2, 6, 16)
    kernel, bias = (np.asarray(v) for v in layer.projection.weights)  # (4, 4, 3, 16), (16,)
    # patch (row 1, col 2) is token 1·3 + 2 = 5
    patch = x[:, 4:8, 8:12, :]
    expected = np.einsum("bhwc,hwcd->bd", patch, kernel) + bias
    np.testing.assert_allclose(y[:, 5], expected, rtol=1e-5, atol=1e-5)
    assert layer.compute_output_shape((None, 8, 12, 3)) == (None, 6, 16)


def test_patch_embedding_errors():
    with pytest.raises(ValueError, match="patch_size"):
        PatchEmbedding(3, 8)(_images(1, 8, 8, 1))
    with pytest.raises(ValueError, match="patch_size"):
        PatchEmbedding((2, 2, 2), 8)
    with pytest.raises(ValueError, match="d_model"):
        PatchEmbedding(2, 0)


def test_class_token_prepends_learned_vector():
    layer = ClassToken()
    x = np.ones((2, 5, 4), "float32")
    y = np.asarray(layer(x))
    assert y.shape == (2, 6, 4)
    np.testing.assert_array_equal(y[:, 0], 0.0)
    np.testing.assert_array_equal(y[:, 1:], 1.0)


def test_positional_encoding_2d_halves_encode_row_and_column():
    rows, cols, d = 3, 4, 8
    table = np.asarray(sinusoidal_table_2d(rows, cols, d))
    row_table = np.asarray(sinusoidal_table(np.arange(rows, dtype="float32"), d // 2))
    col_table = np.asarray(sinusoidal_table(np.arange(cols, dtype="float32"), d // 2))
    for r in range(rows):
        for c in range(cols):
            np.testing.assert_allclose(table[r * cols + c, : d // 2], row_table[r], atol=1e-6)
            np.testing.assert_allclose(table[r * cols + c, d // 2 :], col_table[c], atol=1e-6)
    # with a [CLS] prefix: the prefix gets nothing
    layer = PositionalEncoding2D(grid_size=(rows, cols), num_prefix_tokens=1)
    y = np.asarray(layer(np.zeros((1, 1 + rows * cols, d), "float32")))
    np.testing.assert_array_equal(y[0, 0], 0.0)
    np.testing.assert_allclose(y[0, 1:], table, atol=1e-6)
    # grid inputs
    grid = np.asarray(PositionalEncoding2D()(np.zeros((1, rows, cols, d), "float32")))
    np.testing.assert_allclose(grid.reshape(rows * cols, d), table, atol=1e-6)


def test_positional_encoding_2d_errors():
    with pytest.raises(ValueError, match="even"):
        PositionalEncoding2D(grid_size=(2, 2))(np.zeros((1, 4, 5), "float32"))
    with pytest.raises(ValueError, match="grid_size"):
        PositionalEncoding2D()(np.zeros((1, 4, 4), "float32"))
    with pytest.raises(ValueError, match="length"):
        PositionalEncoding2D(grid_size=(2, 2))(np.zeros((1, 5, 4), "float32"))
    with pytest.raises(ValueError, match="grid_size"):
        PositionalEncoding2D(grid_size=(2,))


@pytest.mark.parametrize(
    "layer",
    [
        PatchEmbedding((2, 4), 8, name="p"),
        ClassToken(name="c"),
        PositionalEncoding2D(grid_size=(2, 3), num_prefix_tokens=1, name="e"),
    ],
)
def test_layers_get_config_round_trip(layer):
    clone = layer.__class__.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


def _tiny_vit(**kwargs):
    options = dict(
        image_size=8, patch_size=4, num_classes=3, num_layers=2, num_heads=2, d_model=16, num_channels=1
    )
    options.update(kwargs)
    return vit_classifier(**options)


def test_vit_shapes_layer_names_and_training_step():
    model = _tiny_vit()
    x = _images(4)
    assert model(x).shape == (4, 3)
    names = [layer.name for layer in model.layers]
    for expected in (
        "patch_embedding",
        "class_token",
        "position_encoding",
        "encoder_block_0",
        "encoder_block_1",
        "final_norm",
        "cls_pooling",
        "classifier",
    ):
        assert expected in names
    assert model.get_layer("encoder_block_0").norm_first
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    y = np.array([0, 1, 2, 1])
    before = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    history = model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert any(
        not np.allclose(a, keras.ops.convert_to_numpy(b)) for a, b in zip(before, model.trainable_variables)
    )
    # class token is trained
    assert np.abs(np.asarray(model.get_layer("class_token").token)).sum() > 0
    maps = attention_maps(model, x)
    assert maps["encoder_block_0"].shape == (4, 2, 5, 5)


@pytest.mark.parametrize("options", [{}, {"position": "learned", "pooling": "mean", "image_size": (8, 4)}])
def test_vit_keras_round_trip(tmp_path, options):
    model = _tiny_vit(**options)
    x = _images(2, *(options.get("image_size", (8, 8))))
    expected = np.asarray(model(x))
    path = str(tmp_path / "vit.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(x)), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"image_size": 10}, "multiple of `patch_size`"),
        ({"d_model": 15, "num_heads": 3}, "even"),
        ({"num_heads": 3}, "divisible"),
        ({"position": "rope"}, "position"),
        ({"pooling": "max"}, "pooling"),
        ({"num_classes": 0}, "num_classes"),
    ],
)
def test_vit_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _tiny_vit(**kwargs)


def test_vit_digits_example_data_errors(tmp_path, monkeypatch):
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "vit_digits.py")
    spec = importlib.util.spec_from_file_location("example_vit_digits", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with pytest.raises(FileNotFoundError, match="--data"):
        example.find_digits_csv(str(tmp_path / "missing.csv.gz"))
    # a tiny digits-format CSV (64 pixels in 0..16, then the label) loads as 8×8×1 images
    rows = np.concatenate(
        [np.random.default_rng(0).integers(0, 17, (20, 64)), np.arange(20)[:, None] % 10], axis=1
    )
    np.savetxt(tmp_path / "digits.csv", rows, fmt="%d", delimiter=",")
    images, labels = example.load_digits(str(tmp_path / "digits.csv"))
    assert images.shape == (20, 8, 8, 1) and images.max() <= 1.0 and list(labels[:3]) == [0, 1, 2]
    train, test = example.stratified_split(labels, 0.5)
    assert len(set(train) & set(test)) == 0 and len(train) + len(test) == 20
