"""Sentence pairs of a seq2seq checkpoint (T5, BART, Marian): read, batched for teacher forcing with the
checkpoint's tokenizers and special ids, and translated back (the recipe `finetune_seq2seq`).

    pairs = read_pair_file("spa.txt")                          [(source, target)], errors naming `data`
    batches = pair_batches(model, pairs, max_length=64, batch_size=32)
    texts = translate_rows(model, encode_side(source_tokenizer, sources, 64, "dev"), 63)
"""

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_tfm.models.text_batches import LengthBucketedBatches, pad_batch

#: Held-out sources translated per generation call.
TRANSLATE_BATCH = 64


def read_pair_file(path: str, argument: str = "data", reverse: bool = False) -> list[tuple[str, str]]:
    """[(source, target)] of a tab-separated file (first two columns; blank lines skipped).

    Raises:
        ValueError naming `argument`: a missing file or a folder, an empty file, a line without a tab,
            a pair with an empty side.
    """
    from keras_tfm.recipes.seq2seq import read_pairs

    if os.path.isdir(path):
        raise ValueError(f"`{argument}`: {path!r} is a folder; expected a file of SOURCE<TAB>TARGET lines.")
    try:
        pairs = read_pairs(path, reverse, argument=argument)
    except ValueError as error:  # the loader's messages name its own argument, `path`
        raise ValueError(str(error).replace("`path` ", "").replace("`path`: ", "")) from None
    for index, (source, target) in enumerate(pairs):
        if not source.strip() or not target.strip():
            raise ValueError(
                f"`{argument}`: pair {index + 1} of {path!r} has an empty side: {source!r} / {target!r}."
            )
    return pairs


def encode_side(tokenizer: Any, texts: Sequence[str], max_length: int, name: str) -> list[np.ndarray]:
    """Each text's ids as `tokenizers.text.encode` gives them (the tokenizer's prefix and suffix ids
    around its text ids), the text ids truncated so that a row has at most `max_length` ids."""
    from keras_tfm.tokenizers import text as text_lib

    prefix, suffix = list(tokenizer.prefix_ids), list(tokenizer.suffix_ids)
    room = max_length - len(prefix) - len(suffix)
    if room < 1:
        raise ValueError(
            f"`max_length` must leave room for a token besides {prefix + suffix}; got {max_length}."
        )
    rows = [prefix + ids[:room] + suffix for ids in text_lib.text_ids(tokenizer, texts, name)]
    return [np.asarray(row, np.int32) for row in rows]


class PairBatches(LengthBucketedBatches):
    """Teacher-forcing batches of a seq2seq checkpoint, padded per batch with its pad id.

    Yields `({"encoder_token_ids", "decoder_token_ids"}, labels)`: the sources, `[start_id] +
    labels[:-1]` and the target rows (`labels`), each padded with `pad_id` to the batch's longest.
    Batched by source length as `LengthBucketedBatches` (shuffled per epoch unless `shuffle=False`).
    """

    def __init__(self, sources, targets, batch_size, pad_id, start_id, shuffle=True, seed=0):
        super().__init__(sources, None, batch_size, shuffle=shuffle, pad_id=pad_id, seed=seed)
        self.targets = [np.asarray(t, np.int32) for t in targets]
        self.start_id = int(start_id)

    def __getitem__(self, index):
        batch = self.batches[index]
        labels = [self.targets[i] for i in batch]
        starts = [np.concatenate([[self.start_id], t[:-1]]).astype(np.int32) for t in labels]
        features = {
            "encoder_token_ids": pad_batch([self.rows[i] for i in batch], self.pad_id)["token_ids"],
            "decoder_token_ids": pad_batch(starts, self.pad_id)["token_ids"],
        }
        return features, pad_batch(labels, self.pad_id)["token_ids"]


def tokenizer_pair(model: Any) -> tuple[Any, Any]:
    """`(source, target)` tokenizers of a seq2seq checkpoint's model (one shared tokenizer twice)."""
    tokenizer = model.tokenizer
    if tokenizer is None:
        raise ValueError("`checkpoint`: no tokenizer files were read beside the weights.")
    return tuple(tokenizer) if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)


def pair_batches(model, pairs, max_length, batch_size, shuffle=True, seed=0, name="data"):
    """`PairBatches` of `pairs` with the model's tokenizers, pad id and decoder start id."""
    source_tokenizer, target_tokenizer = tokenizer_pair(model)
    sources = encode_side(source_tokenizer, [s for s, _ in pairs], max_length, name)
    targets = encode_side(target_tokenizer, [t for _, t in pairs], max_length, name)
    start_id = model.decoder_start_id
    if start_id is None:
        start_id = target_tokenizer.bos_id
    return PairBatches(sources, targets, batch_size, model.source_pad_id, start_id, shuffle, seed)


def translate_rows(model, rows, max_new_tokens, num_beams=4, length_penalty=None):
    """Translations of source id rows (the ids `translate` makes of a text, here possibly truncated),
    in batches of `TRANSLATE_BATCH`: decoded from the checkpoint's start id to its stop id, greedily
    (`num_beams=1`) or the best beam (length penalty None: the checkpoint's), by graph functions
    without XLA, the new ids detokenized by the target tokenizer."""
    from keras_tfm.generation import Generator
    from keras_tfm.generation.text import seq2seq_ids
    from keras_tfm.tokenizers import text as text_lib

    target = tokenizer_pair(model)[1]
    start_id, stop_id = seq2seq_ids(model, target, "translate")
    ids = dict(bos_id=start_id, eos_id=stop_id)
    generator = Generator(model, jit_compile=False)  # a few batches: an XLA compile would not pay off
    out = []
    for first in range(0, len(rows), TRANSLATE_BATCH):
        batch = [row.tolist() for row in rows[first : first + TRANSLATE_BATCH]]
        if num_beams == 1:
            tokens, lengths = generator.generate(
                batch, max_new_tokens, sampler="greedy", return_lengths=True, **ids
            )
        else:
            sequences, _, lengths = generator.beam_search(
                batch, max_new_tokens, num_beams=num_beams, length_penalty=length_penalty, **ids
            )
            tokens, lengths = sequences[:, 0], lengths[:, 0]
        new = [tokens[b, : int(n)].tolist() for b, n in enumerate(np.minimum(lengths, tokens.shape[1]))]
        out += text_lib.decode(target, new)
    return out
