"""Tokenizers built from TensorFlow ops only, as Keras layers.

Every tokenizer here turns strings into int32 ids with `tf.strings`,
`tf.lookup.StaticHashTable`, `tf.gather` and `tf.RaggedTensor` ops, so it runs
inside `tf.data`, inside a `tf.function` with a `tf.TensorSpec([None],
tf.string)` signature, and inside a SavedModel exported with
`tf.saved_model.save`. Each is a `keras.layers.Layer` whose `get_config()`
holds the vocabulary, so it is saved and restored with a `.keras` model; it can
also be saved on its own with `save_vocabulary(path)` and read back with
`from_vocabulary_file(path)` (or `load_tokenizer(path)`).

Four tokenizers share one API (`Tokenizer`):

    CharTokenizer       one id per Unicode character (nanoGPT's char-level GPT)
    ByteTokenizer       one id per UTF-8 byte (256 ids, no vocabulary to learn)
    WordTokenizer       lower-cased words and punctuation, frequency vocabulary
    WordPieceTokenizer  words split into greedy longest-match-first subwords

With `special_tokens=True` (the default) ids 0..6 are `[PAD] [UNK] [CLS] [SEP]
[MASK] [BOS] [EOS]` (see `keras_tfm.data.special_tokens`) and ordinary tokens
start at id 7. With `special_tokens=False` ids start at 0, there is no `[UNK]`
and an out-of-vocabulary input is an error (raised when the ops run).
"""

import collections
import heapq
import json
import math
import os
import re
import tempfile

import keras
import tensorflow as tf

from keras_tfm.checks import as_string_tensor, check_positive_int
from keras_tfm.data.special_tokens import (
    BOS,
    CLS,
    EOS,
    NUM_SPECIAL_TOKENS,
    PAD,
    SEP,
    SPECIAL_TOKENS,
    UNK,
)

VOCABULARY_FILE_FORMAT = "keras_tfm.vocabulary"
# RE2 classes: every Unicode punctuation mark and symbol becomes its own word.
_PUNCTUATION = r"([\p{P}\p{S}])"


# --------------------------------------------------------------------------- #
# Pre-tokenization and corpus statistics (shared by the word-level tokenizers).
# --------------------------------------------------------------------------- #


def split_words(strings, lowercase=True):
    """Splits strings into words: optional lower-casing, punctuation split, whitespace split.

    `"Hello, World!"` becomes `["hello", ",", "world", "!"]`. Lower-casing is
    Unicode-aware (`"É"` becomes `"é"`).

    Args:
        strings: string tensor of any rank.
        lowercase: whether to lower-case first.

    Returns:
        A string `tf.RaggedTensor` with one more dimension than `strings`.
    """
    strings = tf.convert_to_tensor(strings)
    if lowercase:
        strings = tf.strings.lower(strings, encoding="utf-8")
    strings = tf.strings.regex_replace(strings, _PUNCTUATION, r" \1 ")
    return tf.strings.split(strings)


def _string_batches(corpus, name="corpus", batch_size=1024):
    """Yields rank-1 string tensors from a str, a list of str or a dataset of strings."""
    if isinstance(corpus, tf.data.Dataset):
        spec = corpus.element_spec
        if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
            raise TypeError(f"`{name}` must be a tf.data.Dataset of strings; its element_spec is {spec}.")
        if spec.shape.rank == 0:
            corpus = corpus.batch(batch_size)
        elif spec.shape.rank != 1:
            raise ValueError(f"`{name}` elements must be scalar strings or [batch] strings; received {spec}.")
        yield from corpus
        return
    if isinstance(corpus, (str, bytes)):
        yield tf.constant([corpus])
        return
    if not isinstance(corpus, tf.Tensor):
        corpus = list(corpus)
    tensor = as_string_tensor(name, corpus)
    tensor = tf.reshape(tensor, [-1])
    for start in range(0, int(tf.size(tensor)), batch_size):
        yield tensor[start : start + batch_size]


def _count(unique_and_counts, counter):
    values, _, counts = unique_and_counts
    for value, count in zip(values.numpy(), counts.numpy()):
        counter[value.decode("utf-8", errors="replace")] += int(count)


def count_words(corpus, lowercase=True):
    """Counts the words of `corpus` as `split_words` splits them.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings
            (scalar or batched elements).
        lowercase: whether words are lower-cased.

    Returns:
        A `collections.Counter` mapping word (str) to count.
    """
    counter = collections.Counter()
    for batch in _string_batches(corpus):
        _count(tf.unique_with_counts(split_words(batch, lowercase).flat_values), counter)
    return counter


