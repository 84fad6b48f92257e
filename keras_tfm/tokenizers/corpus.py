"""Word splitting and corpus statistics shared by the word-level tokenizers and trainers."""

import collections
from collections.abc import Iterator, Sequence

import tensorflow as tf

from keras_tfm.resources import as_string_tensor

#: Text to learn a vocabulary from: a str, a list of str, or a `tf.data.Dataset` of strings.
Corpus = str | Sequence[str] | tf.data.Dataset

# RE2 classes: every Unicode punctuation mark and symbol becomes its own word.
_PUNCTUATION = r"([\p{P}\p{S}])"


def split_words(strings: tf.types.experimental.TensorLike, lowercase: bool = True) -> tf.RaggedTensor:
    """Splits strings into words: NUL dropped, optional lower-casing, punctuation split,
    whitespace split.

    `"Hello, World!"` becomes `["hello", ",", "world", "!"]`. Lower-casing is
    Unicode-aware (`"É"` becomes `"é"`).

    Args:
        strings: string tensor of any rank.
        lowercase: whether to lower-case first.

    Returns:
        A string `tf.RaggedTensor` with one more dimension than `strings`.
    """
    # NUL is dropped (as BERT's text cleaning does): TF's UTF-8 `lower` ends a string at it.
    strings = tf.strings.regex_replace(tf.convert_to_tensor(strings), r"\x00", "")
    if lowercase:
        strings = tf.strings.lower(strings, encoding="utf-8")
    strings = tf.strings.regex_replace(strings, _PUNCTUATION, r" \1 ")
    return tf.strings.split(strings)


def string_batches(corpus: Corpus, name: str = "corpus", batch_size: int = 1024) -> Iterator[tf.Tensor]:
    """Yields rank-1 string tensors from a str, a list of str or a dataset of strings.

    Raises:
        ValueError: if `corpus` is an empty list (nothing to learn from).
    """
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
        if not corpus:
            # tf.convert_to_tensor([]) is float32: say what is wrong instead.
            raise ValueError(
                f"`{name}` is empty; expected a str, a non-empty list of str or a dataset of strings."
            )
    tensor = as_string_tensor(name, corpus)
    tensor = tf.reshape(tensor, [-1])
    for start in range(0, int(tf.size(tensor)), batch_size):
        yield tensor[start : start + batch_size]


def _count(unique_and_counts, counter):
    values, _, counts = unique_and_counts
    for value, count in zip(values.numpy(), counts.numpy()):
        counter[value.decode("utf-8", errors="replace")] += int(count)


def count_words(corpus: Corpus, lowercase: bool = True) -> collections.Counter:
    """Counts the words of `corpus` as `split_words` splits them.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings
            (scalar or batched elements).
        lowercase: whether words are lower-cased.

    Returns:
        A `collections.Counter` mapping word (str) to count.
    """
    counter = collections.Counter()
    for batch in string_batches(corpus):
        _count(tf.unique_with_counts(split_words(batch, lowercase).flat_values), counter)
    return counter


def count_characters(corpus: Corpus) -> collections.Counter:
    """Counts the Unicode characters of `corpus`.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings.

    Returns:
        A `collections.Counter` mapping character (str) to count.
    """
    counter = collections.Counter()
    for batch in string_batches(corpus):
        chars = tf.strings.unicode_split(batch, "UTF-8", errors="replace").flat_values
        _count(tf.unique_with_counts(chars), counter)
    return counter
