"""Models on a BERT encoder (`BertTask`) and masked-LM pretraining (`BertMaskedLM`).

    BertMaskedLM         logits = LN(GELU(x W_t + b_t)) E_tokᵀ + b        (B, T, V)
    BertClassifier, BertTokenClassifier (`keras_tfm.models.bert_classifiers`)

Each is built on the encoder's inputs and outputs, so its layers are the
encoder's layers (shared, same names) plus its own; it keeps the encoder's
parts as attributes (`embedding`, `token_embedding`, `segment_embedding`,
`embedding_norm`, `blocks`, `final_norm`, ...) and the encoder itself as
`encoder`. Its config holds the serialized encoder, so `.keras` files
round-trip. The builders `bert_masked_lm`, `bert_classifier` and
`bert_token_classifier` take an encoder, a preset name or encoder options.
"""

import keras

from keras_tfm.checks import check_rate
from keras_tfm.layers.feed_forward import GATED_ACTIVATIONS
from keras_tfm.models.base import (
    TransformerModel,
    check_tokenizer_fits,
    lm_loss_and_accuracy,
)
from keras_tfm.models.bert import BertEncoder, bert_encoder
from keras_tfm.models.heads import Bias
from keras_tfm.models.layout import bind_sizes
from keras_tfm.models.parts import make_norm, truncated_normal
from keras_tfm.models.presets import known_options, preset_options

#: Encoder parts every head model exposes as its own attributes.
ENCODER_PARTS = (
    "embedding",
    "token_embedding",
    "position_embedding",
    "segment_embedding",
    "embedding_norm",
    "blocks",
    "final_norm",
    "vocabulary_size",
    "max_length",
    "num_segments",
    "num_layers",
    "num_heads",
    "num_key_value_heads",
    "d_model",
    "key_dim",
)