def count_characters(corpus):
    """Counts the Unicode characters of `corpus`.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings.

    Returns:
        A `collections.Counter` mapping character (str) to count.
    """
    counter = collections.Counter()
    for batch in _string_batches(corpus):
        chars = tf.strings.unicode_split(batch, "UTF-8", errors="replace").flat_values
        _count(tf.unique_with_counts(chars), counter)
    return counter


# --------------------------------------------------------------------------- #
# Base class.
# --------------------------------------------------------------------------- #


class Tokenizer(keras.layers.Layer):
    """Common API of keras_tfm tokenizers (not used directly).

    Args:
        special_tokens: reserve ids 0..6 for `[PAD] [UNK] [CLS] [SEP] [MASK]
            [BOS] [EOS]`.
        add_bos: prepend `[BOS]` to every sequence.
        add_eos: append `[EOS]` to every sequence.
        add_cls_sep: wrap every sequence as `[CLS] ... [SEP]` (BERT); not
            combinable with `add_bos` / `add_eos`.
        sequence_length: default for the `sequence_length` call argument.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: a scalar string or a `[batch]` string tensor (or Python
            str / list of str).
        sequence_length: optional int. When given (here or in the
            constructor) the output is a dense int32 tensor padded with 0 and
            truncated to this length (the added special tokens are kept; the
            text is cut); otherwise it is ragged.

    Returns:
        int32 ids: `[batch, None]` RaggedTensor (or `[batch, sequence_length]`
        dense), or a 1-D dense tensor for a scalar input.
    """

    def __init__(
        self,
        special_tokens=True,
        add_bos=False,
        add_eos=False,
        add_cls_sep=False,
        sequence_length=None,
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        # Inputs are strings: do not let Keras convert or cast them.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
        for name, value in (
            ("special_tokens", special_tokens),
            ("add_bos", add_bos),
            ("add_eos", add_eos),
            ("add_cls_sep", add_cls_sep),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a bool; received {value!r}.")
        if (add_bos or add_eos or add_cls_sep) and not special_tokens:
            raise ValueError("`add_bos`, `add_eos` and `add_cls_sep` need `special_tokens=True`.")
        if add_cls_sep and (add_bos or add_eos):
            raise ValueError("`add_cls_sep` cannot be combined with `add_bos` or `add_eos`.")
        self.special_tokens = special_tokens
        self.add_bos = add_bos
        self.add_eos = add_eos
        self.add_cls_sep = add_cls_sep
        self.sequence_length = check_positive_int("sequence_length", sequence_length, allow_none=True)
        self._offset = NUM_SPECIAL_TOKENS if special_tokens else 0
        self._prefix = (CLS,) if add_cls_sep else ((BOS,) if add_bos else ())
        self._suffix = (SEP,) if add_cls_sep else ((EOS,) if add_eos else ())

    # ---- to implement ------------------------------------------------------ #

    def _encode(self, strings):
        """`[batch]` strings -> `[batch, None]` int32 RaggedTensor (no special tokens added)."""
        raise NotImplementedError

    def _decode(self, ids):
        """`[batch, None]` int32 RaggedTensor of valid ids -> `[batch]` strings."""
        raise NotImplementedError

    def get_vocabulary(self):
        """Returns the list of all token strings; the index of each is its id."""
        raise NotImplementedError

    def _tokenizer_config(self):
        return {
            "special_tokens": self.special_tokens,
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "add_cls_sep": self.add_cls_sep,
            "sequence_length": self.sequence_length,
        }

    # ---- public API --------------------------------------------------------- #

    @property
    def vocabulary_size(self):
        """Number of ids, special tokens included."""
        return len(self.get_vocabulary())

    def id_to_token(self, token_id):
        """Returns the token string of id `token_id` (Python int)."""
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"`token_id` must be an int; received {token_id!r}.")
        vocabulary = self.get_vocabulary()
        if not 0 <= token_id < len(vocabulary):
            raise ValueError(f"`token_id` must be in [0, {len(vocabulary)}); received {token_id}.")
        return vocabulary[token_id]

    def token_to_id(self, token):
        """Returns the id of token string `token`; `[UNK]`'s id when unknown.

        Raises:
            KeyError: if the token is unknown and there is no `[UNK]`.
        """
        if not isinstance(token, str):
            raise TypeError(f"`token` must be a str; received {token!r}.")
        index = self._token_index()
        if token in index:
            return index[token]
        if self.special_tokens:
            return UNK
        raise KeyError(
            f"`token` {token!r} is not in the vocabulary (special_tokens=False, so there is no [UNK])."
        )

    def _token_index(self):
        index = self.__dict__.get("_token_index_cache")
        if index is None:
            # Stored around __setattr__ so neither Keras nor TF tracks this plain dict.
            index = {token: i for i, token in enumerate(self.get_vocabulary())}
            self.__dict__["_token_index_cache"] = index
        return index

    def tokenize(self, inputs, sequence_length=None):
        """Strings to ids. See the class docstring for arguments and returns."""
        inputs = as_string_tensor("inputs", inputs)
        rank = inputs.shape.rank
        if rank is None or rank > 1:
            raise ValueError(
                f"`inputs` must be a scalar string or a rank-1 [batch] string tensor; received shape {inputs.shape}."
            )
        sequence_length = check_positive_int("sequence_length", sequence_length, allow_none=True)
        if sequence_length is None:
            sequence_length = self.sequence_length
        batch = tf.reshape(inputs, [1]) if rank == 0 else inputs
        ids = self._encode(batch)
        if not self.special_tokens:
            ids = ids.with_flat_values(_assert_in_vocabulary(ids.flat_values))
        ids = self._add_special_tokens(ids, sequence_length)
        if sequence_length is not None:
            ids = ids.to_tensor(default_value=PAD, shape=[None, sequence_length])
        return ids[0] if rank == 0 else ids

    def _add_special_tokens(self, ids, sequence_length):
        reserved = len(self._prefix) + len(self._suffix)
        if sequence_length is not None:
            if sequence_length < reserved:
                raise ValueError(
                    f"`sequence_length` must be at least {reserved} to hold the added special tokens; "
                    f"received {sequence_length}."
                )
            ids = ids[:, : sequence_length - reserved]
        if not reserved:
            return ids
        rows = ids.nrows(out_type=tf.int32)

        def column(tokens):
            return tf.RaggedTensor.from_tensor(tf.tile(tf.constant([list(tokens)], tf.int32), [rows, 1]))

        parts = [ids]
        if self._prefix:
            parts.insert(0, column(self._prefix))
        if self._suffix:
            parts.append(column(self._suffix))
        return tf.concat(parts, axis=1)

    def detokenize(self, ids):
        """Ids to strings, dropping special tokens except `[UNK]`.

        Args:
            ids: int tensor `[batch, length]` (dense; with special tokens on,
                the 0 padding is dropped like every other special token) or
                `[batch, None]` RaggedTensor, or one sequence of rank 1.
                Without special tokens 0 is an ordinary id, so pass ragged ids
                to avoid decoding padding.

        Returns:
            `[batch]` string tensor (a scalar for a rank-1 input).
        """
        if isinstance(ids, tf.RaggedTensor):
            if not ids.dtype.is_integer:
                raise TypeError(f"`ids` must be an integer tensor; received dtype {ids.dtype.name}.")
        else:
            try:
                ids = tf.convert_to_tensor(ids)
            except (TypeError, ValueError) as error:
                raise TypeError(f"`ids` must be an integer tensor; received {ids!r}.") from error
            if not ids.dtype.is_integer:
                raise TypeError(f"`ids` must be an integer tensor; received dtype {ids.dtype.name}.")
        rank = ids.shape.rank
        if rank not in (1, 2):
            raise ValueError(f"`ids` must have rank 1 or 2; received shape {ids.shape}.")
        if rank == 1:
            ids = ids[None] if not isinstance(ids, tf.RaggedTensor) else ids
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int32)
        ids = ids.with_flat_values(_assert_ids_in_range(ids.flat_values, self.vocabulary_size))
        if self.special_tokens:
            keep = tf.ragged.map_flat_values(lambda v: (v >= NUM_SPECIAL_TOKENS) | (v == UNK), ids)
            ids = tf.ragged.boolean_mask(ids, keep)
        strings = self._decode(ids)
        return strings[0] if rank == 1 else strings

    def call(self, inputs, sequence_length=None):
        return self.tokenize(inputs, sequence_length=sequence_length)

    def compute_output_spec(self, inputs, sequence_length=None):
        sequence_length = sequence_length or self.sequence_length
        batch_shape = tuple(inputs.shape)
        if sequence_length is not None:
            return keras.KerasTensor(batch_shape + (sequence_length,), dtype="int32")
        return keras.KerasTensor(batch_shape + (None,), dtype="int32", ragged=bool(batch_shape))

    def get_config(self):
        config = super().get_config()
        config.update(self._tokenizer_config())
        return config

    # ---- vocabulary files --------------------------------------------------- #

    def save_vocabulary(self, path):
        """Writes the vocabulary and the tokenizer's options to a text file.

        The first line is a JSON header (`{"format": "keras_tfm.vocabulary",
        "class_name": ..., "config": {...}}`); then one token per line, in id
        order (special tokens included), each written as a JSON string so
        that newlines and spaces survive. The file is written to a temporary
        name in the same directory and moved into place with `os.replace`,
        so readers never see a partial file.

        Args:
            path: destination file path.
        """
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        header = {
            "format": VOCABULARY_FILE_FORMAT,
            "class_name": type(self).__name__,
            "config": self._tokenizer_config(),
        }
        fd, temp_path = tempfile.mkstemp(prefix=".vocabulary-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
                file.write(json.dumps(header) + "\n")
                for token in self.get_vocabulary():
                    file.write(json.dumps(token, ensure_ascii=False) + "\n")
            os.replace(temp_path, path)
        except BaseException:
            if os.path.exists(temp_path):
                os.remove(temp_path)
            raise

    @classmethod
    def from_vocabulary_file(cls, path, **kwargs):
        """Builds a tokenizer from a file written by `save_vocabulary`.

        Args:
            path: the vocabulary file.
            **kwargs: constructor arguments that override the saved options.

        Returns:
            A tokenizer of the saved class (which must be `cls` or a subclass).
        """
        class_name, config, tokens = _read_vocabulary_file(path)
        tokenizer_cls = _TOKENIZERS.get(class_name)
        if tokenizer_cls is None or not issubclass(tokenizer_cls, cls):
            raise ValueError(f"`path` {path!r} holds a {class_name} vocabulary, not a {cls.__name__}.")
        config.update(kwargs)
        return tokenizer_cls._from_tokens(tokens, config, path)

    @classmethod
    def _from_tokens(cls, tokens, config, path):
        if config.get("special_tokens", True):
            if tuple(tokens[:NUM_SPECIAL_TOKENS]) != SPECIAL_TOKENS:
                raise ValueError(f"`path` {path!r}: the first tokens must be {list(SPECIAL_TOKENS)}.")
            tokens = tokens[NUM_SPECIAL_TOKENS:]
        return cls(vocabulary=tokens, **config)


def _assert_in_vocabulary(flat_ids):
    ok = tf.reduce_all(flat_ids >= 0)
    check = tf.debugging.Assert(
        ok, ["Input contains a token that is not in the vocabulary, and special_tokens=False gives no [UNK]."]
    )
    with tf.control_dependencies([check] if check is not None else []):
        return tf.identity(flat_ids)


def _assert_ids_in_range(flat_ids, vocabulary_size):
    ok = tf.reduce_all((flat_ids >= 0) & (flat_ids < vocabulary_size))
    check = tf.debugging.Assert(
        ok,
        [
            f"`ids` must be in [0, {vocabulary_size}); min and max received:",
            tf.reduce_min(flat_ids),
            tf.reduce_max(flat_ids),
        ],
    )
    with tf.control_dependencies([check] if check is not None else []):
        return tf.identity(flat_ids)


def _read_vocabulary_file(path):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`path`: no such vocabulary file: {path!r}.")
    with open(path, encoding="utf-8") as file:
        lines = file.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        header = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != VOCABULARY_FILE_FORMAT:
        raise ValueError(f"`path` {path!r} is not a keras_tfm vocabulary file (bad header line).")
    tokens = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            token = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"`path` {path!r}, line {number}: not a JSON string: {line!r}.") from error
        if not isinstance(token, str):
            raise ValueError(f"`path` {path!r}, line {number}: not a JSON string: {line!r}.")
        tokens.append(token)
    return header.get("class_name"), dict(header.get("config", {})), tokens


