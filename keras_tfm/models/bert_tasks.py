"""Models on a BERT encoder: masked-LM pretraining, sequence and token classifiers.

    BertMaskedLM         logits = LN(GELU(x W_t + b_t)) E_tokᵀ + b        (B, T, V)
    BertClassifier       logits = Dropout(pool(x)) W + b                  (B, C)
    BertTokenClassifier  logits_t = Dropout(x_t) W + b                    (B, T, C)

Each is built on the encoder's inputs and outputs, so its layers are the
encoder's layers (shared, same names) plus its own; it keeps the encoder's
parts as attributes (`embedding`, `token_embedding`, `segment_embedding`,
`embedding_norm`, `blocks`, `final_norm`, ...) and the encoder itself as
`encoder`. Its config holds the serialized encoder, so `.keras` files
round-trip. The builders `bert_masked_lm`, `bert_classifier` and
`bert_token_classifier` take an encoder, a preset name or encoder options.
"""

import keras
import numpy as np

from keras_tfm.checks import check_choice, check_rate
from keras_tfm.layers.feed_forward import GATED_ACTIVATIONS
from keras_tfm.models import extensions
from keras_tfm.models.base import TransformerModel, check_tokenizer_fits
from keras_tfm.models.bert import BertEncoder, bert_encoder
from keras_tfm.models.heads import POOLINGS, Bias, SequencePooling
from keras_tfm.models.layout import bind_sizes
from keras_tfm.models.parts import check_num_classes, make_norm, truncated_normal
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
    "head_dim",
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

    def _init_task(self, encoder, outputs, name, config, **kwargs):
        config = dict(config, encoder=keras.saving.serialize_keras_object(encoder))
        self._init_model(encoder.input, outputs, name, config, layout_sizes=encoder._layout_sizes, **kwargs)
        for part in ENCODER_PARTS:
            setattr(self, part, getattr(encoder, part))
        # Not tracked as a sublayer: its layers are already this model's layers.
        object.__setattr__(self, "_encoder", encoder)

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


def _head_dropout(encoder, dropout):
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
        fill = extensions.provided("fill_mask", "BertMaskedLM.fill_mask")
        return fill(self, texts, top_k=top_k, batch_size=batch_size)


