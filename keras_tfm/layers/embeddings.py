"""Token embeddings: lookup, optional √d_model scaling, position addition and
the reverse (weight-tied) projection back to vocabulary logits."""

import math
from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_choice, check_positive_int
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_tfm.layers.positional_encoding import PositionalEncoding
from keras_tfm.resources import check_allocation
from keras_tfm.tensor_checks import check_rank, check_token_ids, poison_invalid

EMBEDDING_POSITIONS = (None, "learned", "sinusoidal", "sinusoidal_halves")


def _store_token_options(layer, vocabulary_size, d_model, scale, mask_zero, embeddings_initializer):
    """Checks and stores the token-embedding options (TokenEmbedding and the composite that builds one)."""
    layer.vocabulary_size = check_positive_int("vocabulary_size", vocabulary_size)
    layer.d_model = check_positive_int("d_model", d_model)
    check_allocation(
        f"`vocabulary_size`={layer.vocabulary_size} × `d_model`={layer.d_model} (the token embedding table)",
        layer.vocabulary_size * layer.d_model * 4,
    )
    layer.scale = check_bool("scale", scale)
    layer.mask_zero = check_bool("mask_zero", mask_zero)
    layer.embeddings_initializer = keras.initializers.get(embeddings_initializer)
    layer.supports_masking = layer.mask_zero