def load_tokenizer(path, **kwargs):
    """Loads any keras_tfm tokenizer saved with `save_vocabulary`.

    Args:
        path: the vocabulary file.
        **kwargs: constructor arguments that override the saved options.

    Returns:
        The tokenizer, of the class recorded in the file.
    """
    return Tokenizer.from_vocabulary_file(path, **kwargs)


# --------------------------------------------------------------------------- #
# Vocabulary (lookup-table) tokenizers.
# --------------------------------------------------------------------------- #


class _VocabularyTokenizer(Tokenizer):
    """A tokenizer backed by an explicit list of token strings."""

    def __init__(self, vocabulary, special_tokens=True, **kwargs):
        super().__init__(special_tokens=special_tokens, **kwargs)
        if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__iter__"):
            raise TypeError(f"`vocabulary` must be a list of str; received {type(vocabulary).__name__}.")
        vocabulary = [t.decode("utf-8") if isinstance(t, bytes) else t for t in vocabulary]
        if special_tokens and tuple(vocabulary[:NUM_SPECIAL_TOKENS]) == SPECIAL_TOKENS:
            vocabulary = vocabulary[NUM_SPECIAL_TOKENS:]  # a full get_vocabulary() list
        for token in vocabulary:
            if not isinstance(token, str) or not token:
                raise ValueError(f"`vocabulary` must hold non-empty str tokens; found {token!r}.")
        if not vocabulary:
            raise ValueError("`vocabulary` must not be empty.")
        seen = set()
        for token in vocabulary:
            if token in seen:
                raise ValueError(f"`vocabulary` holds {token!r} twice.")
            seen.add(token)
        if special_tokens:
            clash = seen.intersection(SPECIAL_TOKENS)
            if clash:
                raise ValueError(
                    f"`vocabulary` must not contain special tokens {sorted(clash)}; they are added for you."
                )
        self._vocabulary = tuple(vocabulary)
        self._all_tokens = (SPECIAL_TOKENS if special_tokens else ()) + self._vocabulary
        self._oov_id = UNK if special_tokens else -1
        self._token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self._vocabulary, tf.string),
                tf.range(self._offset, self._offset + len(self._vocabulary), dtype=tf.int32),
            ),
            default_value=self._oov_id,
        )
        self._id_strings = tf.constant(self._all_tokens, tf.string)

    def get_vocabulary(self):
        return list(self._all_tokens)

    @property
    def vocabulary_size(self):
        return len(self._all_tokens)

    def _lookup(self, tokens):
        return tf.ragged.map_flat_values(self._token_table.lookup, tokens)

    def _tokens(self, ids):
        return tf.gather(self._id_strings, ids)

    def get_config(self):
        config = super().get_config()
        config["vocabulary"] = list(self._vocabulary)
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class CharTokenizer(_VocabularyTokenizer):
    """One id per Unicode character (split with `tf.strings.unicode_split`).

    `CharTokenizer.from_corpus(text, special_tokens=False)` on Tiny
    Shakespeare gives nanoGPT's vocabulary exactly: the 65 sorted unique
    characters with ids 0..64. With special tokens (the default) the same
    characters get ids 7..71 and unknown characters map to `[UNK]`.

    Args:
        vocabulary: list of single-character strings, in id order.
        special_tokens, add_bos, add_eos, add_cls_sep, sequence_length,
            **kwargs: see `Tokenizer`.
    """

    def __init__(self, vocabulary, special_tokens=True, **kwargs):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        for token in self._vocabulary:
            if len(token) != 1:
                raise ValueError(
                    f"`vocabulary` of a CharTokenizer must hold single characters; found {token!r}."
                )

    @classmethod
    def from_corpus(cls, corpus, special_tokens=True, **kwargs):
        """Builds the vocabulary: the sorted unique characters of `corpus`.

        Args:
            corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
            special_tokens: see `Tokenizer`.
            **kwargs: other constructor arguments.

        Returns:
            A `CharTokenizer`.
        """
        if isinstance(corpus, str):
            characters = set(corpus)
        else:
            characters = set(count_characters(corpus))
        if not characters:
            raise ValueError("`corpus` holds no characters.")
        return cls(sorted(characters), special_tokens=special_tokens, **kwargs)

    def _encode(self, strings):
        return self._lookup(tf.strings.unicode_split(strings, "UTF-8", errors="replace"))

    def _decode(self, ids):
        return tf.strings.reduce_join(self._tokens(ids), axis=-1)


