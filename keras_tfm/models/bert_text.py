"""Text in, answers out for the BERT-family models: the work of their text methods.

    BertClassifier.predict(texts)          class probabilities (n, C)          predict_texts
    BertClassifier.fit(texts, labels)      Keras fit on length-bucketed batches fit_texts
    BertClassifier.evaluate(texts, labels) Keras evaluate, likewise             evaluate_texts
    BertTokenClassifier.predict(texts)     [(word, label)] per text             label_words
    SentenceEncoder.embed(texts)           unit vectors (n, d)                  embed_texts
    BertMaskedLM.fill_mask(texts)          filled text, top tokens of the mask  fill_mask

The methods of `keras_tfm.models.bert_tasks` call these functions (imported when text
arrives: the tokenizers are TensorFlow ops). Every text becomes the model input the served
signatures build (`keras_tfm.export.bert_serving`, the same `keras_tfm.tokenizers.text`
rules): the tokenizer's ids without the tokens it adds itself, cut to `max_length - 2` (and
to the tokenizer's own `max_length`), wrapped as `[CLS] ids [SEP]` with the tokenizer's
special ids (`encode_texts`). Texts are run in batches of similar lengths, each padded to its
longest row (`LengthBucketedBatches`), and the answers come back in input order.
"""

import re

import keras
import numpy as np
import tensorflow as tf

from keras_tfm.checks import check_int, check_positive_int, text_batch
from keras_tfm.models.text_batches import LengthBucketedBatches
from keras_tfm.tokenizers.special_tokens import MASK, PAD, SPECIAL_TOKENS
from keras_tfm.tokenizers.text import special_id, text_ids, wrap

#: Default number of candidate tokens of `fill_mask` (as the served signature).
FILL_MASK_TOP_K = 5
#: Default texts per forward pass (Keras's default batch size; `embed_texts` 64).
BATCH_SIZE = 32
EMBED_BATCH_SIZE = 64


# ------------------------------------------------------------------ encoding
def bert_tokenizer(model_or_tokenizer, method):
    """The model's tokenizer (`require_tokenizer`; or the tokenizer given), which must have
    special tokens."""
    tokenizer = model_or_tokenizer
    if hasattr(model_or_tokenizer, "require_tokenizer"):
        tokenizer = model_or_tokenizer.require_tokenizer(method)
    if not getattr(tokenizer, "special_tokens", False):
        raise ValueError(
            f"`{method}` needs a tokenizer with special tokens ([CLS], [SEP], [PAD], [MASK]); "
            f"the model's {type(tokenizer).__name__} has none."
        )
    return tokenizer


def as_texts(name, texts, single_ok=True):
    """(list of str, single): a str is one text (`single`; refused without `single_ok`, as in
    `embed_texts([text])`); else a non-empty list / array / tensor of str (`checks.text_batch`)."""
    batch = text_batch(name, texts)
    if batch is None:
        raise TypeError(f"`{name}` must be a list of texts; received {type(texts).__name__}.")
    items, single = batch
    if single and not single_ok:
        raise TypeError(
            f"`{name}` must be a list of texts; received a single {type(texts).__name__} "
            f"({texts[:40]!r}): pass [text] for one text."
        )
    return items, single


def text_limit(model_max_length, tokenizer, max_length=None):
    """How many text tokens a row keeps, as the served signatures cut them: `max_length - 2`
    ([CLS] and [SEP]), `max_length` the model's by default (at most it), and no more than the
    tokenizer's own `max_length` keeps."""
    max_length = check_int(
        "max_length",
        model_max_length if max_length is None else max_length,
        minimum=3,
        maximum=model_max_length,
        maximum_name="the model's max_length",
    )
    limit = max_length - 2
    if tokenizer.max_length is not None:
        limit = min(limit, tokenizer.max_length - len(tokenizer.prefix_ids) - len(tokenizer.suffix_ids))
    return limit


def encode_texts(tokenizer, texts, max_length, model_max_length=None):
    """Model rows `[CLS] ids [SEP]` of `texts` (a list of str; a bare str is refused), the
    served signatures' inputs, each at most `max_length` tokens (`text_limit`; None: the
    model's), as int32 arrays."""
    if isinstance(texts, (list, tuple)) and not texts:
        return []
    texts, _ = as_texts("texts", texts, single_ok=False)
    limit = text_limit(model_max_length or max_length, tokenizer, max_length)
    return [wrap(tokenizer, ids, limit) for ids in text_ids(tokenizer, texts)]


