"""Tokenized sentences → BERT input batches with dynamic padding.

    rows = encode_texts(tokenizer, texts, max_length)     [CLS] … [SEP] ids, truncated
    batches = LengthBucketedBatches(rows, labels, 32)     a keras.utils.PyDataset

Sentences of similar length go into the same batch and each batch is padded
only to its longest sentence, so a model sees far less padding than with a
fixed `max_length` (SST-2: mean ≈ 25 WordPiece tokens against 64). Used by
fine-tuning (`keras_tfm.recipes.finetune`) and sentence embedding (`embed_texts`:
a `SentenceEncoder` over a list of texts).

Texts come as a list (or 1-D array) of strings: a bare `str` is refused with a
TypeError rather than read as a list of characters. (A tokenizer's call maps a
scalar string to one id sequence, mirroring its input's shape; these entry
points return one row per text, so one text is passed as `[text]`.)
"""

from collections.abc import Sequence

import keras
import numpy as np

from keras_tfm.checks import check_bool, check_int, check_positive_int
from keras_tfm.tokenizers.base import Tokenizer

#: Shuffled chunks of this many batches are sorted by length before batching.
CHUNK_BATCHES = 50


def check_texts(name, texts):
    """`texts` as a list of str: a list, tuple or 1-D array of strings (or
    bytes); a bare str (or bytes) is refused, not split into characters."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"`{name}` must be a list of texts; received a single {type(texts).__name__} "
            f"({texts[:40]!r}): pass [text] for one text."
        )
    if hasattr(texts, "numpy"):  # a tf string tensor
        texts = texts.numpy()
    if isinstance(texts, np.ndarray) and texts.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D list of texts; received an array of shape {texts.shape}.")
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"`{name}` must be a list of texts; received {type(texts).__name__}.") from None
    for i, text in enumerate(items):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"`{name}[{i}]` must be a str; received {text!r} ({type(text).__name__}).")
    return items


def encode_texts(tokenizer: Tokenizer, texts: Sequence[str], max_length: int) -> list[np.ndarray]:
    """Token ids `[CLS] … [SEP]` per text, truncated to `max_length` (the final
    `[SEP]` kept), as a list of int32 arrays. `texts`: a list of str (a bare
    str raises a TypeError)."""
    check_positive_int("max_length", max_length)
    texts = check_texts("texts", texts)
    if not texts:
        return []
    ragged = tokenizer(texts)
    suffix = list(getattr(tokenizer, "suffix_ids", ()) or ())
    rows = []
    for ids in ragged.to_list():
        if len(ids) > max_length:
            ids = ids[: max_length - len(suffix)] + suffix
        rows.append(np.asarray(ids, np.int32))
    return rows


def pad_batch(rows: Sequence[np.ndarray], pad_id: int = 0) -> dict[str, np.ndarray]:
    """Model inputs for a list of id arrays, padded to the longest."""
    width = max(len(r) for r in rows)
    token_ids = np.full((len(rows), width), pad_id, np.int32)
    padding_mask = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
        token_ids[i, : len(r)] = r
        padding_mask[i, : len(r)] = 1
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": padding_mask}


class LengthBucketedBatches(keras.utils.PyDataset):
    """Batches of similar-length sequences, padded per batch (dynamic padding).

    Every epoch: shuffle, cut into chunks of `CHUNK_BATCHES` batches, sort each
    chunk by length, cut into batches, shuffle the batches.

    Args:
        rows: list of 1-D int id arrays, each non-empty (a str or a flat
            list of ids is refused).
        labels: int labels, one per row (or None for prediction).
        batch_size: sentences per batch.
        shuffle: reshuffle every epoch (False: sorted by length, for evaluation).
        pad_id: padding token id (int >= 0).
        seed: shuffling seed.
    """

    def __init__(
        self,
        rows: Sequence[np.ndarray],
        labels: Sequence[int] | np.ndarray | None = None,
        batch_size: int = 32,
        shuffle: bool = True,
        pad_id: int = 0,
        seed: int | None = 0,
    ):
        super().__init__()
        self.rows = _check_rows(rows)
        self.labels = None if labels is None else np.asarray(labels)
        if self.labels is not None:
            if self.labels.ndim != 1 or len(self.labels) != len(self.rows):
                raise ValueError(
                    f"`labels` must hold one label per row ({len(self.rows)}); received shape {self.labels.shape}."
                )
            if self.labels.size and self.labels.dtype.kind not in "iu":
                raise TypeError(f"`labels` must be int class ids; received dtype {self.labels.dtype}.")
            self.labels = self.labels.astype(np.int32)
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.shuffle = check_bool("shuffle", shuffle)
        self.pad_id = check_int("pad_id", pad_id, minimum=0)
        self.rng = np.random.default_rng(seed)
        self._make_batches()

    def _make_batches(self):
        lengths = np.array([len(r) for r in self.rows])
        if not self.shuffle:
            order = np.argsort(lengths, kind="stable")
            self.batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            return
        order = self.rng.permutation(len(self.rows))
        chunk = self.batch_size * CHUNK_BATCHES
        batches = []
        for start in range(0, len(order), chunk):
            part = order[start : start + chunk]
            part = part[np.argsort(lengths[part], kind="stable")]
            batches += [part[i : i + self.batch_size] for i in range(0, len(part), self.batch_size)]
        self.rng.shuffle(batches)
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        batch = self.batches[index]
        inputs = pad_batch([self.rows[i] for i in batch], self.pad_id)
        return inputs if self.labels is None else (inputs, self.labels[batch])

    def on_epoch_end(self) -> None:
        if self.shuffle:
            self._make_batches()


def _check_rows(rows):
    """`rows`: a list of non-empty 1-D int id sequences (not a str, not one flat list of ids)."""
    if isinstance(rows, (str, bytes)):
        raise TypeError(
            f"`rows` must be a list of token id arrays (e.g. from `encode_texts`); received a "
            f"{type(rows).__name__} ({rows[:40]!r})."
        )
    rows = list(rows)
    for i, row in enumerate(rows):
        arr = np.asarray(row)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu") or arr.size == 0:
            raise ValueError(
                f"`rows[{i}]` must be a non-empty 1-D sequence of int token ids (rows is a list of "
                f"sequences); received {row!r:.60}."
            )
    return rows


def embed_texts(model, tokenizer, texts, max_length=256, batch_size=64):
    """Embeddings of `texts` with a `SentenceEncoder` (batched by length, in input order).

    Args:
        model: a `SentenceEncoder` (e.g. `keras_tfm.checkpoints.sentence_encoder(path)`).
        tokenizer: its tokenizer (`WordPieceTokenizer.from_pretrained(path)`).
        texts: list of str (a bare str raises a TypeError: pass `[text]`).
        max_length: longer texts are truncated (sentence-transformers'
            `max_seq_length`, 256 for all-MiniLM-L6-v2).
        batch_size: texts per forward pass.

    Returns:
        float32 NumPy array `(len(texts), d_model)`.
    """
    rows = encode_texts(tokenizer, texts, max_length)
    batches = LengthBucketedBatches(rows, None, batch_size, shuffle=False, pad_id=tokenizer.pad_id)
    out = np.zeros((len(rows), int(model.output.shape[-1])), np.float32)
    for i in range(len(batches)):
        # predict_on_batch runs Keras's compiled predict function (shape-relaxed, traced once).
        out[batches.batches[i]] = np.asarray(model.predict_on_batch(batches[i]), np.float32)
    return out