@keras.saving.register_keras_serializable(package="keras_tfm")
class WordTokenizer(_VocabularyTokenizer):
    """Lower-cased words and punctuation marks, looked up in a vocabulary.

    Text is split by `split_words`: lower-cased (optional), every punctuation
    mark or symbol made its own token, then split on whitespace. Unknown words
    map to `[UNK]`. `detokenize` joins tokens with single spaces, so a round
    trip gives the normalised text (`"Hi, you!"` -> `"hi , you !"`).

    Args:
        vocabulary: list of word strings, in id order.
        lowercase: lower-case the input before splitting.
        special_tokens, add_bos, add_eos, add_cls_sep, sequence_length,
            **kwargs: see `Tokenizer`.
    """

    def __init__(self, vocabulary, lowercase=True, special_tokens=True, **kwargs):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        if not isinstance(lowercase, bool):
            raise TypeError(f"`lowercase` must be a bool; received {lowercase!r}.")
        self.lowercase = lowercase

    @classmethod
    def from_corpus(
        cls, corpus, max_vocabulary_size=None, min_frequency=1, lowercase=True, special_tokens=True, **kwargs
    ):
        """Builds the vocabulary from the most frequent words of `corpus`.

        Ties in frequency are broken alphabetically, so the result is
        deterministic.

        Args:
            corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
            max_vocabulary_size: largest `vocabulary_size` (special tokens
                included); None keeps every word.
            min_frequency: drop words seen fewer times.
            lowercase: see the class.
            special_tokens: see `Tokenizer`.
            **kwargs: other constructor arguments.

        Returns:
            A `WordTokenizer`.
        """
        check_positive_int("max_vocabulary_size", max_vocabulary_size, allow_none=True)
        check_positive_int("min_frequency", min_frequency)
        counts = count_words(corpus, lowercase=lowercase)
        words = sorted((w for w, c in counts.items() if c >= min_frequency), key=lambda w: (-counts[w], w))
        if special_tokens:
            words = [w for w in words if w not in SPECIAL_TOKENS]
        if max_vocabulary_size is not None:
            budget = max_vocabulary_size - (NUM_SPECIAL_TOKENS if special_tokens else 0)
            if budget <= 0:
                raise ValueError(
                    f"`max_vocabulary_size` must exceed the {NUM_SPECIAL_TOKENS} special tokens; "
                    f"received {max_vocabulary_size}."
                )
            words = words[:budget]
        if not words:
            raise ValueError("`corpus` holds no words (after `min_frequency`).")
        return cls(words, lowercase=lowercase, special_tokens=special_tokens, **kwargs)

    def _encode(self, strings):
        return self._lookup(split_words(strings, self.lowercase))

    def _decode(self, ids):
        return tf.strings.reduce_join(self._tokens(ids), axis=-1, separator=" ")

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["lowercase"] = self.lowercase
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class WordPieceTokenizer(_VocabularyTokenizer):
    """Greedy longest-match-first WordPiece (BERT's algorithm), in TF ops.

    Text is split into words by `split_words`; each word is then cut into the
    longest vocabulary piece starting at its first character, then the longest
    `##`-prefixed piece starting where that ended, and so on. A word that
    cannot be covered (or longer than `max_input_chars_per_word` characters)
    becomes a single `[UNK]`, as in BERT. The matching runs as a
    `tf.while_loop` over piece positions, vectorised over the distinct words
    of a batch that are not finished yet and over all candidate piece lengths
    (`tf.strings.substr` with `unit="UTF8_CHAR"`), so it is exported with the
    model. It matches a plain-Python reference implementation exactly (see
    tests/test_data.py) and splits the ~950k words of the Anki English side
    in a few seconds on 2 CPU cores.

    `detokenize` joins pieces, glueing `##` pieces to the previous one.

    Args:
        vocabulary: list of pieces in id order; continuation pieces start with
            `suffix_indicator`.
        lowercase: lower-case the input before splitting.
        suffix_indicator: prefix of continuation pieces.
        max_input_chars_per_word: longer words become `[UNK]`.
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
        **kwargs,
    ):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        if not isinstance(lowercase, bool):
            raise TypeError(f"`lowercase` must be a bool; received {lowercase!r}.")
        if not isinstance(suffix_indicator, str) or not suffix_indicator:
            raise ValueError(f"`suffix_indicator` must be a non-empty str; received {suffix_indicator!r}.")
        self.lowercase = lowercase
        self.suffix_indicator = suffix_indicator
        self.max_input_chars_per_word = check_positive_int(
            "max_input_chars_per_word", max_input_chars_per_word
        )
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

    def _encode(self, strings):
        words = split_words(strings, self.lowercase)
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
        max_steps = tf.reduce_max(tf.concat([word_length, [0]], axis=0))

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
            valid = (ids >= self._offset) & fits
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
            }
        )
        return config


# --------------------------------------------------------------------------- #
# Bytes.
# --------------------------------------------------------------------------- #


@keras.saving.register_keras_serializable(package="keras_tfm")
class ByteTokenizer(Tokenizer):
    """One id per UTF-8 byte: 256 ids (shifted by 7 with special tokens).

    Nothing is out of vocabulary. Tokens are named `<0x00>` .. `<0xFF>` in
    `get_vocabulary()`. `detokenize` joins the bytes and, by default, repairs
    invalid UTF-8 (which a model can generate) with U+FFFD.

    Args:
        errors: how `detokenize` treats invalid UTF-8: `"replace"` (U+FFFD),
            `"ignore"` (drop), `"strict"` (raise) or `"raw"` (return the
            bytes unchanged).
        special_tokens, add_bos, add_eos, add_cls_sep, sequence_length,
            **kwargs: see `Tokenizer`.
    """

    _ERRORS = ("replace", "ignore", "strict", "raw")

    def __init__(self, errors="replace", special_tokens=True, **kwargs):
        super().__init__(special_tokens=special_tokens, **kwargs)
        if errors not in self._ERRORS:
            raise ValueError(f"`errors` must be one of {list(self._ERRORS)}; received {errors!r}.")
        self.errors = errors
        specials = [t.encode() for t in SPECIAL_TOKENS] if special_tokens else []
        self._id_strings = tf.constant(specials + [bytes([b]) for b in range(256)], tf.string)

    def get_vocabulary(self):
        specials = list(SPECIAL_TOKENS) if self.special_tokens else []
        return specials + [f"<0x{b:02X}>" for b in range(256)]

    @property
    def vocabulary_size(self):
        return 256 + self._offset

    def token_to_id(self, token):
        """Id of a `<0xNN>` token name, or of a one-byte `bytes` object."""
        if isinstance(token, bytes) and len(token) == 1:
            return token[0] + self._offset
        return super().token_to_id(token)

    def _encode(self, strings):
        pieces = tf.strings.bytes_split(strings)
        return tf.ragged.map_flat_values(
            lambda values: (
                tf.reshape(tf.cast(tf.io.decode_raw(values, tf.uint8), tf.int32), [-1]) + self._offset
            ),
            pieces,
        )

    def _decode(self, ids):
        text = tf.strings.reduce_join(tf.gather(self._id_strings, ids), axis=-1)
        if self.errors == "raw":
            return text
        return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors=self.errors)

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["errors"] = self.errors
        return config

    @classmethod
    def _from_tokens(cls, tokens, config, path):
        tokenizer = cls(**config)
        if tokens != tokenizer.get_vocabulary():
            raise ValueError(f"`path` {path!r} does not hold the byte vocabulary.")
        return tokenizer


_TOKENIZERS = {cls.__name__: cls for cls in (CharTokenizer, ByteTokenizer, WordTokenizer, WordPieceTokenizer)}


# --------------------------------------------------------------------------- #
# WordPiece vocabulary learning (plain Python, at build time only).
# --------------------------------------------------------------------------- #


def learn_wordpiece_vocabulary(
    corpus,
    vocabulary_size,
    lowercase=True,
    special_tokens=True,
    suffix_indicator="##",
    min_frequency=1,
    max_unique_words=None,
):
    """Learns a WordPiece vocabulary by greedy likelihood merges.

    Words are counted with `split_words` (TF ops, batched). Every word starts
    as its characters (`"low"` -> `l ##o ##w`); all these characters form the
    initial alphabet. Then, until the vocabulary is full, the adjacent pair
    `(a, b)` whose merge most increases the corpus likelihood under a unigram
    piece model (WordPiece's criterion, Schuster & Nakajima 2012) is merged
    into a new piece:

        gain(a, b) = count(ab) * log(count(ab) * N / (count(a) * count(b)))

    with `N` the initial number of symbols. (The bare ratio
    `count(ab) / (count(a) * count(b))` that is sometimes quoted favours rare
    pairs and spends a small vocabulary on rare words; weighting by
    `count(ab)` keeps frequent words whole.) Ties go to the more frequent
    pair, then the alphabetically first. Pair and symbol counts are updated
    incrementally and the best pair is kept in a lazily invalidated heap.
    Only this learning runs in Python; tokenization with the result is pure
    TF.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
        vocabulary_size: target size, special tokens included (the result can
            be smaller when the corpus runs out of pairs).
        lowercase: lower-case words (must match the tokenizer's).
        special_tokens: whether the tokenizer will reserve ids 0..6 (they are
            counted in `vocabulary_size` but not returned).
        suffix_indicator: prefix of continuation pieces.
        min_frequency: ignore words seen fewer times.
        max_unique_words: keep only this many most frequent words.

    Returns:
        The list of pieces (without the special tokens), ready for
        `WordPieceTokenizer(vocabulary=...)`.
    """
    check_positive_int("vocabulary_size", vocabulary_size)
    check_positive_int("min_frequency", min_frequency)
    check_positive_int("max_unique_words", max_unique_words, allow_none=True)
    budget = vocabulary_size - (NUM_SPECIAL_TOKENS if special_tokens else 0)
    if budget <= 0:
        raise ValueError(
            f"`vocabulary_size` must exceed the {NUM_SPECIAL_TOKENS} special tokens; received {vocabulary_size}."
        )
    counts = count_words(corpus, lowercase=lowercase)
    items = sorted(((w, c) for w, c in counts.items() if c >= min_frequency), key=lambda wc: (-wc[1], wc[0]))
    if max_unique_words is not None:
        items = items[:max_unique_words]
    if not items:
        raise ValueError("`corpus` holds no words (after `min_frequency`).")

    ind = suffix_indicator
    words = [[w[0]] + [ind + ch for ch in w[1:]] for w, _ in items]
    word_counts = [c for _, c in items]

    symbol_counts = collections.Counter()
    for symbols, count in zip(words, word_counts):
        for symbol in symbols:
            symbol_counts[symbol] += count
    alphabet = sorted(symbol_counts, key=lambda s: (-symbol_counts[s], s))
    vocabulary = alphabet[:budget]
    if len(alphabet) > budget:
        return vocabulary
    in_vocabulary = set(vocabulary)

    pair_counts = collections.Counter()
    pair_words = collections.defaultdict(set)
    symbol_pairs = collections.defaultdict(set)

    def add_word(index, sign):
        symbols, count = words[index], word_counts[index]
        for symbol in symbols:
            symbol_counts[symbol] += sign * count
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += sign * count
            if sign > 0:
                pair_words[pair].add(index)
                symbol_pairs[pair[0]].add(pair)
                symbol_pairs[pair[1]].add(pair)

    for index in range(len(words)):
        add_word(index, +1)

    log_total = math.log(sum(symbol_counts.values()))
    heap = []
    stamps = collections.Counter()

    def push(pair):
        count = pair_counts.get(pair, 0)
        stamps[pair] += 1
        if count > 0:
            score = count * (
                math.log(count) + log_total - math.log(symbol_counts[pair[0]] * symbol_counts[pair[1]])
            )
            heapq.heappush(heap, (-score, -count, pair, stamps[pair]))

    for pair in list(pair_counts):
        push(pair)

    while len(vocabulary) < budget and heap:
        _, _, pair, stamp = heapq.heappop(heap)
        if stamp != stamps[pair] or pair_counts.get(pair, 0) <= 0:
            continue
        first, second = pair
        merged = first + second[len(ind) :]
        touched_symbols = {first, second, merged}
        touched_pairs = set()
        for index in list(pair_words.pop(pair, ())):
            symbols = words[index]
            if not any(a == first and b == second for a, b in zip(symbols, symbols[1:])):
                continue
            touched_pairs.update(zip(symbols, symbols[1:]))
            add_word(index, -1)
            new_symbols, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                    new_symbols.append(merged)
                    i += 2
                else:
                    new_symbols.append(symbols[i])
                    i += 1
            words[index] = new_symbols
            add_word(index, +1)
            touched_pairs.update(zip(new_symbols, new_symbols[1:]))
        if merged not in in_vocabulary:
            vocabulary.append(merged)
            in_vocabulary.add(merged)
        for symbol in touched_symbols:
            touched_pairs.update(symbol_pairs.get(symbol, ()))
        for touched in touched_pairs:
            if pair_counts.get(touched, 0) <= 0:
                pair_counts.pop(touched, None)
                pair_words.pop(touched, None)
                symbol_pairs[touched[0]].discard(touched)
                symbol_pairs[touched[1]].discard(touched)
                stamps[touched] += 1
            else:
                push(touched)
    return vocabulary
