"""`WordPieceTokenizer`: BERT's greedy longest-match-first subwords, in TF ops.

Built `from_corpus` (vocabulary learned by `wordpiece_trainer`) or
`from_pretrained` (a published BERT vocabulary: `vocab.txt` with
`tokenizer_config.json` or `tokenizer.json`, BERT's normalisation and
special-token ids), it gives the ids HuggingFace `tokenizers` gives.
"""

import os
import re
import warnings
from collections.abc import Sequence
from typing import Self

import keras
import tensorflow as tf

from keras_tfm.checks import check_bool, check_choice, check_positive_int
from keras_tfm.tokenizers import huggingface_files as F
from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.bert_text import BertWordSplitter
from keras_tfm.tokenizers.corpus import Corpus, split_words
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer
from keras_tfm.tokenizers.wordpiece_trainer import learn_wordpiece_vocabulary

_NORMALIZATIONS = ("words", "bert")
_BERT_ROLES = ("pad", "unk", "cls", "sep", "mask")
# HuggingFace `tokenizers`' WordPiece decoder cleanup, applied in this order to every token.
_CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


@keras.saving.register_keras_serializable(package="keras_tfm")
class WordPieceTokenizer(VocabularyTokenizer):
    """Greedy longest-match-first WordPiece (BERT's algorithm), in TF ops.

    Text is first split into words, by `split_words` (`normalization="words"`,
    the default: optional lower-casing, punctuation and symbols split) or by
    BERT's basic tokenizer (`normalization="bert"`: control characters
    dropped, accents stripped, lower-cased, punctuation and CJK ideographs
    split, see `bert_text`). Each word is then cut into the longest
    vocabulary piece starting at its first character, then the longest
    `##`-prefixed piece starting where that ended, and so on. A word that
    cannot be covered (or longer than `max_input_chars_per_word` characters)
    becomes a single `[UNK]`, as in BERT. The matching runs as a
    `tf.while_loop` over piece positions, vectorised over the distinct words
    of a batch that are not finished yet and over all candidate piece lengths
    (`tf.strings.substr` with `unit="UTF8_CHAR"`), so it is exported with the
    model.

    `detokenize` is HuggingFace's WordPiece decoder: each token but the first
    is glued to the previous one when it starts with `##` (which is dropped),
    otherwise preceded by a space; with `clean_up_tokenization_spaces` that
    space is dropped again before tokens starting with `. ? ! , n't 'm 's 've
    're` (HuggingFace `tokenizers` applies its cleanup token by token, so
    `"don ' t"` stays as it is). Special tokens other than `[UNK]` are dropped.

    Args:
        vocabulary: list of pieces in id order; continuation pieces start with
            `suffix_indicator`.
        lowercase: lower-case the input before splitting.
        suffix_indicator: prefix of continuation pieces.
        max_input_chars_per_word: longer words become `[UNK]`.
        normalization: `"words"` or `"bert"` (see above).
        strip_accents: with `normalization="bert"`: strip accents; None
            follows `lowercase` (BERT's rule).
        tokenize_chinese_chars: with `normalization="bert"`: make every CJK
            ideograph its own word.
        clean_up_tokenization_spaces: `detokenize` drops the space before
            punctuation and English clitics (see above); `from_pretrained`
            turns it on as HuggingFace's decoder does.
        special_tokens, add_bos, add_eos, add_cls_sep, max_length,
            **kwargs: see `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        lowercase: bool = True,
        suffix_indicator: str = "##",
        max_input_chars_per_word: int = 100,
        special_tokens: SpecialTokensArg = True,
        normalization: str = "words",
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        clean_up_tokenization_spaces: bool = False,
        **kwargs,
    ):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        self.clean_up_tokenization_spaces = check_bool(
            "clean_up_tokenization_spaces", clean_up_tokenization_spaces
        )
        self.lowercase = check_bool("lowercase", lowercase)
        if not isinstance(suffix_indicator, str) or not suffix_indicator:
            raise ValueError(f"`suffix_indicator` must be a non-empty str; received {suffix_indicator!r}.")
        self.suffix_indicator = suffix_indicator
        self.max_input_chars_per_word = check_positive_int(
            "max_input_chars_per_word", max_input_chars_per_word
        )
        self.normalization = check_choice("normalization", normalization, _NORMALIZATIONS)
        self.strip_accents = None if strip_accents is None else check_bool("strip_accents", strip_accents)
        self.tokenize_chinese_chars = check_bool("tokenize_chinese_chars", tokenize_chinese_chars)
        if normalization == "words" and (strip_accents or not tokenize_chinese_chars):
            raise ValueError(
                "`strip_accents` and `tokenize_chinese_chars` apply to `normalization='bert'` only; "
                f"received strip_accents={strip_accents!r}, tokenize_chinese_chars={tokenize_chinese_chars!r}."
            )
        if normalization == "bert":
            self._word_splitter = BertWordSplitter(lowercase, strip_accents, tokenize_chinese_chars)
        n = len(suffix_indicator)
        continuation = [(i, t[n:]) for i, t in enumerate(self._vocabulary) if t.startswith(suffix_indicator)]
        continuation = [(i, t) for i, t in continuation if t] or [(0, "")]
        self._continuation_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([t for _, t in continuation], tf.string),
                tf.constant([self._offset + i if t else -1 for i, t in continuation], tf.int32),
            ),
            default_value=-1,
        )
        self._longest_token_chars = max(len(t) for t in self._vocabulary)
        self._max_piece_chars = max(
            len(t[n:]) if t.startswith(suffix_indicator) else len(t) for t in self._vocabulary
        )
        self._max_piece_chars = max(1, min(self._max_piece_chars, max_input_chars_per_word))

    @classmethod
    def from_corpus(
        cls,
        corpus: Corpus,
        vocabulary_size: int,
        lowercase: bool = True,
        special_tokens: SpecialTokensArg = True,
        suffix_indicator: str = "##",
        **kwargs,
    ) -> Self:
        """Learns a vocabulary with `learn_wordpiece_vocabulary` and builds the tokenizer.

        Args:
            corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
            vocabulary_size: target `vocabulary_size`, special tokens included.
            lowercase, special_tokens, suffix_indicator: see the class.
            **kwargs: other constructor arguments.

        Returns:
            A `WordPieceTokenizer`.
        """
        vocabulary = learn_wordpiece_vocabulary(
            corpus,
            vocabulary_size,
            lowercase=lowercase,
            special_tokens=special_tokens,
            suffix_indicator=suffix_indicator,
        )
        return cls(
            vocabulary,
            lowercase=lowercase,
            special_tokens=special_tokens,
            suffix_indicator=suffix_indicator,
            **kwargs,
        )

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> Self:
        """A published BERT WordPiece tokenizer from a HuggingFace-layout directory.

        Reads `vocab.txt` (ids = line numbers) and the options of
        `tokenizer_config.json` / `special_tokens_map.json` (`do_lower_case`,
        `strip_accents`, `tokenize_chinese_chars`, `unk_token`, `cls_token`,
        ...); without `vocab.txt`, the WordPiece model and `BertNormalizer` of
        `tokenizer.json`. The special-token ids are where the vocabulary has
        them (bert-base-uncased: `[PAD]`=0, `[UNK]`=100, `[CLS]`=101,
        `[SEP]`=102, `[MASK]`=103). Tokenization is BERT's
        (`normalization="bert"`) and `add_cls_sep=True`, so
        `tokenizer(texts)` gives `[CLS] ... [SEP]` ids as HuggingFace's
        `tokenizer(texts)["input_ids"]`; `tokenize_pairs` gives sentence
        pairs with segment ids. `detokenize` is the decoder of
        `tokenizer.json` (`cleanup`, on by default as in HuggingFace), except
        that `[UNK]` is kept.

        Args:
            path: the checkpoint directory.
            **kwargs: constructor arguments that override what the files say
                (e.g. `max_length=128`, `add_cls_sep=False`).

        Returns:
            A `WordPieceTokenizer`.

        Raises:
            FileNotFoundError: the directory or both vocabulary files are missing.
            ValueError: a file is malformed, or a special token is not in
                the vocabulary (naming the file and the field).
        """
        option_files = {}
        options = F.read_tokenizer_options(path, option_files)
        vocab_file = F.checkpoint_file(path, "vocab.txt", required=False)
        if vocab_file is not None:
            vocabulary = F.read_vocab_txt(vocab_file)
            source = vocab_file
            json_options = {}
            json_file = F.checkpoint_file(path, "tokenizer.json", required=False)
            cleanup = None if json_file is None else F.read_wordpiece_decoder_cleanup(json_file)
            if cleanup is not None:
                json_options["decoder_cleanup"] = cleanup
        else:
            source = F.checkpoint_file(path, "tokenizer.json", required=False)
            if source is None:
                raise FileNotFoundError(f"`path` {path!r} has neither vocab.txt nor tokenizer.json.")
            vocabulary, json_options = F.read_wordpiece_json(source)
        for key, value in json_options.items():
            if key not in options:
                options[key] = value
                option_files[key] = source
        # BERT's defaults when a config leaves a token out.
        for role in _BERT_ROLES:
            options.setdefault(f"{role}_token", f"[{role.upper()}]")
        special = F.special_tokens_from_options(options, _BERT_ROLES, vocabulary, f"{path!r} ({source})")
        if "unk" not in special:
            raise ValueError(f"{source!r}: the vocabulary has no `unk_token` ({options.get('unk_token')!r}).")
        lowercase = options.get("do_lower_case", True)
        config = {
            "lowercase": bool(lowercase),
            "strip_accents": options.get("strip_accents"),
            "tokenize_chinese_chars": bool(options.get("tokenize_chinese_chars", True)),
            "suffix_indicator": options.get("suffix_indicator", "##"),
            "max_input_chars_per_word": options.get("max_input_chars_per_word", 100),
            "normalization": "bert",
            "special_tokens": special,
            "add_cls_sep": "cls" in special and "sep" in special,
            "clean_up_tokenization_spaces": bool(options.get("decoder_cleanup", True)),
        }
        config.update(kwargs)
        if config["lowercase"]:
            _warn_cased_vocabulary(vocabulary, special, source, option_files.get("do_lower_case"))
        return cls(_deduplicate(vocabulary, source), **config)

    def _split_words(self, strings):
        if self.normalization == "bert":
            return self._word_splitter(strings)
        return split_words(strings, self.lowercase)

    def _encode(self, strings):
        """Words found whole in the vocabulary (most of them) take one lookup; only the
        others go through the piece-by-piece loop. Their ids are then scattered into place."""
        words = self._split_words(strings)
        flat = words.flat_values
        whole = self._token_table.lookup(flat)
        found = whole >= 0
        if self.max_input_chars_per_word < self._longest_token_chars:
            found &= tf.strings.length(flat, unit="UTF8_CHAR") <= self.max_input_chars_per_word
        rest_index = tf.cast(tf.where(~found)[:, 0], tf.int32)
        rest = self._split_pieces(tf.gather(flat, rest_index))  # [R, None]
        rest_lengths = tf.cast(rest.row_lengths(), tf.int32)
        lengths = tf.tensor_scatter_nd_update(tf.cast(found, tf.int32), rest_index[:, None], rest_lengths)
        starts = tf.cumsum(lengths, exclusive=True)
        found_index = tf.cast(tf.where(found)[:, 0], tf.int32)
        rest_rows = tf.cast(rest.value_rowids(), tf.int32)
        rest_offsets = tf.range(tf.size(rest.flat_values)) - tf.gather(
            tf.cast(rest.row_starts(), tf.int32), rest_rows
        )
        positions = tf.concat(
            [
                tf.gather(starts, found_index),
                tf.gather(tf.gather(starts, rest_index), rest_rows) + rest_offsets,
            ],
            axis=0,
        )
        values = tf.concat([tf.gather(whole, found_index), tf.cast(rest.flat_values, tf.int32)], axis=0)
        ids = tf.scatter_nd(positions[:, None], values, tf.reduce_sum(lengths)[None])
        word_rows = tf.cast(words.value_rowids(), tf.int32)
        per_row = tf.math.unsorted_segment_sum(lengths, word_rows, words.nrows(out_type=tf.int32))
        return tf.RaggedTensor.from_row_lengths(ids, tf.cast(per_row, tf.int64), validate=False)

    def _split_pieces(self, words):
        """`[n]` words -> `[n, None]` int32 piece ids; each distinct word is split once."""
        unique_words, index = tf.unique(words)
        return tf.gather(self._split_unique_words(unique_words), index)

    def _split_unique_words(self, words):
        """Greedy longest-match-first over `[n]` words (one `[UNK]`, or -1, for a word that fails).

        Each loop step handles only the words not finished yet: at each one's
        current position it cuts the candidate pieces of `min(max_piece_chars,
        characters left) .. 1` characters, looks them all up at once (the
        first piece of a word in the token table, the others, without their
        `##`, in the continuation table) and keeps the longest found.
        """
        n = tf.shape(words)[0]
        word_length = tf.strings.length(words, unit="UTF8_CHAR")
        failed = word_length > self.max_input_chars_per_word
        position = tf.zeros_like(word_length)
        # Column 0 is a dummy (-1) so the array is never empty; a failed word's [UNK] goes there.
        pieces = tf.TensorArray(tf.int32, size=1, dynamic_size=True, element_shape=tf.TensorShape([None]))
        pieces = pieces.write(0, tf.fill([n], -1))
        max_steps = tf.reduce_max(tf.concat([tf.where(failed, 0, word_length), [0]], axis=0))

        def active(position, failed):
            return (position < word_length) & ~failed

        def cond(step, position, failed, pieces):
            return (step < max_steps) & tf.reduce_any(active(position, failed))

        def body(step, position, failed, pieces):
            rows = tf.cast(tf.where(active(position, failed))[:, 0], tf.int32)
            row_position = tf.gather(position, rows)
            count = tf.minimum(self._max_piece_chars, tf.gather(word_length, rows) - row_position)
            lengths = tf.ragged.range(count, 0, -1)  # longest first
            owner = tf.cast(lengths.value_rowids(), tf.int32)
            length = lengths.flat_values
            start = tf.gather(row_position, owner)
            candidate = tf.strings.substr(
                tf.gather(words, tf.gather(rows, owner)), start, length, unit="UTF8_CHAR"
            )
            ids = tf.where(
                start > 0, self._continuation_table.lookup(candidate), self._token_table.lookup(candidate)
            )
            index = tf.where(ids >= 0, tf.range(tf.size(ids)), tf.int32.max)
            best = tf.math.unsorted_segment_min(index, owner, tf.size(rows))
            found = best < tf.int32.max
            best = tf.where(found, best, 0)
            piece = tf.where(found, tf.gather(ids, best), -1)
            scatter = rows[:, None]
            position = tf.tensor_scatter_nd_update(
                position, scatter, tf.where(found, row_position + tf.gather(length, best), row_position)
            )
            failed = tf.tensor_scatter_nd_update(failed, scatter, ~found)
            column = tf.tensor_scatter_nd_update(tf.fill([n], -1), scatter, piece)
            return step + 1, position, failed, pieces.write(step + 1, column)

        _, _, failed, pieces = tf.while_loop(
            cond,
            body,
            (tf.constant(0, tf.int32), position, failed, pieces),
        )
        matrix = tf.transpose(pieces.stack())  # [n, steps + 1]
        first = tf.range(tf.shape(matrix)[1])[None, :] == 0
        matrix = tf.where(failed[:, None] & first, self._oov_id, matrix)
        keep = tf.where(failed[:, None], first, matrix >= 0)
        return tf.ragged.boolean_mask(matrix, keep)

    def _decode(self, ids):
        """HuggingFace's WordPiece decoder, token by token (see the class docstring)."""
        tokens = self._tokens(ids)
        flat = tokens.flat_values
        position = tf.range(tf.size(flat, out_type=tokens.row_splits.dtype), dtype=tokens.row_splits.dtype)
        first = tf.equal(position, tf.gather(tokens.row_splits, tokens.value_rowids()))
        prefix_bytes = len(self.suffix_indicator.encode("utf-8"))
        continued = tf.equal(tf.strings.substr(flat, 0, prefix_bytes), self.suffix_indicator)
        stripped = tf.strings.regex_replace(
            flat, "^" + re.escape(self.suffix_indicator), "", replace_global=False
        )
        glued = tf.where(continued, stripped, tf.strings.join([" ", flat]))
        pieces = tf.where(first, flat, glued)
        if self.clean_up_tokenization_spaces:
            for dirty, clean in _CLEANUP:
                pieces = tf.strings.regex_replace(pieces, re.escape(dirty), clean)
        return tf.strings.reduce_join(tokens.with_flat_values(pieces), axis=-1)

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config.update(
            {
                "lowercase": self.lowercase,
                "suffix_indicator": self.suffix_indicator,
                "max_input_chars_per_word": self.max_input_chars_per_word,
                "normalization": self.normalization,
                "strip_accents": self.strip_accents,
                "tokenize_chinese_chars": self.tokenize_chinese_chars,
                "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces,
            }
        )
        return config


