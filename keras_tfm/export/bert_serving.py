"""Serving endpoints of BERT models: `classify`, `fill_mask` and `embed`."""

import numpy as np
import tensorflow as tf

from keras_tfm.export.common import FILL_MASK_TOP_K, MASK_TOKEN, check_nonempty_batch, require, string_vector
from keras_tfm.generation import samplers
from keras_tfm.models.bert_tasks import BertTask
from keras_tfm.models.bert_text import text_limit
from keras_tfm.tokenizers.special_tokens import CLS, MASK, PAD, SEP
from keras_tfm.tokenizers.text import raw_encode, sample_text, special_id


# --------------------------------------------------------------------------- BERT
class _BertBase:
    def __init__(self, model, tokenizer):
        if tokenizer is None:
            raise ValueError("A BERT export needs a tokenizer.")
        if not getattr(tokenizer, "special_tokens", False):
            raise ValueError("A BERT export needs a tokenizer with special tokens ([CLS], [SEP], [MASK]).")
        self.model = model
        self.tokenizer = tokenizer
        if not isinstance(model, BertTask):
            raise TypeError(
                f"A BERT export needs a model built on a BertEncoder (BertClassifier, BertMaskedLM); received "
                f"{type(model).__name__}."
            )
        self.vocabulary_size = model.vocabulary_size
        self.max_length = model.max_length
        self.limit = text_limit(model.max_length, tokenizer)  # text tokens per row, as in process
        if tokenizer.vocabulary_size > self.vocabulary_size:
            raise ValueError(
                f"The tokenizer has {tokenizer.vocabulary_size} ids but the model only {self.vocabulary_size}."
            )

    def encode(self, ragged_text_ids, name):
        """`[CLS] ids [SEP]` truncated to the model length → model inputs dict + padded ids."""
        batch = tf.shape(ragged_text_ids.row_lengths())[0]
        with tf.control_dependencies([check_nonempty_batch(name, batch)]):
            ids = ragged_text_ids[:, : self.limit]
        rows = ids.nrows(out_type=tf.int64)
        cls_id, sep_id = special_id(self.tokenizer, "cls", CLS), special_id(self.tokenizer, "sep", SEP)
        cls = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(cls_id, tf.int32)))
        sep = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(sep_id, tf.int32)))
        ids = tf.concat([cls, tf.cast(ids, tf.int32), sep], axis=1)
        token_ids = ids.to_tensor(default_value=special_id(self.tokenizer, "pad", PAD))
        padding_mask = tf.cast(tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1]), tf.int32)
        inputs = {
            "token_ids": token_ids,
            "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": padding_mask,
        }
        return inputs

    def warmup_text(self):
        return sample_text(self.tokenizer)


class BertClassifierServing(_BertBase):
    """`classify`: strings → class probabilities, label names and `truncated` (bool [B]: the
    input had more tokens than the model's length and only its first `max_length - 2` were
    classified)."""

    def __init__(self, model, tokenizer, label_names=None):
        super().__init__(model, tokenizer)
        num_classes = int(model.output.shape[-1])
        self.binary_sigmoid = num_classes == 1
        expected = 2 if self.binary_sigmoid else num_classes
        if label_names is None:
            label_names = [f"LABEL_{i}" for i in range(expected)]
        label_names = [str(n) for n in label_names]
        if len(label_names) != expected:
            raise ValueError(
                f"`label_names` must have {expected} names for this classifier; received {label_names}."
            )
        self.label_names = label_names

    def endpoints(self):
        model, names = self.model, tf.constant(self.label_names)

        def classify(inputs):
            raw = raw_encode(self.tokenizer, string_vector("inputs", inputs))
            # Inputs longer than the model are cut to its length; the response says which.
            truncated = raw.row_lengths() > self.limit
            x = self.encode(raw, "inputs")
            logits = tf.cast(model(x, training=False), tf.float32)
            if self.binary_sigmoid:
                probabilities = tf.sigmoid(logits)
                index = tf.cast(probabilities[:, 0] >= 0.5, tf.int32)
            else:
                probabilities = tf.nn.softmax(logits, axis=-1)
                index = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
            return {"probabilities": probabilities, "labels": tf.gather(names, index), "truncated": truncated}

        return [("classify", classify, [tf.TensorSpec([None], tf.string, name="inputs")])]

    def warmup_requests(self):
        return [("classify", {"inputs": np.array([self.warmup_text().encode()])})]