def run_rows(model, tokenizer, rows, batch_size, verbose=0, per_token=False):
    """The model's outputs for `rows`, in input order: batches of similar lengths padded to
    their longest row, one `predict_on_batch` each (as `embed_texts`). Returns a float32 array
    `(n, ...)`, or with `per_token` a list of `(len(row), ...)` arrays."""
    batch_size = check_positive_int("batch_size", batch_size)
    pad_id = special_id(tokenizer, "pad", PAD)
    batches = LengthBucketedBatches(rows, None, batch_size, shuffle=False, pad_id=pad_id)
    progress = keras.utils.Progbar(len(batches)) if verbose == 1 else None
    out = [None] * len(rows)
    for i, indices in enumerate(batches.batches):
        result = np.asarray(model.predict_on_batch(batches[i]), np.float32)
        for j, index in enumerate(indices):
            out[index] = result[j, : len(rows[index])] if per_token else result[j]
        if progress is not None:
            progress.update(i + 1)
    return out if per_token else np.stack(out)


# ------------------------------------------------------------- classifier
def _probabilities(logits):
    """Softmax over the classes (a sigmoid for one logit), as the served `classify`."""
    logits = tf.constant(logits, tf.float32)
    if logits.shape[-1] == 1:
        return tf.sigmoid(logits).numpy()
    return tf.nn.softmax(logits, axis=-1).numpy()


def predict_texts(model, texts, batch_size=None, verbose="auto"):
    """`BertClassifier.predict` on text: float32 probabilities `(n, num_classes)` (`(C,)`
    for one str)."""
    tokenizer = bert_tokenizer(model, "BertClassifier.predict")
    texts, single = as_texts("x", texts)
    rows = encode_texts(tokenizer, texts, None, model.max_length)
    logits = run_rows(model, tokenizer, rows, BATCH_SIZE if batch_size is None else batch_size, verbose)
    probabilities = _probabilities(logits)
    return probabilities[0] if single else probabilities


def check_labels(name, labels, count, num_classes, texts_name="x"):
    """`labels`: one int class id in [0, num_classes) per text; an int32 array."""
    if isinstance(labels, (str, bytes)) or labels is None:
        raise TypeError(
            f"`{name}` must be a list of int class ids, one per text of `{texts_name}`; received {labels!r:.60}."
        )
    array = np.asarray(labels.numpy() if hasattr(labels, "numpy") else labels)
    if array.ndim != 1 or len(array) != count:
        raise ValueError(
            f"`{name}` must hold one label per text of `{texts_name}` ({count}); received shape {array.shape}."
        )
    if array.dtype.kind not in "iu":
        raise TypeError(
            f"`{name}` must be int class ids; received dtype {array.dtype} ({array[:3].tolist()}...)."
        )
    bad = (array < 0) | (array >= num_classes)
    if bad.any():
        index = int(np.argmax(bad))
        raise ValueError(
            f"`{name}[{index}]`={int(array[index])} is not a class id of this classifier: expected "
            f"0 <= label < num_classes={num_classes}."
        )
    return array.astype(np.int32)


def _labelled_batches(model, tokenizer, x, y, batch_size, shuffle, names=("x", "y")):
    if isinstance(x, (str, bytes)):
        raise TypeError(
            f"`{names[0]}` must be a list of texts (one per label); received a single str ({x[:40]!r}): "
            "pass [text]."
        )
    texts, _ = as_texts(names[0], x)
    labels = check_labels(names[1], y, len(texts), model.num_classes, names[0])
    rows = encode_texts(tokenizer, texts, None, model.max_length)
    seed = int(np.random.randint(2**31 - 1)) if shuffle else None  # follows keras.utils.set_random_seed
    pad_id = special_id(tokenizer, "pad", PAD)
    return LengthBucketedBatches(rows, labels, batch_size, shuffle=shuffle, pad_id=pad_id, seed=seed)


def without_xla(model):
    """Turns XLA off on a compiled model (its compiled functions are rebuilt at the next call):
    length-bucketed batches have varying widths, and XLA would compile each width (as the
    fine-tuning recipe, which compiles with `jit_compile=False`)."""
    if getattr(model, "compiled", False) and model.jit_compile:
        model.jit_compile = False
        model.train_function = model.test_function = model.predict_function = None


def _refuse(method, kwargs, names):
    for name in names:
        value = kwargs.pop(name, None)
        if value is not None and not (isinstance(value, float) and value == 0.0):  # Keras's default split
            raise ValueError(
                f"`{method}` on texts does not take `{name}`={value!r:.40}: texts are batched by length "
                "inside; pass token-id arrays to use it."
            )


