"""Vision Transformer (ViT) image classifier, encoder-only (Dosovitskiy et al. 2021).

    z_0   = [x_cls ; patches W_E] + PE                "patch_embedding", "class_token",
                                                      "position_encoding", "embedding_dropout"
    z_i   = TransformerBlock_i(z_{i-1}), pre-norm     "encoder_block_{i}"
    y     = Dense(LN(z_L)[:, 0])                      "final_norm", "cls_pooling", "classifier"

`vit_classifier(...)` returns a `ViT` (functional `keras.Model` subclass whose
parts are attributes). Layer names: `patch_embedding` (`PatchEmbedding`), `class_token`
(`ClassToken`), `position_encoding` (`PositionalEncoding2D` for
position="sinusoidal2d", `LearnedPositionalEmbedding` for "learned"),
`embedding_dropout`, `encoder_block_{i}`, `final_norm`, `cls_pooling` (`SequencePooling("cls")`)
or `mean_pooling` (`MeanPatchPooling`, mean of the patch tokens), `head_dropout`,
`classifier` (float32 logits). The input is `images`, float
`(B, height, width, channels)` (rescale to ~[0, 1] yourself).
"""

import functools
import types

import keras

from keras_tfm.checks import check_choice, check_positive_int, check_rate
from keras_tfm.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_tfm.layers.patch_embedding import ClassToken, PatchEmbedding, as_pair
from keras_tfm.layers.positional_encoding_2d import PositionalEncoding2D
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models.base import TransformerModel, classification_loss_and_accuracy
from keras_tfm.models.heads import SequencePooling
from keras_tfm.models.layout import bind_sizes, model_sizes
from keras_tfm.models.options import arguments
from keras_tfm.models.parts import check_num_classes
from keras_tfm.models.presets import check_known_options

VIT_POSITIONS = ("sinusoidal2d", "learned")
VIT_POOLINGS = ("cls", "mean")


