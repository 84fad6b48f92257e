"""Token-id rows → BERT input batches with dynamic padding.

    batches = LengthBucketedBatches(rows, labels, 32)     a keras.utils.PyDataset

Rows of similar length go into the same batch and each batch is padded only to its
longest row, so a model sees far less padding than with a fixed `max_length` (SST-2:
mean ≈ 25 WordPiece tokens against 64). The BERT text methods (`keras_tfm.models.bert_text`)
and the fine-tuning recipe batch their `[CLS] … [SEP]` rows with it.
"""

from collections.abc import Sequence

import keras
import numpy as np

from keras_tfm.checks import check_bool, check_int, check_positive_int

#: Shuffled chunks of this many batches are sorted by length before batching.
CHUNK_BATCHES = 50


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
            f"`rows` must be a list of token id arrays (e.g. from `bert_text.encode_texts`); received a "
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