def _warn_cased_vocabulary(vocabulary, special, source, option_file):
    """Warns when lower-casing makes a real part of the vocabulary unreachable (a cased vocabulary
    read with `do_lower_case` true: "Hello World" would become `[UNK] [UNK]`)."""
    specials = set(special.values())
    tokens = set(vocabulary)
    cased = [
        token
        for token in vocabulary
        if token not in specials
        and not (token.startswith("[") and token.endswith("]"))
        and token != token.lower()
        and token.lower() not in tokens
    ]
    if len(cased) > max(1, len(vocabulary) // 100):
        where = f"`do_lower_case` true in {option_file}" if option_file else "no `do_lower_case` in "
        if not option_file:
            where += "tokenizer_config.json (BERT's default: true)"
        warnings.warn(
            f"{source}: {len(cased)} of the {len(vocabulary)} tokens have upper-case letters (e.g. "
            f"{cased[:3]}) and no lower-case twin, but the text is lower-cased ({where}): those tokens "
            "are never produced and cased words become [UNK]. For a cased vocabulary pass "
            "`lowercase=False` (or set do_lower_case to false).",
            stacklevel=3,
        )


def _deduplicate(vocabulary, source):
    """A published vocab.txt may repeat a line: HuggingFace keeps the last id; keep the list length."""
    seen = {}
    for i, token in enumerate(vocabulary):
        seen[token] = i
    if len(seen) == len(vocabulary):
        return vocabulary
    raise ValueError(
        f"{source!r} repeats tokens ({len(vocabulary) - len(seen)} duplicates); "
        "keras_tfm needs every token once."
    )
