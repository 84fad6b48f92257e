"""Run a BERT classifier or sentence encoder LiteRT export: `LiteRTEncoder`.

    LiteRTEncoder("clf.tflite").predict(["a fine movie"])      # class probabilities
    LiteRTEncoder("clf.tflite").forward(token_ids)             # logits / embeddings

The `forward` signature takes `max_length` columns; shorter inputs are padded here (their
padding mask hides the padding, as in the Keras model). Texts are encoded as the served
`classify` / `embed` signatures encode them: `[CLS] ids[: max_length - 2] [SEP]`.
"""

import numpy as np

from keras_tfm.checks import text_batch
from keras_tfm.export.litert_runner import LiteRTModel
from keras_tfm.generation.prompts import to_id_array

__all__ = ["LiteRTEncoder"]


class LiteRTEncoder(LiteRTModel):
    """A BERT classifier or sentence encoder LiteRT export: `forward` (ids) and `predict` (text)."""

    def forward(self, token_ids, segment_ids=None, padding_mask=None) -> np.ndarray:
        """The model's output (`logits` or `embeddings`) for int `(batch, T <= max_length)` inputs
        (padded to the export's length; `padding_mask` default: ids != 0)."""
        token_ids = to_id_array("token_ids", token_ids)
        if token_ids.ndim != 2 or token_ids.shape[1] > self.max_length:
            raise ValueError(
                f"`token_ids` must be 2-D (batch, length <= {self.max_length}); received shape {token_ids.shape}."
            )
        if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= self.vocabulary_size):
            raise ValueError(f"`token_ids` holds ids outside [0, {self.vocabulary_size}).")
        defaults = {
            "segment_ids": np.zeros_like(token_ids),
            "padding_mask": (token_ids != 0).astype(np.int32),
        }
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        width = self.max_length - token_ids.shape[1]
        for name, value in inputs.items():
            value = defaults[name] if value is None else to_id_array(name, value)
            inputs[name] = np.pad(value.astype(np.int32), [(0, 0), (0, width)])
        return self._call("forward", **inputs)[self.metadata["output"]]

    def predict(self, texts):
        """Classifier: class probabilities (softmax; sigmoid for one logit); sentence encoder:
        embeddings. Each text is encoded as `[CLS] ids [SEP]`, cut to the export's length."""
        batch = text_batch("texts", texts)
        if batch is None:
            raise TypeError(
                f"`texts` must be a str or a non-empty list of str; received {type(texts).__name__}."
            )
        texts, scalar = batch
        tokenizer = self._tokenizer("tokenizer", "predict")
        cls, sep = self.metadata["cls_id"], self.metadata["sep_id"]
        rows = [[cls] + ids[: self.max_length - 2] + [sep] for ids in tokenizer.encode(texts, raw=True)]
        ids = np.zeros((len(rows), self.max_length), np.int32)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = row
        lengths = np.array([[len(row)] for row in rows])
        out = self.forward(ids, padding_mask=(np.arange(self.max_length) < lengths).astype(np.int32))
        if self.metadata["output"] == "logits":
            if out.shape[-1] == 1:
                out = 1.0 / (1.0 + np.exp(-out))
            else:
                shifted = np.exp(out - out.max(axis=-1, keepdims=True))
                out = shifted / shifted.sum(axis=-1, keepdims=True)
        return out[0] if scalar else out