@keras.saving.register_keras_serializable(package="keras_tfm")
class TokenEmbedding(keras.layers.Layer):
    """Token lookup, optionally scaled, usable in reverse as a tied output layer.

        forward:  e = E[token] · (√d_model if scale else 1)
        reverse:  logits = h Eᵀ        (weight tying, Press & Wolf 2017)

    Args:
        vocabulary_size: number of token ids `V`.
        d_model: embedding width.
        scale: multiply embeddings by √d_model (Vaswani et al.).
        mask_zero: treat id 0 as padding and emit a Keras implicit mask.
        embeddings_initializer: initializer of the `(V, d_model)` table.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: int ids `(batch, length)`, or with `reverse=True` hidden states
            `(batch, length, d_model)`.
        reverse: project hidden states to float32 vocabulary logits with Eᵀ.

    Returns:
        `(batch, length, d_model)` embeddings, or `(batch, length, V)` float32
        logits when `reverse=True`.
    """

    def __init__(
        self,
        vocabulary_size: int,
        d_model: int,
        scale: bool = False,
        mask_zero: bool = False,
        embeddings_initializer: Any = "uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        _store_token_options(self, vocabulary_size, d_model, scale, mask_zero, embeddings_initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocabulary_size, self.d_model),
            initializer=self.embeddings_initializer,
        )

    def call(self, inputs: Any, reverse: bool = False):
        if reverse:
            check_rank("inputs", inputs, (2, 3))
            kernel = ops.cast(self.embeddings, self.compute_dtype)
            return ops.cast(ops.matmul(inputs, ops.transpose(kernel)), "float32")
        check_rank("inputs", inputs, 2)
        if "int" not in keras.backend.standardize_dtype(inputs.dtype):
            raise TypeError(f"`inputs` must hold integer token ids; received dtype {inputs.dtype}.")
        # Ids outside [0, V) raise eagerly / in tf.function; under XLA (which drops
        # assertions and clamps gathers) their embeddings are NaN: see tensor_checks.check_token_ids.
        ids, valid = check_token_ids("token_ids", inputs, self.vocabulary_size)
        x = ops.take(ops.cast(self.embeddings, self.compute_dtype), ids, axis=0)
        if self.scale:
            x = x * ops.cast(math.sqrt(self.d_model), x.dtype)
        return poison_invalid(x, valid)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero or len(inputs.shape) != 2:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.vocabulary_size,)
        return tuple(input_shape) + (self.d_model,)

    def compute_output_spec(self, inputs, reverse=False):
        # Keras cannot route the non-shape `reverse` argument into
        # `compute_output_shape`, so symbolic (functional) calls go through here.
        if reverse:
            return keras.KerasTensor(self.compute_output_shape(inputs.shape, reverse=True), dtype="float32")
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "d_model": self.d_model,
                "scale": self.scale,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Token embedding plus an absolute position signal.

        x_p = E[token_p] · (√d_model if scale else 1) + P(p)

    with `P` learned (`position="learned"`, needs `max_length`), the fixed
    sinusoid of Vaswani et al. (`"sinusoidal"`; `"sinusoidal_halves"`: the same
    numbers with every sine column before every cosine column, as Marian /
    OPUS-MT lays them out), or absent (`None`, for RoPE, ALiBi or relative
    positions, which act inside attention).

    Args:
        vocabulary_size: number of token ids.
        d_model: embedding width.
        max_length: maximum sequence length (required for learned positions;
            for other schemes an optional limit that is enforced).
        position: "learned", "sinusoidal", "sinusoidal_halves" or None.
        scale: multiply token embeddings by √d_model.
        mask_zero: id 0 is padding; emit a Keras implicit mask.
        embeddings_initializer: initializer of the token table (and of the
            learned position table, as in GPT-2 and BERT).
        token_embedding: a built `TokenEmbedding` (of `vocabulary_size` ×
            `d_model`) to use instead of one of its own: two layers that share
            the token table and have positions of their own (BART's encoder and
            decoder). Not part of the config: the model that shares it passes it
            again when it is rebuilt.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: int ids `(batch, length)`, or with `reverse=True` hidden states
            `(batch, length, d_model)`.
        start_index: position of the first token (cached decoding).
        positions: optional int `(batch, length)` position of every token
            (per-row offsets of left-padded prompts in cached decoding);
            replaces `start_index`.
        reverse: project hidden states to float32 vocabulary logits h Eᵀ (the
            weight-tied output layer). Calling the *same* layer for input and
            output makes the tie a shared layer of the functional graph, so it
            survives `.keras` save/load.

    Returns:
        `(batch, length, d_model)`, or `(batch, length, V)` logits with `reverse`.
    """

    def __init__(
        self,
        vocabulary_size: int,
        d_model: int,
        max_length: int | None = None,
        position: str | None = "learned",
        scale: bool = False,
        mask_zero: bool = False,
        embeddings_initializer: Any = "uniform",
        token_embedding: TokenEmbedding | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _store_token_options(self, vocabulary_size, d_model, scale, mask_zero, embeddings_initializer)
        if token_embedding is not None and (
            not isinstance(token_embedding, TokenEmbedding)
            or (token_embedding.vocabulary_size, token_embedding.d_model, token_embedding.scale)
            != (self.vocabulary_size, self.d_model, self.scale)
        ):
            raise ValueError(
                f"`token_embedding` must be a TokenEmbedding of {self.vocabulary_size} × {self.d_model} "
                f"(scale={self.scale}); received {token_embedding!r}."
            )
        object.__setattr__(self, "_shared_token_embedding", token_embedding)  # tracked once built
        self.max_length = check_positive_int("max_length", max_length, allow_none=True)
        self.position = check_choice("position", position, EMBEDDING_POSITIONS)
        if self.position == "learned" and self.max_length is None:
            raise ValueError("position='learned' needs `max_length`.")

    def build(self, input_shape):
        self.token_embedding = self._shared_token_embedding or TokenEmbedding(
            self.vocabulary_size,
            self.d_model,
            scale=self.scale,
            mask_zero=self.mask_zero,
            embeddings_initializer=clone_initializer(self.embeddings_initializer, "token_embedding"),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        if not self.token_embedding.built:
            self.token_embedding.build(input_shape)
        self.position_embedding = None
        if self.position == "learned":
            self.position_embedding = LearnedPositionalEmbedding(
                self.max_length,
                initializer=clone_initializer(self.embeddings_initializer, "position_embedding"),
                dtype=self.dtype_policy,
                name="position_embedding",
            )
            self.position_embedding.build(tuple(input_shape) + (self.d_model,))
        elif self.position in ("sinusoidal", "sinusoidal_halves"):
            layout = "halves" if self.position == "sinusoidal_halves" else "interleaved"
            self.position_embedding = PositionalEncoding(
                layout=layout, dtype=self.dtype_policy, name="position_encoding"
            )

    def call(self, inputs: Any, start_index: Any = 0, reverse: bool = False, positions: Any = None):
        if reverse:
            return self.token_embedding(inputs, reverse=True)
        check_rank("inputs", inputs, 2)
        length = inputs.shape[1]
        if (
            self.max_length is not None
            and length is not None
            and isinstance(start_index, int)
            and start_index + length > self.max_length
        ):
            raise ValueError(
                f"Sequence length {length} (starting at position {start_index}) exceeds `max_length`={self.max_length}."
            )
        x = self.token_embedding(inputs)
        if self.position_embedding is not None:
            x = self.position_embedding(x, start_index=start_index, positions=positions)
        return x

    def compute_mask(self, inputs, mask=None):
        if len(inputs.shape) == 3:  # reverse: hidden states keep their mask
            return mask
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.d_model,)

    def compute_output_spec(self, inputs, start_index=0, reverse=False, positions=None):
        return self.token_embedding.compute_output_spec(inputs, reverse=reverse)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "d_model": self.d_model,
                "max_length": self.max_length,
                "position": self.position,
                "scale": self.scale,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
