"""`BytePairTokenizer`: GPT-2's byte-level BPE (pre-tokenization regex, byte alphabet, merges) in TF ops."""

import os
from collections.abc import Sequence
from typing import Self

import keras
import numpy as np
import tensorflow as tf

from keras_tfm.tokenizers import huggingface_files as F
from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.byte_level import bytes_to_unicode, gpt2_class_tables, split_pieces
from keras_tfm.tokenizers.byte_pair_trainer import learn_byte_pair_vocabulary
from keras_tfm.tokenizers.corpus import Corpus
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer

_GPT2_ROLES = ("pad", "unk", "bos", "eos")
_NO_MERGE = np.iinfo(np.int32).max


@keras.saving.register_keras_serializable(package="keras_tfm")
class BytePairTokenizer(VocabularyTokenizer):
    """Byte-level byte-pair encoding (GPT-2, RoBERTa), exactly as HuggingFace `tokenizers`.

    Text is cut into pieces by GPT-2's pre-tokenization regex
    `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`
    (evaluated from character classes, since RE2 has no look-ahead); each
    piece's UTF-8 bytes become GPT-2's printable byte characters, and the
    merges are applied lowest rank first (all non-overlapping occurrences,
    left to right), vectorised over the distinct pieces of a batch in a
    `tf.while_loop`. Every byte is in the vocabulary, so nothing is unknown,
    and `detokenize` gives back the exact input bytes (invalid UTF-8
    included; decode them yourself).

    Args:
        vocabulary: the tokens (byte characters) in id order.
        merges: the merge rules in rank order, each `"left right"`.
        special_tokens: a dict `{role: token}` naming tokens of the vocabulary
            (GPT-2: `{"bos": "<|endoftext|>", "eos": "<|endoftext|>"}`), or
            False.
        add_bos, add_eos, max_length, **kwargs: see `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        merges: Sequence[str],
        special_tokens: SpecialTokensArg = False,
        **kwargs,
    ):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        if isinstance(merges, (str, bytes)) or not hasattr(merges, "__iter__"):
            raise TypeError(f"`merges` must be a list of 'left right' str; received {type(merges).__name__}.")
        merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
        known, ranks = set(self._vocabulary), {}
        for rank, merge in enumerate(merges):
            parts = merge.split(" ")
            if len(parts) != 2 or not all(parts):
                raise ValueError(f"`merges[{rank}]` must be 'left right'; received {merge!r}.")
            if ranks.setdefault(merge, rank) != rank:
                raise ValueError(f"`merges[{rank}]` {merge!r} repeats `merges[{ranks[merge]}]`.")
            if parts[0] + parts[1] not in known:
                raise ValueError(
                    f"`merges[{rank}]` {merge!r} makes {parts[0] + parts[1]!r}, which is not in the vocabulary."
                )
        self._merges = tuple(merges)
        byte_chars = bytes_to_unicode()
        missing = [c for c in byte_chars.values() if c not in known]
        if missing:
            raise ValueError(
                f"`vocabulary` lacks byte characters {missing[:5]}...; it is not a byte-level BPE vocabulary."
            )
        self._byte_chars = tf.constant([byte_chars[b] for b in range(256)], tf.string)
        self._merge_ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(self._merges) or ["\x00 \x00"], tf.string),
                tf.range(max(len(self._merges), 1), dtype=tf.int32),
            ),
            default_value=_NO_MERGE,
        )
        char_bytes = {c: bytes([b]) for b, c in byte_chars.items()}
        decoded = [b"".join(char_bytes.get(c, c.encode("utf-8")) for c in t) for t in self.get_vocabulary()]
        self._id_bytes = tf.constant(decoded, tf.string)
        self._class_starts, self._classes = gpt2_class_tables()

    @classmethod
    def from_corpus(
        cls,
        corpus: Corpus,
        vocabulary_size: int,
        special_tokens: SpecialTokensArg = True,
        min_frequency: int = 1,
        **kwargs,
    ) -> Self:
        """Learns merges with `learn_byte_pair_vocabulary` (cased) and builds the tokenizer.

        Args:
            corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
            vocabulary_size: target `vocabulary_size`, the 256 byte
                characters and the special tokens included.
            special_tokens: True (the default) reserves ids 0..6 for the fixed
                special tokens (`[BOS]`, `[EOS]`, ... of the seq2seq
                pipelines); False: none.
            min_frequency: ignore pieces seen fewer times.
            **kwargs: constructor arguments (`add_bos`, `add_eos`, ...).

        Returns:
            A `BytePairTokenizer`.
        """
        vocabulary, merges = learn_byte_pair_vocabulary(
            corpus, vocabulary_size, special_tokens=bool(special_tokens), min_frequency=min_frequency
        )
        return cls(vocabulary, merges, special_tokens=special_tokens, **kwargs)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> Self:
        """GPT-2's tokenizer from a HuggingFace-layout directory.

        Reads `vocab.json` + `merges.txt` (else the BPE model of
        `tokenizer.json`) and, when present, the special tokens of
        `tokenizer_config.json` / `special_tokens_map.json` (GPT-2:
        `<|endoftext|>` = 50256 is its `bos` and `eos`; without those files
        `<|endoftext|>` is used when the vocabulary has it).

        Args:
            path: the checkpoint directory.
            **kwargs: constructor arguments (e.g. `add_eos=True`).

        Returns:
            A `BytePairTokenizer`.
        """
        vocabulary, merges = F.read_bpe_files(path)
        options = F.read_tokenizer_options(path)
        if "<|endoftext|>" in vocabulary:
            for role in ("bos", "eos"):
                options.setdefault(f"{role}_token", "<|endoftext|>")
        special = F.special_tokens_from_options(options, _GPT2_ROLES, vocabulary, repr(path))
        special.pop("unk", None)  # every byte is in the vocabulary: nothing is ever unknown
        config = {"special_tokens": special or False}
        config.update(kwargs)
        return cls(vocabulary, merges, **config)

    # ---- pre-tokenization ---------------------------------------------------- #

    def split_pieces(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """`[batch]` strings -> `[batch, None]` pieces of GPT-2's regex (`byte_level.split_pieces`)."""
        return split_pieces(strings, self._class_starts, self._classes)

    # ---- BPE ---------------------------------------------------------------- #

    def _encode(self, strings):
        pieces = self.split_pieces(strings)
        unique, index = tf.unique(pieces.flat_values)
        ids = tf.gather(self._merge_pieces(unique), index)
        nested = tf.RaggedTensor.from_row_splits(
            ids, tf.cast(pieces.row_splits, ids.row_splits.dtype), validate=False
        )
        return nested.merge_dims(1, 2)

    def _merge_pieces(self, pieces):
        """`[n]` byte strings -> `[n, None]` int32 ids after all merges."""
        chars = tf.strings.bytes_split(pieces)
        byte_values = tf.reshape(tf.cast(tf.io.decode_raw(chars.flat_values, tf.uint8), tf.int32), [-1])
        symbols = tf.gather(self._byte_chars, byte_values)
        lengths = tf.cast(chars.row_lengths(), tf.int32)

        def cond(symbols, lengths, done):
            return ~done

        def body(symbols, lengths, done):
            symbols, lengths, merged = self._merge_once(symbols, lengths)
            return symbols, lengths, ~merged

        symbols, lengths, _ = tf.while_loop(
            cond,
            body,
            (symbols, lengths, tf.constant(False)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
        )
        ids = self._lookup_flat(symbols)
        return tf.RaggedTensor.from_row_lengths(ids, tf.cast(lengths, tf.int64), validate=False)

    def _merge_once(self, symbols, lengths):
        """One step: in every piece, merge all non-overlapping occurrences of its lowest-rank pair."""
        size = tf.size(symbols)
        row_ids = tf.repeat(tf.range(tf.size(lengths)), lengths)
        same_row = tf.concat([row_ids[1:] == row_ids[:-1], [False]], axis=0)[:size]
        right = tf.concat([symbols[1:], [""]], axis=0)[:size]
        ranks = self._merge_ranks.lookup(tf.strings.join([symbols, right], separator=" "))
        ranks = tf.where(same_row, ranks, _NO_MERGE)
        best = tf.math.unsorted_segment_min(ranks, row_ids, tf.size(lengths))
        match = (ranks == tf.gather(best, row_ids)) & (ranks < _NO_MERGE)
        # In a run of overlapping matches (a a a -> aa a) take every other one, from the left.
        run_id = tf.cumsum(tf.cast(~match, tf.int32))
        breaks = tf.cast(tf.where(~match)[:, 0], tf.int32)
        previous_break = tf.where(run_id > 0, tf.gather(breaks, tf.maximum(run_id - 1, 0)), -1)
        selected = match & ((tf.range(size) - previous_break - 1) % 2 == 0)
        merged_symbols = tf.where(selected, tf.strings.join([symbols, right]), symbols)
        removed = tf.concat([[False], selected[:-1]], axis=0)[:size]
        new_lengths = lengths - tf.math.unsorted_segment_sum(
            tf.cast(selected, tf.int32), row_ids, tf.size(lengths)
        )
        return tf.boolean_mask(merged_symbols, ~removed), new_lengths, tf.reduce_any(selected)

    def _decode(self, ids):
        return tf.strings.reduce_join(tf.gather(self._id_bytes, ids), axis=-1)

    @classmethod
    def _from_tokens(cls, tokens, config, path):
        if "merges" not in config:
            raise ValueError(
                f"`path` {path!r}: a BytePairTokenizer vocabulary file needs `merges` in its header."
            )
        return cls(vocabulary=tokens, **config)

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["merges"] = list(self._merges)
        return config