@keras.saving.register_keras_serializable(package="keras_tfm")
class BertClassifier(BertTask):
    """Sequence classifier on a BERT encoder.

        pooling "cls":  p = pooled_output (tanh pooler on [CLS], as in BERT)
        pooling "mean": p = Σ_t m_t h_t / Σ_t m_t          (padding excluded)
        pooling "max":  p = max_{t: m_t=1} h_t             (padding excluded)
        logits = Dropout(p) W + b                           classifier_dropout, classifier

    Args:
        encoder: a `BertEncoder`.
        num_classes: number of classes (>= 2; a binary task has 2).
        pooling: "cls", "mean" or "max".
        dropout: classifier dropout (defaults to the encoder's dropout).
        name: model name.

    Attributes:
        the encoder's parts, `pooler` (the encoder's, only with "cls"; else
        None), `pooling_layer` (`SequencePooling` for "mean"/"max", else None),
        `classifier_dropout`, `classifier` (the `Dense`; `head` is the same),
        `num_classes`, `pooling`.
    """

    checkpoint_task = "classifier"  # from_preset: the from_pretrained task

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        pooling: str = "cls",
        dropout: float | None = None,
        name: str = "bert_classifier",
        **kwargs,
    ):
        encoder = as_encoder(encoder)
        pooling = check_choice("pooling", pooling, POOLINGS)
        num_classes = check_num_classes(num_classes)
        dropout = _head_dropout(encoder, dropout)
        dtype = encoder.blocks[0].dtype_policy
        pooling_layer = None
        if pooling == "cls":
            pooled = encoder.output["pooled_output"]
        else:
            pooling_layer = SequencePooling(pooling, dtype=dtype, name=f"{pooling}_pooling")
            pooled = pooling_layer(
                encoder.output["sequence_output"], padding_mask=encoder.input["padding_mask"]
            )
        classifier_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="classifier_dropout")
        classifier = keras.layers.Dense(
            num_classes, kernel_initializer=truncated_normal(0.02), dtype="float32", name="classifier"
        )
        logits = classifier(classifier_dropout(pooled))
        logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
        config = dict(num_classes=num_classes, pooling=pooling, dropout=dropout)
        self._init_task(encoder, logits, name, config, **kwargs)
        self.pooler = encoder.pooler if pooling == "cls" else None
        self.pooling_layer = pooling_layer
        self.classifier_dropout = classifier_dropout
        self.classifier = classifier
        self.head = classifier
        self.num_classes = num_classes
        self.pooling = pooling

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Class probabilities of texts; Keras's `predict` for any other input.

        Texts are encoded as the exported `classify` signature encodes them (`[CLS] … [SEP]`,
        cut to the model's length) with `model.tokenizer`, run in batches of similar
        lengths, and returned in input order.

        Args:
            x: a str, or a list / tuple / 1-D array of str; anything else (a dict of token-id
                arrays, a dataset) goes to `keras.Model.predict` unchanged.
            batch_size: texts per forward pass (default 32).
            verbose: for texts, 1 shows a progress bar ("auto" and 0: none).
            steps: Keras's; must be None for texts.
            callbacks: Keras's; must be None for texts.

        Returns:
            For texts: float32 NumPy probabilities `(len(x), num_classes)` (softmax of the
            logits), `(num_classes,)` for one str. Otherwise the logits Keras returns.

        Raises:
            ValueError: texts without `model.tokenizer`, an empty list, `steps` or
                `callbacks` with texts.
            TypeError: a list mixing texts and other values.
        """
        if not is_text(x):
            return super().predict(
                x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )
        refuse_with_texts("BertClassifier.predict", steps=steps, callbacks=callbacks)
        predict = extensions.provided("predict_texts", "BertClassifier.predict")
        return predict(self, x, batch_size=batch_size, verbose=verbose)

    def fit(self, x=None, y=None, batch_size=None, **kwargs):
        """Trains on texts and int labels, or as Keras's `fit` on any other input.

        With texts, the rows are encoded as in `predict` and batched by length: every
        epoch the texts are shuffled, sorted by length within chunks of 50 batches, cut into
        batches (each padded to its longest row) and the batches shuffled
        (`keras_tfm.data.LengthBucketedBatches`; the order follows
        `keras.utils.set_random_seed`). Compile the model first (e.g.
        `keras_tfm.training.compile_for_classification`); batches of varying widths run in
        graph mode without XLA (which would compile every width), so a model compiled with
        XLA is switched to `jit_compile=False` (as the fine-tuning recipe compiles it).

        Args:
            x: a list / tuple / 1-D array of str; anything else goes to `keras.Model.fit`.
            y: with texts, one int class id in `[0, num_classes)` per text.
            batch_size: texts per batch (default 32).
            **kwargs: Keras's `fit` arguments (`epochs`, `verbose`, `callbacks`,
                `initial_epoch`, `steps_per_epoch`, `validation_freq`, `class_weight`, ...).
                With texts, `validation_data` is a pair `(texts, labels)` (batched by length,
                `validation_batch_size` texts per batch), `shuffle=False` keeps the
                length-sorted order, and `sample_weight` / `validation_split` are refused.

        Returns:
            Keras's `History`.

        Raises:
            ValueError: texts without `model.tokenizer`, labels of the wrong length or out of
                range, a bad `validation_data`, `sample_weight` or `validation_split` with texts.
            TypeError: labels that are not ints, a single str as `x`.
        """
        if not is_text(x):
            return super().fit(x, y, batch_size=batch_size, **kwargs)
        fit = extensions.provided("fit_texts", "BertClassifier.fit")
        return fit(self, x, y, batch_size=batch_size, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Loss and metrics on texts and int labels, or Keras's `evaluate` on any other input.

        Args:
            x: a list / tuple / 1-D array of str (encoded as in `predict`, batched by length);
                anything else goes to `keras.Model.evaluate`.
            y: with texts, one int class id in `[0, num_classes)` per text.
            batch_size: texts per batch (default 32).
            **kwargs: Keras's `evaluate` arguments (`verbose`, `callbacks`, `return_dict`,
                ...); `sample_weight` is refused with texts.

        Returns:
            What Keras's `evaluate` returns.

        Raises:
            ValueError / TypeError: as `fit`.
        """
        if not is_text(x):
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)
        evaluate = extensions.provided("evaluate_texts", "BertClassifier.evaluate")
        return evaluate(self, x, y, batch_size=batch_size, **kwargs)