def fit_texts(model, x, y, batch_size=None, validation_data=None, shuffle=True, **kwargs):
    """`BertClassifier.fit` on texts and int labels: Keras `fit` on `LengthBucketedBatches`
    (reshuffled and re-bucketed every epoch with `shuffle`); returns Keras's `History`."""
    tokenizer = bert_tokenizer(model, "BertClassifier.fit")
    _refuse("BertClassifier.fit", kwargs, ("sample_weight", "validation_split"))
    batch_size = BATCH_SIZE if batch_size is None else batch_size
    validation_batch_size = kwargs.pop("validation_batch_size", None) or batch_size
    data = _labelled_batches(model, tokenizer, x, y, batch_size, bool(shuffle))
    if validation_data is not None:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError(
                "`validation_data` must be a pair (texts, labels) when training on texts; received "
                f"{type(validation_data).__name__}."
            )
        validation_data = _labelled_batches(
            model,
            tokenizer,
            validation_data[0],
            validation_data[1],
            validation_batch_size,
            False,
            names=("validation_data[0]", "validation_data[1]"),
        )
    without_xla(model)
    return keras.Model.fit(model, data, validation_data=validation_data, shuffle=bool(shuffle), **kwargs)


def evaluate_texts(model, x, y, batch_size=None, **kwargs):
    """`BertClassifier.evaluate` on texts and int labels: Keras `evaluate` on length-sorted
    batches; returns what Keras returns (the loss and metrics)."""
    tokenizer = bert_tokenizer(model, "BertClassifier.evaluate")
    _refuse("BertClassifier.evaluate", kwargs, ("sample_weight",))
    batch_size = BATCH_SIZE if batch_size is None else batch_size
    data = _labelled_batches(model, tokenizer, x, y, batch_size, False)
    without_xla(model)
    return keras.Model.evaluate(model, data, **kwargs)


# --------------------------------------------------------- token classifier
#: What separates the words `BertTokenClassifier.predict` labels: ASCII whitespace only
#: (Python's `str.split` also splits at U+00A0, U+0085, U+001C..U+001F, which a tokenizer may
#: keep inside a word).
WORD_SEPARATORS = re.compile(r"[ \t\n\r\f\v]+")


def label_words(model, texts, batch_size=None, verbose="auto"):
    """`BertTokenClassifier.predict` on text: per text, `[(word, label), ...]` for its words,
    the runs between ASCII whitespace (`WORD_SEPARATORS`; a no-break space or a control
    character stays inside its word, where the tokenizer decides what it is); the label (an int
    class id) is the argmax at the word's first sub-token, None for a word past the model's
    length (or with no token)."""
    method = "BertTokenClassifier.predict"
    tokenizer = bert_tokenizer(model, method)
    texts, single = as_texts("x", texts)
    words = [[w for w in WORD_SEPARATORS.split(text) if w] for text in texts]
    flat = [w for row in words for w in row]
    word_ids = text_ids(tokenizer, flat) if flat else []
    whole = text_ids(tokenizer, texts)
    limit = text_limit(model.max_length, tokenizer)
    rows, starts, start = [], [], 0
    for i, row in enumerate(words):
        pieces = word_ids[start : start + len(row)]
        start += len(row)
        ids = [t for p in pieces for t in p]
        if ids != whole[i]:
            raise ValueError(
                f"`{method}` labels words separated by ASCII whitespace, but the model's {type(tokenizer).__name__} "
                f"tokenizes `x[{i}]` ({texts[i][:40]!r}) differently from its words one by one; "
                "use a WordPiece or word tokenizer."
            )
        offsets = np.cumsum([0] + [len(p) for p in pieces])[:-1]
        starts.append([int(o) if len(p) and o < limit else None for o, p in zip(offsets, pieces)])
        rows.append(wrap(tokenizer, ids, limit))
    logits = run_rows(model, tokenizer, rows, BATCH_SIZE if batch_size is None else batch_size, verbose, True)
    answers = []
    for row_words, row_starts, row_logits in zip(words, starts, logits):
        labels = np.argmax(row_logits, axis=-1)
        answers.append(
            [(w, None if s is None else int(labels[1 + s])) for w, s in zip(row_words, row_starts)]
        )
    return answers[0] if single else answers