@keras.saving.register_keras_serializable(package="keras_tfm")
class ViT(TransformerModel):
    """Vision Transformer image classifier (see the module docstring).

    Args: see `vit_classifier` (the same arguments).

    Attributes:
        patch_embedding: the `PatchEmbedding` (patches → d_model).
        class_token: the `ClassToken` ([CLS] vector).
        position_encoding: `PositionalEncoding2D` or `LearnedPositionalEmbedding`.
        embedding_dropout: `Dropout`.
        blocks: list of pre-norm `TransformerBlock`s (`encoder_blocks` is the same).
        final_norm: the final `LayerNormalization`.
        pooling_layer: `SequencePooling("cls")` or `MeanPatchPooling`.
        head_dropout: `Dropout`; head: the `Dense` classifier (float32 logits).
        image_size, patch_size ((h, w) tuples), num_classes, num_layers,
        num_heads, d_model, grid_size ((rows, cols)).
        config: the constructor arguments (dict).
    """

    def __init__(
        self,
        image_size: int | tuple[int, int],
        patch_size: int | tuple[int, int],
        num_classes: int,
        num_layers: int = 4,
        num_heads: int = 4,
        d_model: int = 64,
        d_ff: int | None = None,
        num_channels: int = 3,
        dropout: float = 0.0,
        attention_dropout: float | None = None,
        position: str = "sinusoidal2d",
        pooling: str = "cls",
        activation: str = "gelu",
        layer_norm_epsilon: float = 1e-6,
        dtype=None,
        name: str = "vit",
        **kwargs,
    ):
        config = check_vit_arguments(arguments(locals()))
        sizes = bind_sizes(model_sizes(config["d_model"], config["num_heads"], config["d_ff"]))
        parts = vit_parts(**config)

        # === Functional graph ===
        p = types.SimpleNamespace(**parts)
        images = keras.Input(shape=(*config["image_size"], config["num_channels"]), name="images")
        x = p.embedding_dropout(p.position_encoding(p.class_token(p.patch_embedding(images))))
        for block in p.blocks:
            x = block(x)
        logits = p.head(p.head_dropout(p.pooling_layer(p.final_norm(x))))
        self._init_model(images, logits, name, config, layout_sizes=sizes, **kwargs)

        # === Parts ===
        (height, width), (ph, pw) = config["image_size"], config["patch_size"]
        sizes = {
            k: config[k]
            for k in ("image_size", "patch_size", "num_classes", "num_layers", "num_heads", "d_model")
        }
        self._set_parts(dict(sizes, grid_size=(height // ph, width // pw)), **parts)
        self._compile_defaults()  # `TransformerModel.compile`'s; a user's compile replaces them

    def _default_loss(self):
        """Sparse cross-entropy from the logits and accuracy."""
        return classification_loss_and_accuracy()

    def _check_tokenizer(self, tokenizer):
        raise TypeError(
            f"`tokenizer`: a ViT classifies images and takes no tokenizer; received {type(tokenizer).__name__}."
        )

    @property
    def encoder_blocks(self) -> list:
        """The `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks


def check_vit_arguments(config: dict) -> dict:
    """The `ViT` constructor's arguments, checked (image and patch sizes as pairs, `d_ff`
    resolved to 4·d_model when None)."""
    config = dict(config)
    height, width = config["image_size"] = as_pair("image_size", config["image_size"])
    ph, pw = config["patch_size"] = as_pair("patch_size", config["patch_size"])
    if height % ph or width % pw:
        raise ValueError(
            f"`image_size` {(height, width)} must be a multiple of `patch_size` {(ph, pw)} in each dimension."
        )
    config["num_classes"] = check_num_classes(config["num_classes"])
    for name in ("num_layers", "num_heads", "d_model", "num_channels"):
        config[name] = check_positive_int(name, config[name])
    d_model = config["d_model"]
    config["d_ff"] = check_positive_int("d_ff", config["d_ff"] if config["d_ff"] is not None else 4 * d_model)
    config["dropout"] = check_rate("dropout", config["dropout"])
    if d_model % config["num_heads"]:
        raise ValueError(f"`d_model`={d_model} must be divisible by `num_heads`={config['num_heads']}.")
    check_choice("position", config["position"], VIT_POSITIONS)
    if config["position"] == "sinusoidal2d" and d_model % 2:
        raise ValueError(f"position='sinusoidal2d' needs an even `d_model`; received {d_model}.")
    check_choice("pooling", config["pooling"], VIT_POOLINGS)
    return config


def vit_parts(
    image_size, patch_size, num_classes, num_layers, num_heads, d_model, d_ff, num_channels, dropout,
    attention_dropout, position, pooling, activation, layer_norm_epsilon, dtype,
) -> dict:  # fmt: skip
    """The layers of a `ViT` of these (checked) arguments, by attribute name."""
    rows, cols = image_size[0] // patch_size[0], image_size[1] // patch_size[1]
    if position == "sinusoidal2d":
        position_encoding = PositionalEncoding2D(
            grid_size=(rows, cols), num_prefix_tokens=1, dtype=dtype, name="position_encoding"
        )
    else:
        position_encoding = LearnedPositionalEmbedding(
            rows * cols + 1,
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            dtype=dtype,
            name="position_encoding",
        )
    block = functools.partial(
        TransformerBlock,
        d_model,
        num_heads,
        d_ff,
        dropout=dropout,
        attention_dropout=attention_dropout,
        norm_first=True,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        dtype=dtype,
    )
    if pooling == "cls":
        pooling_layer = SequencePooling("cls", dtype=dtype, name="cls_pooling")
    else:
        pooling_layer = MeanPatchPooling(dtype=dtype, name="mean_pooling")
    return dict(
        patch_embedding=PatchEmbedding(patch_size, d_model, dtype=dtype, name="patch_embedding"),
        class_token=ClassToken(dtype=dtype, name="class_token"),
        position_encoding=position_encoding,
        embedding_dropout=keras.layers.Dropout(dropout, dtype=dtype, name="embedding_dropout"),
        blocks=[block(name=f"encoder_block_{i}") for i in range(num_layers)],
        final_norm=keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="final_norm"
        ),
        pooling_layer=pooling_layer,
        head_dropout=keras.layers.Dropout(dropout, dtype=dtype, name="head_dropout"),
        head=keras.layers.Dense(num_classes, dtype="float32", name="classifier"),
    )


def vit_classifier(
    image_size: int | tuple[int, int],
    patch_size: int | tuple[int, int],
    num_classes: int,
    **options,
) -> ViT:
    """Builds a ViT image classifier.

    Args:
        image_size: int or (height, width); multiples of `patch_size`.
        patch_size: int or (height, width) of the patches.
        num_classes: number of classes (logits width, >= 2).
        num_layers, num_heads, d_model: encoder sizes (4, 4, 64).
        d_ff: FFN width (default 4·d_model).
        num_channels: image channels (3; 1 for grayscale).
        dropout: embedding, residual, FFN and head dropout.
        attention_dropout: dropout on attention weights (default `dropout`).
        position: "sinusoidal2d" (fixed, `PositionalEncoding2D`; needs an even
            d_model) or "learned" (one vector per token, [CLS] included).
        pooling: "cls" (the [CLS] token, ViT) or "mean" (mean of the patch
            tokens; the [CLS] token is still prepended).
        activation: FFN activation ("gelu", "relu", "gelu_tanh", "silu").
        layer_norm_epsilon: LayerNorm ε (1e-6 as in ViT).
        dtype: dtype policy of every layer; logits are float32.
        name: model name.

    Returns:
        A `ViT` (functional `keras.Model`): images (B, H, W, C) → logits (B, num_classes).

    Raises:
        ValueError: bad sizes (image not divisible by patch, d_model not
            divisible by num_heads, odd d_model with sinusoidal2d), unknown
            position/pooling. TypeError: unknown keyword.
    """
    return ViT(image_size, patch_size, num_classes, **check_known_options(ViT, options))


@keras.saving.register_keras_serializable(package="keras_tfm")
class MeanPatchPooling(keras.layers.Layer):
    """Mean of the tokens after the [CLS] token: (B, 1 + N, d) → (B, d)."""

    def call(self, inputs):
        return keras.ops.mean(inputs[:, 1:], axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])