@keras.saving.register_keras_serializable(package="keras_tfm")
class BertTokenClassifier(BertTask):
    """Per-token classifier (NER/tagging) on a BERT encoder:
    logits_t = Dropout(h_t) W + b, float32 (B, T, num_classes).

    Padding positions get logits too; exclude them from the loss with
    `sample_weight=padding_mask` or an ignored label.

    Attributes:
        the encoder's parts, `classifier_dropout`, `classifier` (= `head`),
        `num_classes`; `pooler` is None (not used).
    """

    checkpoint_task = "token_classifier"  # from_preset: the from_pretrained task

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout: float | None = None,
        name: str = "bert_token_classifier",
        **kwargs,
    ):
        encoder = as_encoder(encoder)
        num_classes = check_num_classes(num_classes)
        dropout = _head_dropout(encoder, dropout)
        dtype = encoder.blocks[0].dtype_policy
        classifier_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="classifier_dropout")
        classifier = keras.layers.Dense(
            num_classes, kernel_initializer=truncated_normal(0.02), dtype="float32", name="classifier"
        )
        logits = classifier(classifier_dropout(encoder.output["sequence_output"]))
        logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
        self._init_task(encoder, logits, name, dict(num_classes=num_classes, dropout=dropout), **kwargs)
        self.pooler = None
        self.classifier_dropout = classifier_dropout
        self.classifier = classifier
        self.head = classifier
        self.num_classes = num_classes

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Per-word labels of texts; Keras's `predict` for any other input.

        A text's words are its whitespace-separated parts. They are tokenized one by one
        (which must give the text's own ids: a WordPiece or word tokenizer), the row
        `[CLS] … [SEP]` is cut to the model's length, and each word gets the class with the
        largest logit at its FIRST sub-token.

        Args:
            x: a str, or a list / tuple / 1-D array of str; anything else (a dict of token-id
                arrays, a dataset) goes to `keras.Model.predict` unchanged.
            batch_size: texts per forward pass (default 32).
            verbose: for texts, 1 shows a progress bar ("auto" and 0: none).
            steps: Keras's; must be None for texts.
            callbacks: Keras's; must be None for texts.

        Returns:
            For texts: per text a list of `(word, label)` pairs in word order, `label` the
            int class id, or None for a word past the model's length (or one that tokenizes
            to nothing); for one str, its list. Otherwise the logits Keras returns.

        Raises:
            ValueError: texts without `model.tokenizer`, an empty list, a tokenizer that
                does not tokenize word by word, `steps` or `callbacks` with texts.
            TypeError: a list mixing texts and other values.
        """
        if not is_text(x):
            return super().predict(
                x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )
        refuse_with_texts("BertTokenClassifier.predict", steps=steps, callbacks=callbacks)
        label = extensions.provided("label_words", "BertTokenClassifier.predict")
        return label(self, x, batch_size=batch_size, verbose=verbose)


# ------------------------------------------------------------------ builders
def tokenizer_vocabulary_size(tokenizer):
    """Vocabulary size of a tokenizer-like object (`vocabulary_size()` /
    `vocabulary_size` / `vocab_size` / `len()`), or an int."""
    if tokenizer is None:
        return None
    if isinstance(tokenizer, int) and not isinstance(tokenizer, bool):
        return tokenizer
    for attr in ("vocabulary_size", "vocab_size"):
        value = getattr(tokenizer, attr, None)
        if callable(value):
            value = value()
        if value is not None:
            return int(value)
    try:
        return len(tokenizer)
    except TypeError:
        raise TypeError(f"Cannot read a vocabulary size from tokenizer {tokenizer!r}.") from None


def check_vocabulary(model_vocabulary_size, tokenizer=None, vocabulary_size=None, what="model"):
    """Raises a ValueError if a tokenizer / expected vocabulary disagrees."""
    for source, value in (
        ("tokenizer", tokenizer_vocabulary_size(tokenizer)),
        ("vocabulary_size", vocabulary_size),
    ):
        if value is not None and value != model_vocabulary_size:
            raise ValueError(
                f"Vocabulary mismatch: the {what} has vocabulary_size={model_vocabulary_size} but the {source} "
                f"has {value}."
            )


def _encoder_from(encoder, encoder_kwargs, tokenizer=None, vocabulary_size=None):
    """A `BertEncoder` from an encoder, a preset name or None (+ options).

    When the encoder is built here, `vocabulary_size` (or the tokenizer's)
    is one of its options; with a given encoder they are checked against it.
    """
    if isinstance(encoder, keras.Model):
        if encoder_kwargs:
            raise ValueError(
                f"Encoder options {sorted(encoder_kwargs)} cannot be applied to an already built encoder."
            )
        encoder = as_encoder(encoder)
    elif encoder is None or isinstance(encoder, str):
        if "vocabulary_size" not in encoder_kwargs:
            size = vocabulary_size if vocabulary_size is not None else tokenizer_vocabulary_size(tokenizer)
            if size is not None:
                encoder_kwargs = dict(encoder_kwargs, vocabulary_size=size)
        encoder = bert_encoder(encoder, **encoder_kwargs)
    else:
        raise TypeError(f"`encoder` must be a BertEncoder, a preset name or None; received {encoder!r}.")
    check_vocabulary(encoder.vocabulary_size, tokenizer, vocabulary_size, what="BERT encoder")
    return encoder


def bert_masked_lm(
    encoder: BertEncoder | str | None = None,
    *,
    tokenizer=None,
    vocabulary_size: int | None = None,
    name: str = "bert_masked_lm",
    **encoder_kwargs,
) -> BertMaskedLM:
    """BERT masked-language-model pretraining model (see `BertMaskedLM`).

    Args:
        encoder: a `BertEncoder` (its layers are shared), a preset name, or
            None with `encoder_kwargs`.
        tokenizer: optional tokenizer (or int); its vocabulary size must match.
        vocabulary_size: the vocabulary (encoder option when the encoder is
            built here, else checked).
        name: model name.
        **encoder_kwargs: `bert_encoder` options when `encoder` is not a model.

    Returns:
        A `BertMaskedLM`: the encoder's inputs → float32 `logits` (B, T, V).
    """
    encoder = _encoder_from(encoder, encoder_kwargs, tokenizer, vocabulary_size)
    return BertMaskedLM(encoder, name=name)


def bert_classifier(
    encoder: BertEncoder | str | None = None,
    num_classes: int | None = None,
    *,
    pooling: str = "cls",
    dropout: float | None = None,
    tokenizer=None,
    vocabulary_size: int | None = None,
    name: str = "bert_classifier",
    **encoder_kwargs,
) -> BertClassifier:
    """Sequence classifier on a BERT encoder (see `BertClassifier`).

    Args:
        encoder: a `BertEncoder`, a preset name or None (+ kwargs).
        num_classes: number of classes (>= 2; a binary task has 2).
        pooling: "cls", "mean" or "max".
        dropout: classifier dropout (defaults to the encoder's dropout).
        tokenizer / vocabulary_size: encoder options when the encoder is
            built here; else they must match the encoder's vocabulary.
        name: model name.
        **encoder_kwargs: `bert_encoder` options when `encoder` is not a model.

    Returns:
        A `BertClassifier`: encoder inputs → float32 `logits` (B, num_classes).
    """
    check_choice("pooling", pooling, POOLINGS)
    check_num_classes(num_classes)
    encoder = _encoder_from(encoder, encoder_kwargs, tokenizer, vocabulary_size)
    return BertClassifier(encoder, num_classes, pooling=pooling, dropout=dropout, name=name)


def bert_token_classifier(
    encoder: BertEncoder | str | None = None,
    num_classes: int | None = None,
    *,
    dropout: float | None = None,
    tokenizer=None,
    vocabulary_size: int | None = None,
    name: str = "bert_token_classifier",
    **encoder_kwargs,
) -> BertTokenClassifier:
    """Per-token classifier on a BERT encoder (see `BertTokenClassifier`).

    Args:
        encoder: a `BertEncoder`, a preset name or None (+ kwargs).
        num_classes: number of classes (>= 2; a binary task has 2).
        dropout: classifier dropout (defaults to the encoder's dropout).
        tokenizer / vocabulary_size: encoder options when the encoder is
            built here; else they must match the encoder's vocabulary.
        name: model name.
        **encoder_kwargs: `bert_encoder` options when `encoder` is not a model.

    Returns:
        A `BertTokenClassifier`: encoder inputs → float32 `logits`
        (B, T, num_classes).
    """
    check_num_classes(num_classes)
    encoder = _encoder_from(encoder, encoder_kwargs, tokenizer, vocabulary_size)
    return BertTokenClassifier(encoder, num_classes, dropout=dropout, name=name)


# ---------------------------------------------------------------- text inputs
def is_text(x) -> bool:
    """Whether a model method's input is text: a str (or bytes), a list / tuple holding one
    (or empty), a NumPy array of strings, or a TensorFlow string tensor. The text methods
    then run (`keras_tfm.models.extensions`); any other input goes to Keras."""
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (list, tuple)):
        return not x or any(isinstance(item, (str, bytes)) for item in x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "O":
            return any(isinstance(item, (str, bytes)) for item in x.flat)
        return x.dtype.kind in "US"
    return getattr(getattr(x, "dtype", None), "name", None) == "string"


def refuse_with_texts(method, **arguments):
    """A ValueError for Keras arguments (not None) that have no meaning with texts."""
    for name, value in arguments.items():
        if value is not None:
            raise ValueError(f"`{method}` on texts does not take `{name}`; received {value!r:.60}.")
