"""Classifiers on a BERT encoder: one label per text, one label per token.

    BertClassifier       logits = Dropout(pool(x)) W + b                  (B, C)
    BertTokenClassifier  logits_t = Dropout(x_t) W + b                    (B, T, C)

Both are `BertTask`s (`keras_tfm.models.bert_tasks`): built on the encoder's inputs and
outputs, its layers shared, its parts their attributes.
"""

import keras

from keras_tfm.checks import check_choice, is_text, refuse_with_texts
from keras_tfm.models.base import classification_loss_and_accuracy, lm_loss_and_accuracy
from keras_tfm.models.bert import BertEncoder
from keras_tfm.models.bert_tasks import BertTask, as_encoder, head_dropout
from keras_tfm.models.heads import POOLINGS, SequencePooling
from keras_tfm.models.parts import check_num_classes, truncated_normal


class TextPredict:
    """`predict` that takes texts (the task's `_predict_texts`) and hands any other input to
    `keras.Model.predict`."""

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The task's answer for texts; Keras's `predict` for any other input.

        `BertClassifier`: class probabilities; `BertTokenClassifier`: per-word labels (their
        `_predict_texts`).

        Args:
            x: a str, or a list / tuple / 1-D array of str; anything else (a dict of token-id
                arrays, a dataset) goes to `keras.Model.predict` unchanged.
            batch_size: texts per forward pass (default 32).
            verbose: for texts, 1 shows a progress bar ("auto" and 0: none).
            steps: Keras's; must be None for texts.
            callbacks: Keras's; must be None for texts.

        Returns:
            For texts, the task's answer (above); otherwise the logits Keras returns.

        Raises:
            ValueError: texts without `model.tokenizer`, an empty list, `steps` or
                `callbacks` with texts, and the task's own refusals.
            TypeError: a list mixing texts and other values.
        """
        if not is_text(x):
            return super().predict(
                x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )
        refuse_with_texts(f"{type(self).__name__}.predict", steps=steps, callbacks=callbacks)
        return self._predict_texts(x, batch_size, verbose)


@keras.saving.register_keras_serializable(package="keras_tfm")
class BertClassifier(TextPredict, BertTask):
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

    @classmethod
    def _checkpoint_head(cls, checkpoint, options):
        num_classes = options.pop("num_classes", None)
        return dict(
            num_classes=checkpoint.num_classes() if num_classes is None else num_classes,
            pooling=options.pop("pooling", None) or checkpoint.saved_option("pooling", "cls"),
            dropout=options.pop("classifier_dropout", None),
        )

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
        dropout = head_dropout(encoder, dropout)
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

    def _default_loss(self):
        """Sparse cross-entropy from the logits and accuracy."""
        return classification_loss_and_accuracy()

    def _predict_texts(self, texts, batch_size, verbose):
        """Class probabilities of texts (`TextPredict.predict`).

        Texts are encoded as the exported `classify` signature encodes them (`[CLS] … [SEP]`,
        cut to the model's length) with `model.tokenizer`, run in batches of similar
        lengths, and returned in input order.

        Returns:
            float32 NumPy probabilities `(len(texts), num_classes)` (softmax of the logits),
            `(num_classes,)` for one str.
        """
        from keras_tfm.models import bert_text  # TensorFlow ops: imported when text arrives

        return bert_text.predict_texts(self, texts, batch_size=batch_size, verbose=verbose)

    def fit(self, x=None, y=None, batch_size=None, **kwargs):
        """Trains on texts and int labels, or as Keras's `fit` on any other input.

        With texts, the rows are encoded as in `predict` and batched by length: every
        epoch the texts are shuffled, sorted by length within chunks of 50 batches, cut into
        batches (each padded to its longest row) and the batches shuffled
        (`keras_tfm.data.LengthBucketedBatches`; the order follows
        `keras.utils.set_random_seed`). The model compiled itself when it was built (AdamW with
        warmup, sparse cross-entropy: `TransformerModel.compile`); compile it yourself to
        change that. Batches of varying widths run in graph mode without XLA (which would
        compile every width), so a model compiled with XLA is switched to
        `jit_compile=False` (as the fine-tuning recipe compiles it).

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
        from keras_tfm.models import bert_text  # TensorFlow ops: imported when text arrives

        return bert_text.fit_texts(self, x, y, batch_size=batch_size, **kwargs)

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
        from keras_tfm.models import bert_text  # TensorFlow ops: imported when text arrives

        return bert_text.evaluate_texts(self, x, y, batch_size=batch_size, **kwargs)


@keras.saving.register_keras_serializable(package="keras_tfm")
class BertTokenClassifier(TextPredict, BertTask):
    """Per-token classifier (NER/tagging) on a BERT encoder:
    logits_t = Dropout(h_t) W + b, float32 (B, T, num_classes).

    Padding positions get logits too; exclude them from the loss with
    `sample_weight=padding_mask` or an ignored label.

    Attributes:
        the encoder's parts, `classifier_dropout`, `classifier` (= `head`),
        `num_classes`; `pooler` is None (not used).
    """

    checkpoint_task = "token_classifier"  # from_preset: the from_pretrained task

    @classmethod
    def _checkpoint_head(cls, checkpoint, options):
        num_classes = options.pop("num_classes", None)
        return dict(
            num_classes=checkpoint.num_classes() if num_classes is None else num_classes,
            dropout=options.pop("classifier_dropout", None),
        )

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
        dropout = head_dropout(encoder, dropout)
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

    def _default_loss(self):
        """Per-token cross-entropy from the logits and `MaskedAccuracy`, weighted by
        `sample_weight` (e.g. the padding mask; every class id counts)."""
        return lm_loss_and_accuracy(None)

    def _predict_texts(self, texts, batch_size, verbose):
        """Per-word labels of texts (`TextPredict.predict`).

        A text's words are its parts between ASCII whitespace (a no-break space stays inside
        a word). They are tokenized one by one (which must give the text's own ids: a
        WordPiece or word tokenizer), the row
        `[CLS] … [SEP]` is cut to the model's length, and each word gets the class with the
        largest logit at its FIRST sub-token.

        Returns:
            Per text a list of `(word, label)` pairs in word order, `label` the int class id,
            or None for a word past the model's length (or one that tokenizes to nothing);
            for one str, its list.

        Raises:
            ValueError: a tokenizer that does not tokenize word by word.
        """
        from keras_tfm.models import bert_text  # TensorFlow ops: imported when text arrives

        return bert_text.label_words(self, texts, batch_size=batch_size, verbose=verbose)
