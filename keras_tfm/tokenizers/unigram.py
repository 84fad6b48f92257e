"""`UnigramTokenizer`: SentencePiece Unigram tokenizers (T5, Flan-T5, Marian / OPUS-MT) in TF ops.

Built from a checkpoint's files by `from_tokenizer_json`, `from_sentencepiece_model`,
`from_pretrained` or `from_marian` (readers in `unigram_files`), it gives the
ids HuggingFace gives: `tokenizers` for a `tokenizer.json` (and for a T5
`spiece.model`, which transformers converts to one), the `sentencepiece`
library plus `vocab.json` for Marian.
"""

import os
import weakref
from collections.abc import Sequence
from typing import Any, Self

import keras
import numpy as np
import tensorflow as tf

from keras_tfm.checks import check_bool, check_choice
from keras_tfm.tokenizers import unigram_text as T
from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.charsmap import decode_charsmap
from keras_tfm.tokenizers.precompiled_normalizer import PrecompiledNormalizer, SentencePieceNormalizer
from keras_tfm.tokenizers.unigram_lattice import UnigramLattice
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer

COMPATIBILITY = ("tokenizers", "sentencepiece")
NORMALIZER_TYPES = ("Precompiled", "Strip", "Replace", "Prepend")
PRE_TOKENIZER_TYPES = ("WhitespaceSplit", "Metaspace")