class SentenceEncoderServing(_BertBase):
    """`embed`: strings → float32 sentence embeddings `[B, d]` (a `SentenceEncoder`: pooling and
    L2 normalisation inside the graph) and `truncated` (bool [B], as `classify`)."""

    def endpoints(self):
        model = self.model

        def embed(inputs):
            raw = raw_encode(self.tokenizer, string_vector("inputs", inputs))
            truncated = raw.row_lengths() > self.limit
            embeddings = tf.cast(model(self.encode(raw, "inputs"), training=False), tf.float32)
            return {"embeddings": embeddings, "truncated": truncated}

        return [("embed", embed, [tf.TensorSpec([None], tf.string, name="inputs")])]

    def warmup_requests(self):
        return [("embed", {"inputs": np.array([self.warmup_text().encode()])})]


class BertMaskedLMServing(_BertBase):
    """`fill_mask`: strings containing the tokenizer's mask token (`[MASK]`) →
    the best filled string and, for the first mask of each input, the top-5
    tokens and probabilities (special tokens are never predicted). The mask
    and special-token ids are the tokenizer's (a published vocabulary:
    BERT's `[MASK]` is 103)."""

    def __init__(self, model, tokenizer, top_k=FILL_MASK_TOP_K):
        super().__init__(model, tokenizer)
        self.mask_id = special_id(tokenizer, "mask", MASK)
        self.mask_token = tokenizer.id_to_token(self.mask_id) if tokenizer.mask_id is not None else MASK_TOKEN
        # Predictions are restricted to the tokenizer's ordinary tokens.
        self.num_predictable = tokenizer.vocabulary_size
        self.special_ids = tuple(tokenizer.special_token_ids)
        self.top_k = min(int(top_k), self.num_predictable - len(self.special_ids))

    def encode_masked(self, strings):
        """Splits on the literal mask token, tokenizes the pieces and joins them
        with the mask id (tokenizers would otherwise split `[MASK]` as text)."""
        pieces = tf.strings.split(strings, sep=self.mask_token)  # [B, (n_pieces)]
        flat_ids = raw_encode(self.tokenizer, pieces.flat_values)  # [P, (t)]
        n = tf.cast(pieces.row_lengths(), tf.int32)
        num_pieces = tf.shape(pieces.flat_values)[0]
        # A MASK after every piece but the last of its row.
        piece_row_end = tf.cast(pieces.row_splits[1:], tf.int32) - 1
        is_last = tf.scatter_nd(piece_row_end[:, None], tf.ones_like(piece_row_end), [num_pieces]) > 0
        mask_counts = tf.cast(tf.logical_not(is_last), tf.int64)
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(mask_counts)], tf.constant(self.mask_id, tf.int32)), mask_counts
        )
        joined = tf.concat([tf.cast(flat_ids, tf.int32), masks], axis=1)  # [P, (t + 0/1)]
        per_row = tf.RaggedTensor.from_row_splits(joined, pieces.row_splits)
        return per_row.merge_dims(1, 2), n - 1

    def endpoints(self):
        model, tokenizer = self.model, self.tokenizer
        vocab_strings = tf.constant(tokenizer.get_vocabulary())

        def fill_mask(inputs):
            ids, num_masks = self.encode_masked(string_vector("inputs", inputs))
            with tf.control_dependencies(
                [
                    require(
                        tf.reduce_all(num_masks >= 1),
                        f"every item of `inputs` must contain {self.mask_token}; masks per item:",
                        num_masks,
                    ),
                ]
            ):
                ids = tf.identity(ids)
            x = self.encode(ids, "inputs")
            token_ids = x["token_ids"]
            logits = tf.cast(model(x, training=False), tf.float32)
            ids_range = tf.range(self.vocabulary_size)
            special = tf.constant(self.special_ids or (-1,), tf.int32)
            is_special = tf.reduce_any(tf.equal(ids_range[:, None], special[None, :]), axis=-1)
            ordinary = ~is_special & (ids_range < self.num_predictable)
            logits = tf.where(ordinary[None, None, :], logits, samplers.MASK_VALUE)
            best = tf.argmax(logits, axis=-1, output_type=tf.int32)
            is_mask = tf.equal(token_ids, self.mask_id)
            filled_ids = tf.where(is_mask, best, token_ids)
            lengths = tf.reduce_sum(x["padding_mask"], axis=1)
            filled = tokenizer.detokenize(tf.RaggedTensor.from_tensor(filled_ids, lengths=lengths))
            first = tf.argmax(tf.cast(is_mask, tf.int32), axis=1, output_type=tf.int32)
            first_logits = tf.gather(logits, first, batch_dims=1)
            top = tf.math.top_k(tf.nn.softmax(first_logits, axis=-1), k=self.top_k)
            return {
                "filled": filled,
                "top_tokens": tf.gather(vocab_strings, top.indices),
                "top_probabilities": top.values,
            }

        return [("fill_mask", fill_mask, [tf.TensorSpec([None], tf.string, name="inputs")])]

    def warmup_requests(self):
        return [("fill_mask", {"inputs": np.array([f"{self.warmup_text()} {self.mask_token}".encode()])})]