# ---------------------------------------------------------- sentence encoder
def embed_texts(model, tokenizer, texts, max_length=None, batch_size=None, method="embed_texts"):
    """Unit-length embeddings of `texts` with a `SentenceEncoder` and `tokenizer`: the path of
    `SentenceEncoder.embed` (which passes `model.tokenizer`), float32 `(n, d)`.

    `texts` is a list of str here (a bare str is refused: pass [text]); `max_length` counts
    [CLS] and [SEP] (default and maximum: the model's); `batch_size` default 64.
    """
    tokenizer = bert_tokenizer(tokenizer, method)
    texts, _ = as_texts("texts", texts, single_ok=False)
    rows = encode_texts(tokenizer, texts, max_length, model.max_length)
    vectors = run_rows(model, tokenizer, rows, EMBED_BATCH_SIZE if batch_size is None else batch_size)
    if not model.normalize:
        norms = np.sqrt(np.maximum(np.sum(np.square(vectors), axis=-1, keepdims=True), 1e-12))
        vectors = (vectors / norms).astype(np.float32)
    return vectors


def embed(model, texts, batch_size=None, max_length=None):
    """`SentenceEncoder.embed`: float32 unit vectors `(n, d)` (`(d,)` for one str)."""
    tokenizer = model.require_tokenizer("SentenceEncoder.embed")
    texts, single = as_texts("texts", texts)
    vectors = embed_texts(model, tokenizer, texts, max_length, batch_size, "SentenceEncoder.embed")
    return vectors[0] if single else vectors


# ---------------------------------------------------------------- masked LM
def mask_token(tokenizer):
    """The mask token's (id, string): the tokenizer's `[MASK]` (as the served `fill_mask`)."""
    mask_id = special_id(tokenizer, "mask", MASK)
    token = tokenizer.id_to_token(mask_id) if tokenizer.mask_id is not None else SPECIAL_TOKENS[MASK]
    return mask_id, token


def fill_mask(model, texts, top_k=FILL_MASK_TOP_K, batch_size=None):
    """`BertMaskedLM.fill_mask`: per text `{"filled", "top_tokens", "top_probabilities"}`, the
    served signature's answer (see `BertMaskedLM.fill_mask`)."""
    method = "BertMaskedLM.fill_mask"
    tokenizer = bert_tokenizer(model, method)
    texts, single = as_texts("texts", texts)
    mask_id, token = mask_token(tokenizer)
    special = set(tokenizer.special_token_ids)
    predictable = min(tokenizer.vocabulary_size, model.vocabulary_size)
    ordinary = np.array([i < predictable and i not in special for i in range(model.vocabulary_size)])
    top_k = min(check_positive_int("top_k", top_k), int(ordinary.sum()))
    limit = text_limit(model.max_length, tokenizer)
    pieces = [text.split(token) for text in texts]
    for i, parts in enumerate(pieces):
        if len(parts) < 2:
            raise ValueError(
                f"`texts[{i}]` ({texts[i][:60]!r}) has no {token}: mark the word to fill with {token}."
            )
    piece_ids = text_ids(tokenizer, [p for parts in pieces for p in parts])
    rows, start = [], 0
    for i, parts in enumerate(pieces):
        ids = []
        for k in range(len(parts)):
            ids += piece_ids[start + k] + ([mask_id] if k < len(parts) - 1 else [])
        start += len(parts)
        if mask_id not in ids[:limit]:
            raise ValueError(
                f"`texts[{i}]`: its first {token} lies past the model's length ({limit} text tokens); "
                "shorten the text before it."
            )
        rows.append(wrap(tokenizer, ids, limit))
    logits = run_rows(
        model, tokenizer, rows, BATCH_SIZE if batch_size is None else batch_size, per_token=True
    )
    vocabulary = tokenizer.get_vocabulary()
    answers = []
    for row, row_logits in zip(rows, logits):
        row_logits = np.where(ordinary[None, :], row_logits, np.float32(np.finfo(np.float32).min / 2))
        is_mask = row == mask_id
        filled = np.where(is_mask, np.argmax(row_logits, axis=-1), row)
        text = tokenizer.detokenize(tf.constant(filled[None], tf.int32))[0].numpy().decode("utf-8")
        first = int(np.argmax(is_mask))
        probabilities = tf.nn.softmax(tf.constant(row_logits[first]), axis=-1)
        top = tf.math.top_k(probabilities, k=top_k)
        answers.append(
            {
                "filled": text,
                "top_tokens": [vocabulary[int(i)] for i in top.indices.numpy()],
                "top_probabilities": top.values.numpy().astype(np.float32),
            }
        )
    return answers[0] if single else answers