@keras.saving.register_keras_serializable(package="keras_tfm")
class UnigramTokenizer(VocabularyTokenizer):
    """A SentencePiece Unigram tokenizer: normaliser, Viterbi segmentation, ids, in TF ops.

    Two sets of rules are reproduced exactly (`compatibility`):

    - `"tokenizers"` (HuggingFace `tokenizers`, a `tokenizer.json`): added
      tokens are cut out of the raw text; every other part goes through the
      `normalizers` (`Precompiled` applies the charsmap grapheme cluster by
      cluster, see `precompiled_normalizer`), then the `pre_tokenizers`
      (`WhitespaceSplit`, `Metaspace`), and every word is segmented on its own
      with float64 scores. `detokenize` is the `Metaspace` decoder.
    - `"sentencepiece"` (the `sentencepiece` library, as transformers'
      `MarianTokenizer` uses it): added tokens (and, with `language_codes`, a
      leading `>>xx<<`) are cut out; every other part is normalised by
      SentencePiece's rules (`sentencepiece_normalizer`) and segmented whole
      with float32 scores; pieces map to ids through `vocabulary` (a piece not
      in it is `<unk>`). `detokenize` is MarianTokenizer's decode.

    The segmentation (`unigram_lattice`) maximises the sum of piece scores; a
    character that is no piece is unknown, with score `unk_score`, and a run
    of unknown characters is one piece: its text's id if the vocabulary has
    it, else its UTF-8 bytes `<0xXX>` with `byte_fallback`, else `unk_id`.
    Invalid UTF-8 input is read with U+FFFD in place of each bad byte.

    Everything is core TensorFlow ops (a SavedModel of it runs in a stock TF
    Serving binary). An eager call runs the whole tokenizer as one
    `tf.function`, traced on the first call (a few seconds).

    Args:
        vocabulary: the tokens in id order.
        scores: per token, its piece score, or None for a token that is no
            piece of the model (added tokens, the other Marian side's pieces).
        unk_score: the score of an unknown character (the lowest piece score
            minus 10).
        compatibility: `"tokenizers"` or `"sentencepiece"` (see above).
        extra_pieces: `[piece, score]` pairs of pieces that are not in
            `vocabulary` (they segment, and become `<unk>`).
        precompiled_charsmap: the base64 SentencePiece charsmap, or None.
        normalizers: "tokenizers" normaliser steps, dicts as in a
            `tokenizer.json`: `{"type": "Precompiled"}`, `{"type": "Strip",
            "left": bool, "right": bool}`, `{"type": "Replace", "pattern": str,
            "regex": bool, "content": str}`, `{"type": "Prepend", "prepend": str}`.
        pre_tokenizers: "tokenizers" pre-tokeniser steps: `{"type":
            "WhitespaceSplit"}`, `{"type": "Metaspace", "replacement": str,
            "prepend_scheme": "always" | "never", "split": bool}`.
        sentencepiece_normalizer: "sentencepiece" flags `{"add_dummy_prefix",
            "remove_extra_whitespaces", "escape_whitespaces"}`.
        decoder: "tokenizers" `Metaspace` decoder `{"replacement",
            "prepend_scheme"}`.
        decode_kinds: "sentencepiece": a string of one digit per token, 0 for
            a normal piece of the decoding model, 1 for a control piece, 2 for
            a token it does not know.
        added_tokens: `[content, special]` pairs of tokens of the vocabulary
            that are matched in the raw text before anything else.
        byte_fallback: unknown runs become byte tokens `<0x00>`..`<0xFF>`.
        language_codes: cut a leading `>>xx<<` off every text part (Marian).
        clean_up_tokenization_spaces: `detokenize` drops the space before
            `. ? ! ,` and English clitics (transformers' cleanup).
        special_tokens, add_bos, add_eos, max_length, **kwargs: see `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        scores: Sequence[float | None],
        unk_score: float,
        compatibility: str = "tokenizers",
        extra_pieces: Sequence[Sequence] = (),
        precompiled_charsmap: str | None = None,
        normalizers: Sequence[dict] = (),
        pre_tokenizers: Sequence[dict] = (),
        sentencepiece_normalizer: dict | None = None,
        decoder: dict | None = None,
        decode_kinds: str | None = None,
        added_tokens: Sequence[Sequence] = (),
        byte_fallback: bool = False,
        language_codes: bool = False,
        clean_up_tokenization_spaces: bool = False,
        special_tokens: SpecialTokensArg = False,
        **kwargs,
    ):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        if self.unk_id is None:
            raise ValueError("`special_tokens` must name the `unk` token: a Unigram model needs one.")
        self.compatibility = check_choice("compatibility", compatibility, COMPATIBILITY)
        self.byte_fallback = check_bool("byte_fallback", byte_fallback)
        self.language_codes = check_bool("language_codes", language_codes)
        self.clean_up_tokenization_spaces = check_bool(
            "clean_up_tokenization_spaces", clean_up_tokenization_spaces
        )
        self._scores = _check_scores(scores, len(self._vocabulary))
        self._extra_pieces = [[str(p), float(s)] for p, s in extra_pieces]
        self.unk_score = float(unk_score)
        self.precompiled_charsmap = precompiled_charsmap
        self.normalizers = [dict(step) for step in normalizers]
        self.pre_tokenizers = [dict(step) for step in pre_tokenizers]
        self.sentencepiece_normalizer = dict(sentencepiece_normalizer or {})
        self.decoder = dict(decoder or {})
        self.decode_kinds = decode_kinds
        self._added_tokens = [[str(t), check_bool("added_tokens special", s)] for t, s in added_tokens]
        self._build_text_steps()
        self._build_model()

    # ---- construction ------------------------------------------------------ #

    def _build_text_steps(self):
        blob = (
            None
            if self.precompiled_charsmap is None
            else decode_charsmap(self.precompiled_charsmap, "UnigramTokenizer")
        )
        if self.compatibility == "sentencepiece":
            options = {
                k: True for k in ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces")
            }
            options.update(self.sentencepiece_normalizer)
            self._normalizer = SentencePieceNormalizer(blob, **options, where="UnigramTokenizer")
            if self.decode_kinds is None or len(self.decode_kinds) != len(self._vocabulary):
                raise ValueError(
                    "`decode_kinds` must hold one digit per token with compatibility='sentencepiece'."
                )
            self._decode_kinds = tf.constant(
                np.frombuffer(self.decode_kinds.encode(), np.uint8) - 48, tf.int32
            )
            return
        for step in self.normalizers:
            check_choice("normalizers type", step.get("type"), NORMALIZER_TYPES)
            if step["type"] == "Precompiled" and blob is None:
                raise ValueError("A `Precompiled` normalizer needs `precompiled_charsmap`.")
        self._precompiled = None if blob is None else PrecompiledNormalizer(blob, "UnigramTokenizer")
        for step in self.pre_tokenizers:
            check_choice("pre_tokenizers type", step.get("type"), PRE_TOKENIZER_TYPES)
            if step["type"] == "Metaspace":
                check_choice("Metaspace prepend_scheme", step.get("prepend_scheme"), ("always", "never"))
        check_choice("decoder prepend_scheme", self.decoder.get("prepend_scheme"), ("always", "never"))
        if len(self.decoder.get("replacement", "")) != 1:
            raise ValueError(f"`decoder` must give a one-character `replacement`; received {self.decoder!r}.")

    def _build_model(self):
        index = {token: i for i, token in enumerate(self._vocabulary)}
        pieces = [(t, s, i) for i, (t, s) in enumerate(zip(self._vocabulary, self._scores)) if s is not None]
        pieces += [(p, s, self.unk_id) for p, s in self._extra_pieces]
        if not pieces:
            raise ValueError("`scores` gives no token a score: the model has no pieces.")
        dtype = tf.float64 if self.compatibility == "tokenizers" else tf.float32
        self._lattice = UnigramLattice(
            [p for p, _, _ in pieces], [s for _, s, _ in pieces], self.unk_score, dtype
        )
        self._piece_ids = tf.constant([i for _, _, i in pieces], tf.int32)
        byte_ids = [index.get(f"<0x{b:02X}>", -1) for b in range(256)]
        if self.byte_fallback and self.compatibility == "sentencepiece" and min(byte_ids) < 0:
            raise ValueError("`byte_fallback` needs the 256 byte tokens <0x00>..<0xFF> in the vocabulary.")
        self._byte_ids = tf.constant(byte_ids, tf.int32)
        missing = [t for t, _ in self._added_tokens if t not in index]
        if missing:
            raise ValueError(f"`added_tokens` {missing[:5]} are not in the vocabulary.")
        self._added_table = {t: index[t] for t, _ in self._added_tokens}

    # ---- special tokens ----------------------------------------------------- #

    @property
    def special_token_ids(self) -> tuple[int, ...]:
        """The ids of the special tokens: the roles' and every added token marked special (T5's
        sentinels `<extra_id_N>`); `detokenize` drops them all except `<unk>`."""
        ids = set(self._special_ids.values()) | {self._added_table[t] for t, s in self._added_tokens if s}
        return tuple(sorted(ids))

    # ---- encoding ---------------------------------------------------------- #

    @tf.autograph.experimental.do_not_convert
    def _encode(self, strings):
        if tf.executing_eagerly():
            return _eager_function(self, "encode", self._encode_graph)(strings)
        return self._encode_graph(strings)

    def _encode_graph(self, strings):
        strings = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        parts, kinds = T.split_added_tokens(strings, [t for t, _ in self._added_tokens], self.language_codes)
        flat, kind = parts.flat_values, kinds.flat_values
        text_index = tf.where(tf.equal(kind, T.TEXT))[:, 0]
        words = self._words(tf.gather(flat, text_index))
        unique, inverse = tf.unique(words.flat_values)
        word_ids = tf.gather(self._segment(unique), inverse)
        text_ids = tf.RaggedTensor.from_row_splits(word_ids, words.row_splits, validate=False).merge_dims(
            1, 2
        )
        other_index = tf.where(tf.not_equal(kind, T.TEXT))[:, 0]
        others = tf.gather(flat, other_index)
        found = self._token_table.lookup(others)
        other_ids = tf.where(found >= 0, found, self.unk_id)
        other_ids = tf.RaggedTensor.from_tensor(other_ids[:, None]).with_row_splits_dtype(
            text_ids.row_splits.dtype
        )
        rows = tf.concat([text_ids, other_ids], axis=0)
        order = tf.math.invert_permutation(tf.concat([text_index, other_index], 0))
        per_part = tf.gather(rows, order)
        per_part = per_part.with_row_splits_dtype(parts.row_splits.dtype)
        return parts.with_flat_values(per_part).merge_dims(1, 2)

    def _words(self, texts):
        """`[t]` text parts -> `[t, None]` ragged words, each segmented on its own."""
        if self.compatibility == "sentencepiece":
            normalized = self._normalizer(texts)
            return T.drop_empty(tf.RaggedTensor.from_tensor(normalized[:, None]))
        for step in self.normalizers:
            if step["type"] == "Precompiled":
                texts = self._precompiled(texts)
            elif step["type"] == "Strip":
                texts = T.strip(texts, step.get("left", False), step.get("right", False))
            elif step["type"] == "Replace":
                texts = T.replace(texts, step["pattern"], step["content"], step.get("regex", False))
            else:
                texts = T.prepend(texts, step["prepend"])
        words = T.drop_empty(tf.RaggedTensor.from_tensor(texts[:, None]))
        for step in self.pre_tokenizers:
            if step["type"] == "WhitespaceSplit":
                words = T.whitespace_split(words)
            else:
                words = T.metaspace(
                    words, step["replacement"], step["prepend_scheme"], step.get("split", True)
                )
        return words

    def _segment(self, words):
        """`[u]` distinct words -> `[u, None]` ragged int32 ids (unknown runs resolved)."""
        index, text = self._lattice(words)
        flat_index, flat_text = index.flat_values, text.flat_values
        unknown = flat_index < 0
        known_ids = tf.gather(self._piece_ids, tf.maximum(flat_index, 0))
        found = self._token_table.lookup(flat_text)
        looked_up = tf.where(found >= 0, found, self.unk_id)
        single = tf.where(unknown, looked_up, known_ids)
        if not self.byte_fallback:
            return index.with_flat_values(single)
        byte_ids = tf.ragged.map_flat_values(
            tf.gather, self._byte_ids, _bytes(tf.where(unknown, flat_text, ""))
        )
        if self.compatibility == "tokenizers":
            complete = tf.reduce_all(tf.ragged.map_flat_values(tf.greater_equal, byte_ids, 0), axis=1)
            use_bytes = unknown & (found < 0) & complete
        else:
            use_bytes = unknown
        bytes_part = tf.ragged.map_flat_values(
            tf.gather, self._byte_ids, _bytes(tf.where(use_bytes, flat_text, ""))
        )
        single_part = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(single, ~use_bytes), tf.cast(~use_bytes, tf.int64), validate=False
        )
        per_piece = tf.concat([single_part, bytes_part.with_row_splits_dtype(tf.int64)], axis=1)
        return index.with_flat_values(per_piece).merge_dims(1, 2)

    # ---- decoding ---------------------------------------------------------- #

    @tf.autograph.experimental.do_not_convert
    def _decode(self, ids):
        if tf.executing_eagerly():
            return _eager_function(self, "decode", self._decode_graph)(ids)
        return self._decode_graph(ids)

    def _decode_graph(self, ids):
        tokens = self._tokens(ids)
        if self.compatibility == "sentencepiece":
            kinds = tf.ragged.map_flat_values(tf.gather, self._decode_kinds, ids)
            text = T.marian_decode(tokens, kinds, self._vocabulary[self.unk_id])
        else:
            text = T.metaspace_decode(tokens, self.decoder["replacement"], self.decoder["prepend_scheme"])
        return T.clean_up_tokenization(text) if self.clean_up_tokenization_spaces else text

    # ---- loading and config ------------------------------------------------ #

    @classmethod
    def from_tokenizer_json(cls, path: str | os.PathLike, **kwargs) -> Self:
        """Reads a HuggingFace `tokenizer.json` with a `Unigram` model (`unigram_files.read_tokenizer_json`).

        Args:
            path: the `tokenizer.json` file, or a directory holding it (whose
                `tokenizer_config.json` / `special_tokens_map.json` then name
                the special tokens).
            **kwargs: constructor arguments that override what the files say.
        """
        from keras_tfm.tokenizers.unigram_files import read_tokenizer_json

        return cls(**{**read_tokenizer_json(path), **kwargs})

    @classmethod
    def from_sentencepiece_model(cls, path: str | os.PathLike, extra_ids: int = 100, **kwargs) -> Self:
        """Reads a T5 `spiece.model` as transformers' `T5Tokenizer` converts it (`unigram_files.read_t5_model`).

        Args:
            path: the `.model` file, or a directory holding `spiece.model`.
            extra_ids: number of sentinel tokens `<extra_id_0>`.. appended (T5: 100).
            **kwargs: constructor arguments that override what the file says.
        """
        from keras_tfm.tokenizers.unigram_files import read_t5_model

        return cls(**{**read_t5_model(path, extra_ids), **kwargs})

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> Self:
        """A T5 / Flan-T5 checkpoint directory: its `tokenizer.json`, else its `spiece.model`."""
        from keras_tfm.tokenizers.unigram_files import read_t5_directory

        return cls(**{**read_t5_directory(path), **kwargs})

    @classmethod
    def from_marian(cls, path: str | os.PathLike, side: str = "source", **kwargs) -> Self:
        """One side (`"source"` or `"target"`) of a Marian / OPUS-MT checkpoint directory
        (`source.spm` / `target.spm` + `vocab.json`, see `unigram_files.read_marian`)."""
        from keras_tfm.tokenizers.unigram_files import read_marian

        return cls(**{**read_marian(path, side), **kwargs})

    def _tokenizer_config(self) -> dict[str, Any]:
        config = super()._tokenizer_config()
        config.update(
            {
                "scores": list(self._scores),
                "unk_score": self.unk_score,
                "compatibility": self.compatibility,
                "extra_pieces": [list(p) for p in self._extra_pieces],
                "precompiled_charsmap": self.precompiled_charsmap,
                "normalizers": [dict(s) for s in self.normalizers],
                "pre_tokenizers": [dict(s) for s in self.pre_tokenizers],
                "sentencepiece_normalizer": dict(self.sentencepiece_normalizer),
                "decoder": dict(self.decoder),
                "decode_kinds": self.decode_kinds,
                "added_tokens": [list(t) for t in self._added_tokens],
                "byte_fallback": self.byte_fallback,
                "language_codes": self.language_codes,
                "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces,
            }
        )
        return config


def load_marian_tokenizers(path: str | os.PathLike, **kwargs) -> tuple[UnigramTokenizer, UnigramTokenizer]:
    """The (source, target) tokenizers of a Marian / OPUS-MT checkpoint directory.

    Args:
        path: the directory (`source.spm`, `target.spm`, `vocab.json`,
            `tokenizer_config.json`).
        **kwargs: constructor arguments for both (e.g. `max_length`).

    Returns:
        `(source, target)`: both append `</s>`; `target.detokenize` turns
        generated ids back into text as `MarianTokenizer.decode` does.
    """
    return UnigramTokenizer.from_marian(path, "source", **kwargs), UnigramTokenizer.from_marian(
        path, "target", **kwargs
    )


#: Per tokenizer, the `tf.function`s that run its eager calls as one graph (outside the layer, so
#: that neither Keras nor a SavedModel tracks them).
_EAGER_FUNCTIONS = weakref.WeakKeyDictionary()


def _eager_function(tokenizer, name, function):
    functions = _EAGER_FUNCTIONS.setdefault(tokenizer, {})
    if name not in functions:
        functions[name] = tf.function(function, autograph=False, reduce_retracing=True)
    return functions[name]


def _check_scores(scores, size):
    if isinstance(scores, (str, bytes)) or not hasattr(scores, "__iter__"):
        raise TypeError(f"`scores` must be a list of float or None; received {type(scores).__name__}.")
    scores = [None if s is None else float(s) for s in scores]
    if len(scores) != size:
        raise ValueError(f"`scores` must have one entry per token ({size}); received {len(scores)}.")
    bad = [s for s in scores if s is not None and not np.isfinite(s)]
    if bad:
        raise ValueError(f"`scores` must be finite; found {bad[0]}.")
    return scores


def _bytes(strings):
    """`[n]` strings -> `[n, None]` ragged int32 byte values."""
    chars = tf.strings.bytes_split(strings)
    values = tf.io.decode_raw(chars.flat_values, tf.uint8)
    return chars.with_flat_values(tf.cast(tf.reshape(values, [-1]), tf.int32))
