"""The builders of the BERT task models: `bert_masked_lm`, `bert_classifier`,
`bert_token_classifier`, each on a `BertEncoder`, a preset name, or encoder options
(with the vocabulary checked against a tokenizer's).
"""

import keras

from keras_tfm.checks import check_choice
from keras_tfm.models.bert import BertEncoder, bert_encoder
from keras_tfm.models.bert_classifiers import BertClassifier, BertTokenClassifier
from keras_tfm.models.bert_tasks import BertMaskedLM, as_encoder
from keras_tfm.models.heads import POOLINGS
from keras_tfm.models.parts import check_num_classes


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