class BertTask(TransformerModel):
    """Base of the models built on a `BertEncoder` (flat graph, shared layers)."""

    preset_family = "bert"  # from_preset: an untrained BERT encoder of that size under the head

    @classmethod
    def _build_preset(cls, preset, **options):
        """`cls(bert_encoder(preset, **encoder options), **head options)`. As in
        `from_pretrained`: `dropout` is the encoder's, `classifier_dropout` the head's (default:
        the encoder's); the other options this class takes (`num_classes`, `pooling`,
        `normalize`, `name`) go to the head."""
        head = {
            k: options.pop(k) for k in known_options(cls) if k in options and k not in ("encoder", "dropout")
        }
        if "classifier_dropout" in options and "dropout" in known_options(cls):
            head["dropout"] = options.pop("classifier_dropout")
        head = preset_options(cls, "bert", None, head)
        head["encoder"] = bert_encoder(preset, **options)
        return cls(**head)

    @classmethod
    def _from_checkpoint(cls, checkpoint, **options):
        """`cls(BertEncoder of the checkpoint's sizes, **head options)`; the head's options are
        popped from `options` (`_checkpoint_head`: defaults from the checkpoint), the others
        go to the encoder."""
        head = cls._checkpoint_head(checkpoint, options)
        return cls(BertEncoder(**checkpoint.builder_options(options)), **head)

    @classmethod
    def _checkpoint_head(cls, checkpoint, options):
        """The head options of `cls` for `checkpoint` (popped from `options`)."""
        return {}

    def _init_task(self, encoder, outputs, name, config, **kwargs):
        config = dict(config, encoder=keras.saving.serialize_keras_object(encoder))
        self._init_model(encoder.input, outputs, name, config, layout_sizes=encoder._layout_sizes, **kwargs)
        for part in ENCODER_PARTS:
            setattr(self, part, getattr(encoder, part))
        # Not tracked as a sublayer: its layers are already this model's layers.
        object.__setattr__(self, "_encoder", encoder)
        if self._default_loss()[0] is not None:  # a task: its defaults (`TransformerModel.compile`)
            self._compile_defaults()

    @property
    def encoder(self) -> BertEncoder:
        """The `BertEncoder` this model is built on (its layers are shared)."""
        return self._encoder

    def _check_tokenizer(self, tokenizer):
        return check_tokenizer_fits("tokenizer", tokenizer, self.encoder.vocabulary_size)

    @property
    def encoder_blocks(self) -> list:
        """The encoder's `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks


def as_encoder(encoder):
    """A `BertEncoder` from an instance or its serialized config (from_config). Its sizes are
    bound to the current distribution's layout map (`layout.bind_sizes`): the task's own
    variables, created next, are checked against them."""
    if isinstance(encoder, dict):
        encoder = keras.saving.deserialize_keras_object(encoder)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(
            f"`encoder` must be a keras_tfm BertEncoder (from `bert_encoder`); received {type(encoder).__name__}."
        )
    bind_sizes(encoder._layout_sizes)
    return encoder


@keras.saving.register_keras_serializable(package="keras_tfm")
def _gelu_tanh(x):
    return keras.ops.gelu(x, approximate=True)


def head_dropout(encoder, dropout):
    """A head's dropout rate: `dropout`, or the encoder's when None."""
    return check_rate("dropout", encoder.dropout if dropout is None else dropout)


@keras.saving.register_keras_serializable(package="keras_tfm")
class BertMaskedLM(BertTask):
    """BERT masked-language-model pretraining model.

        h      = LN(GELU(x W_t + b_t))     mlm_transform_dense, mlm_transform_norm
        logits = h E_tokᵀ + b              tied to the word embedding, mlm_output_bias

    The transform uses the encoder's FFN activation and norm kind; for a
    gated FFN the plain activation of its gate (SiLU for "swiglu", GELU for
    "geglu"), and RMSNorm when the encoder has `norm="rms"`.

    Logits are produced for every position; train with labels = the original
    ids and `sample_weight` = 1 at the masked positions (0 elsewhere).

    Args:
        encoder: a `BertEncoder` (its layers are shared).
        name: model name.

    Attributes:
        the encoder's parts (see `BertTask`), `mlm_transform_dense`,
        `mlm_transform_norm`, `mlm_output_bias`; `pooler` is None (not used).
    """

    checkpoint_task = "masked_lm"  # from_preset: the from_pretrained task

    def __init__(self, encoder: BertEncoder, name: str = "bert_masked_lm", **kwargs):
        encoder = as_encoder(encoder)
        dtype = encoder.blocks[0].dtype_policy
        # BERT's transform uses the encoder's hidden activation (exact GELU);
        # for a gated FFN ("swiglu", "geglu") the plain activation of its gate.
        plain = GATED_ACTIVATIONS.get(encoder.activation, encoder.activation)
        activation = {"gelu": "gelu", "gelu_tanh": _gelu_tanh, "relu": "relu", "silu": "silu"}[plain]
        transform_dense = keras.layers.Dense(
            encoder.d_model,
            activation=activation,
            kernel_initializer=truncated_normal(0.02),
            dtype=dtype,
            name="mlm_transform_dense",
        )
        transform_norm = make_norm(encoder.norm, encoder.layer_norm_epsilon, dtype, "mlm_transform_norm")
        output_bias = Bias(encoder.vocabulary_size, dtype="float32", name="mlm_output_bias")
        h = transform_norm(transform_dense(encoder.output["sequence_output"]))
        logits = output_bias(encoder.embedding(h, reverse=True))
        logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
        self._init_task(encoder, logits, name, {}, **kwargs)
        self.mlm_transform_dense = transform_dense
        self.mlm_transform_norm = transform_norm
        self.mlm_output_bias = output_bias
        self.pooler = None

    def _default_loss(self):
        """The masked-LM loss over the vocabulary (labels at the masked positions, weighted by
        `sample_weight`; [PAD] (id 0) excluded) and `MaskedAccuracy`."""
        return lm_loss_and_accuracy(0)

    def compute_logits(self, sequence_output):
        """Float32 vocabulary logits `(B, T, V)` of encoder outputs."""
        h = self.mlm_transform_norm(self.mlm_transform_dense(sequence_output))
        return self.mlm_output_bias(self.token_embedding(h, reverse=True))

    def fill_mask(self, texts, top_k: int = 5, batch_size: int | None = None):
        """Fills the `[MASK]` of each text, as the exported `fill_mask` signature does.

        Each text is split on the tokenizer's mask token (`[MASK]`), the pieces are
        tokenized and joined with the mask id, cut to `max_length - 2` tokens and wrapped as
        `[CLS] … [SEP]`. Special tokens are never predicted.

        Args:
            texts: a str, or a list of str, each holding at least one mask token.
            top_k: how many candidates for the first mask (positive int; at most the
                number of ordinary tokens).
            batch_size: texts per forward pass (default 32).

        Returns:
            For a str, a dict: `filled` (the text with every mask replaced by its most likely
            token, detokenized), `top_tokens` (list of `top_k` token strings for the first
            mask, most likely first) and `top_probabilities` (float32 array, their softmax
            probabilities); for a list, a list of such dicts.

        Raises:
            ValueError: the model has no tokenizer, a text has no mask token (or its first
                mask lies past the model's length), an empty list, a bad `top_k`.
            TypeError: `texts` is not a str or a list of str.
        """
        from keras_tfm.models import bert_text  # TensorFlow ops: imported when text arrives

        return bert_text.fill_mask(self, texts, top_k=top_k, batch_size=batch_size)
