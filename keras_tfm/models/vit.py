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

import keras

from keras_tfm.checks import check_choice, check_positive_int, check_rate
from keras_tfm.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_tfm.layers.patch_embedding import ClassToken, PatchEmbedding, _pair
from keras_tfm.layers.positional_encoding_2d import PositionalEncoding2D
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.heads import SequencePooling
from keras_tfm.models.layout import bind_sizes, model_sizes
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
        # === Arguments ===
        height, width = _pair("image_size", image_size)
        ph, pw = _pair("patch_size", patch_size)
        if height % ph or width % pw:
            raise ValueError(
                f"`image_size` {(height, width)} must be a multiple of `patch_size` {(ph, pw)} in each dimension."
            )
        num_classes = check_num_classes(num_classes)
        num_layers = check_positive_int("num_layers", num_layers)
        num_heads = check_positive_int("num_heads", num_heads)
        d_model = check_positive_int("d_model", d_model)
        num_channels = check_positive_int("num_channels", num_channels)
        d_ff = check_positive_int("d_ff", d_ff if d_ff is not None else 4 * d_model)
        dropout = check_rate("dropout", dropout)
        if d_model % num_heads:
            raise ValueError(f"`d_model`={d_model} must be divisible by `num_heads`={num_heads}.")
        check_choice("position", position, VIT_POSITIONS)
        if position == "sinusoidal2d" and d_model % 2:
            raise ValueError(f"position='sinusoidal2d' needs an even `d_model`; received {d_model}.")
        check_choice("pooling", pooling, VIT_POOLINGS)
        rows, cols = height // ph, width // pw
        # Before any variable exists: a get_layout_map map of the current distribution checks these.
        sizes = bind_sizes(model_sizes(d_model, num_heads, d_ff))

        # === Layers ===
        patch_embedding = PatchEmbedding((ph, pw), d_model, dtype=dtype, name="patch_embedding")
        class_token = ClassToken(dtype=dtype, name="class_token")
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
        embedding_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="embedding_dropout")
        blocks = [
            TransformerBlock(
                d_model,
                num_heads,
                d_ff,
                dropout=dropout,
                attention_dropout=attention_dropout,
                norm_first=True,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                dtype=dtype,
                name=f"encoder_block_{i}",
            )
            for i in range(num_layers)
        ]
        final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="final_norm"
        )
        if pooling == "cls":
            pooling_layer = SequencePooling("cls", dtype=dtype, name="cls_pooling")
        else:
            pooling_layer = MeanPatchPooling(dtype=dtype, name="mean_pooling")
        head_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="head_dropout")
        head = keras.layers.Dense(num_classes, dtype="float32", name="classifier")

        # === Functional graph ===
        images = keras.Input(shape=(height, width, num_channels), name="images")
        x = embedding_dropout(position_encoding(class_token(patch_embedding(images))))
        for block in blocks:
            x = block(x)
        x = final_norm(x)
        logits = head(head_dropout(pooling_layer(x)))

        # === Config: the constructor arguments, checked (get_config) ===
        config = dict(
            image_size=(height, width),
            patch_size=(ph, pw),
            num_classes=num_classes,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            num_channels=num_channels,
            dropout=dropout,
            attention_dropout=attention_dropout,
            position=position,
            pooling=pooling,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
        )
        self._init_model(images, logits, name, config, layout_sizes=sizes, **kwargs)

        # === Parts ===
        self.patch_embedding = patch_embedding
        self.class_token = class_token
        self.position_encoding = position_encoding
        self.embedding_dropout = embedding_dropout
        self.blocks = blocks
        self.final_norm = final_norm
        self.pooling_layer = pooling_layer
        self.head_dropout = head_dropout
        self.head = head
        self.image_size = (height, width)
        self.patch_size = (ph, pw)
        self.grid_size = (rows, cols)
        self.num_classes = num_classes
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.d_model = d_model

    def _check_tokenizer(self, tokenizer):
        raise TypeError(
            f"`tokenizer`: a ViT classifies images and takes no tokenizer; received {type(tokenizer).__name__}."
        )

    @property
    def encoder_blocks(self) -> list:
        """The `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks


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
