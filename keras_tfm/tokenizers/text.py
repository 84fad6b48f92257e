"""Text in, ids out, ids back to text: the conventions every text path shares.

The model methods that take text (`GPT.generate`, `Seq2Seq.translate`,
`BertClassifier.predict`, `SentenceEncoder.embed`, ...) and the exported
serving signatures (`keras_tfm.export`) read and write text with these
functions, so a text gives the same ids in process and when served:

    encode(tokenizer, texts)        the tokenizer's ids with the tokens it adds itself
                                    (its BOS/EOS or [CLS]/[SEP]), no padding
    text_ids(tokenizer, texts)      the ids without the tokens the tokenizer adds
    wrap(tokenizer, ids, limit)     [CLS] ids[:limit] [SEP] with the tokenizer's ids (BERT rows)
    decode(tokenizer, rows)         ids → str: ids past the tokenizer's vocabulary read as
                                    [UNK] (dropped without special tokens), special tokens dropped

`raw_encode` and `detokenize` are the graph forms of `text_ids` and `decode`
(ragged tensors in, inside a `tf.function`).
"""

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_tfm.tokenizers.special_tokens import CLS, NUM_SPECIAL_TOKENS, PAD, SEP, UNK


def special_id(tokenizer: object, role: str, default: int) -> int:
    """The tokenizer's id of a special token (`cls`, `sep`, `pad`, `bos`, ...): where its
    vocabulary has it (a published checkpoint: [CLS]=101 in BERT), else `default`."""
    value = getattr(tokenizer, f"{role}_id", None)
    return default if value is None else int(value)


# --------------------------------------------------------------------------- graph
def raw_encode(tokenizer: object, strings: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings → ragged `[batch, (len)]` ids WITHOUT the tokens the tokenizer adds."""
    return tokenizer.encode_text(strings)


def detokenize(tokenizer: object, ids: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """The first `lengths[b]` ids of each row of `ids` → strings, by the rule of `decode`."""
    ragged = tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32), lengths=tf.cast(lengths, tf.int64))
    if getattr(tokenizer, "special_tokens", False):
        unknown = tf.constant(special_id(tokenizer, "unk", UNK), tf.int32)
        ragged = tf.ragged.map_flat_values(
            lambda v: tf.where(v < tokenizer.vocabulary_size, v, unknown), ragged
        )
    else:
        ragged = tf.ragged.boolean_mask(
            ragged, tf.ragged.map_flat_values(tf.less, ragged, tokenizer.vocabulary_size)
        )
    return tokenizer.detokenize(ragged)


# --------------------------------------------------------------------------- Python
def text_ids(tokenizer: object, texts: Sequence[str], name: str = "texts") -> list[list[int]]:
    """Ids of each text without the tokens the tokenizer adds, as int lists.

    Raises:
        ValueError: a tokenizer without [UNK] met a token it does not know (naming `name`).
    """
    try:
        ragged = raw_encode(tokenizer, tf.constant(list(texts), tf.string))
    except tf.errors.InvalidArgumentError as error:
        message = error.message.strip().splitlines()[0]
        raise ValueError(f"`{name}` cannot be tokenized by the model's tokenizer: {message}") from None
    return [[int(i) for i in row] for row in ragged.to_list()]


def encode(tokenizer: object, texts: Sequence[str], name: str = "inputs") -> list[list[int]]:
    """Ids of each text as `tokenizer.tokenize` gives them without padding: its `prefix_ids`,
    the text's ids and its `suffix_ids`. An empty row raises a ValueError naming `name[i]`."""
    prefix, suffix = list(tokenizer.prefix_ids), list(tokenizer.suffix_ids)
    rows = [prefix + row + suffix for row in text_ids(tokenizer, texts, name)]
    for index, row in enumerate(rows):
        if not row:
            raise ValueError(
                f"`{name}[{index}]`={texts[index]!r} has no tokens; every text needs at least one."
            )
    return rows


def wrap(tokenizer: object, ids: Sequence[int], limit: int) -> np.ndarray:
    """`[CLS] ids[:limit] [SEP]` as int32, with the tokenizer's special ids (a BERT row)."""
    cls_id, sep_id = special_id(tokenizer, "cls", CLS), special_id(tokenizer, "sep", SEP)
    return np.asarray([cls_id, *ids[:limit], sep_id], np.int32)


def decode(tokenizer: object, rows: Sequence[Sequence[int]]) -> list[str]:
    """Strings of id lists: ids past the tokenizer's vocabulary become `[UNK]` (are dropped by a
    tokenizer without special tokens), then `tokenizer.detokenize` (which drops the special
    tokens but `[UNK]`)."""
    lengths = [len(row) for row in rows]
    dense = np.full((len(rows), max(lengths + [1])), special_id(tokenizer, "pad", PAD), np.int64)
    for b, row in enumerate(rows):
        dense[b, : len(row)] = row
    dense = np.minimum(dense, np.iinfo(np.int32).max)
    strings = detokenize(tokenizer, tf.constant(dense, tf.int32), tf.constant(lengths, tf.int32)).numpy()
    return [s.decode("utf-8", errors="replace") for s in strings]


def sample_text(tokenizer: object, count: int = 4) -> str:
    """A short string made of ordinary vocabulary tokens (for warmup requests)."""
    vocabulary = tokenizer.get_vocabulary()
    start = NUM_SPECIAL_TOKENS if getattr(tokenizer, "special_tokens", False) else 0
    tokens = [t for t in vocabulary[start : start + 64] if t.isprintable() and not t.startswith("#")][:count]
    if not tokens or any(t.startswith("<0x") for t in tokens):
        return "hello"
    joiner = "" if all(len(t) == 1 for t in tokens) and type(tokenizer).__name__ == "CharTokenizer" else " "
    return joiner.join(tokens)


__all__ = ["decode", "detokenize", "encode", "raw_encode", "sample_text", "special_id", "text_ids", "wrap"]
