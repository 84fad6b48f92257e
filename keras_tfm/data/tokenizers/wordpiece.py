"""`WordPieceTokenizer`: BERT's greedy longest-match-first subwords, in TF ops.

Built `from_corpus` (vocabulary learned by `wordpiece_trainer`) or
`from_pretrained` (a published BERT vocabulary: `vocab.txt` with
`tokenizer_config.json` or `tokenizer.json`, BERT's normalisation and
special-token ids), it gives the ids HuggingFace `tokenizers` gives.
"""

import re

import keras
import tensorflow as tf

from keras_tfm.checks import check_bool, check_choice, check_positive_int
from keras_tfm.data.tokenizers import pretrained_files as F
from keras_tfm.data.tokenizers.bert_text import BertWordSplitter
from keras_tfm.data.tokenizers.corpus import split_words
from keras_tfm.data.tokenizers.vocabulary import VocabularyTokenizer

_NORMALIZATIONS = ("words", "bert")
_BERT_ROLES = ("pad", "unk", "cls", "sep", "mask")


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

    `detokenize` joins pieces, glueing `##` pieces to the previous one.

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
        special_tokens, add_bos, add_eos, add_cls_sep, sequence_length,
            **kwargs: see `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        suffix_indicator="##",
        max_input_chars_per_word=100,
        special_tokens=True,
        normalization="words",
        strip_accents=None,
        tokenize_chinese_chars=True,
        **kwargs,
    ):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
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
        self._max_piece_chars = max(
            len(t[n:]) if t.startswith(suffix_indicator) else len(t) for t in self._vocabulary
        )
        self._max_piece_chars = max(1, min(self._max_piece_chars, max_input_chars_per_word))

    @classmethod
    def from_corpus(
        cls, corpus, vocabulary_size, lowercase=True, special_tokens=True, suffix_indicator="##", **kwargs
    ):
        """Learns a vocabulary with `learn_wordpiece_vocabulary` and builds the tokenizer.

        Args:
            corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
            vocabulary_size: target `vocabulary_size`, special tokens included.
            lowercase, special_tokens, suffix_indicator: see the class.
            **kwargs: other constructor arguments.

        Returns:
            A `WordPieceTokenizer`.
        """
        from keras_tfm.data.tokenizers.wordpiece_trainer import learn_wordpiece_vocabulary

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
    def from_pretrained(cls, path, **kwargs):
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
        pairs with segment ids.

        Args:
            path: the checkpoint directory.
            **kwargs: constructor arguments that override what the files say
                (e.g. `sequence_length=128`, `add_cls_sep=False`).

        Returns:
            A `WordPieceTokenizer`.

        Raises:
            FileNotFoundError: the directory or both vocabulary files are missing.
            ValueError: a file is malformed, or a special token is not in
                the vocabulary (naming the file and the field).
        """
        options = F.read_tokenizer_options(path)
        vocab_file = F.checkpoint_file(path, "vocab.txt", required=False)
        if vocab_file is not None:
            vocabulary = F.read_vocab_txt(vocab_file)
            source = vocab_file
            json_options = {}
        else:
            source = F.checkpoint_file(path, "tokenizer.json", required=False)
            if source is None:
                raise FileNotFoundError(f"`path` {path!r} has neither vocab.txt nor tokenizer.json.")
            vocabulary, json_options = F.read_wordpiece_json(source)
        for key, value in json_options.items():
            options.setdefault(key, value)
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
        }
        config.update(kwargs)
        return cls(_deduplicate(vocabulary, source), **config)

    def _split_words(self, strings):
        if self.normalization == "bert":
            return self._word_splitter(strings)
        return split_words(strings, self.lowercase)

    def _encode(self, strings):
        words = self._split_words(strings)
        pieces = self._split_pieces(words.flat_values)
        nested = tf.RaggedTensor.from_row_splits(
            pieces, tf.cast(words.row_splits, pieces.row_splits.dtype), validate=False
        )
        return nested.merge_dims(1, 2)

    def _split_pieces(self, words):
        """`[n]` words -> `[n, None]` int32 piece ids; each distinct word is split once."""
        unique_words, index = tf.unique(words)
        return tf.gather(self._split_unique_words(unique_words), index)

    def _split_unique_words(self, words):
        """Greedy longest-match-first over `[n]` words (one `[UNK]`, or -1, for a word that fails).

        Each loop step handles only the words not finished yet: it cuts, for
        each, every candidate piece of `max_piece_chars .. 1` characters at its
        current position, looks them all up at once and keeps the longest
        found. Most words are whole vocabulary entries and finish in one step.
        """
        num_candidates = self._max_piece_chars
        n = tf.shape(words)[0]
        word_length = tf.strings.length(words, unit="UTF8_CHAR")
        lengths = tf.range(num_candidates, 0, -1, dtype=tf.int32)  # longest first
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
            position_k = tf.tile(row_position[:, None], [1, num_candidates])
            length_k = tf.tile(lengths[None, :], [tf.shape(rows)[0], 1])
            candidate = tf.strings.substr(
                tf.tile(tf.gather(words, rows)[:, None], [1, num_candidates]),
                position_k,
                length_k,
                unit="UTF8_CHAR",
            )
            candidate = tf.where(
                position_k > 0, tf.strings.join([self.suffix_indicator, candidate]), candidate
            )
            ids = self._token_table.lookup(candidate)
            fits = position_k + length_k <= tf.gather(word_length, rows)[:, None]
            valid = (ids >= 0) & fits
            found = tf.reduce_any(valid, axis=1)
            best = tf.argmax(tf.cast(valid, tf.int32), axis=1, output_type=tf.int32)
            piece = tf.where(found, tf.gather(ids, best, batch_dims=1), -1)
            scatter = rows[:, None]
            position = tf.tensor_scatter_nd_update(
                position, scatter, tf.where(found, row_position + tf.gather(lengths, best), row_position)
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
        text = tf.strings.reduce_join(self._tokens(ids), axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " " + re.escape(self.suffix_indicator), "")

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
            }
        )
        return config


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
