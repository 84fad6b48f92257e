"""`CharTokenizer`: one id per Unicode character (nanoGPT's char-level vocabulary)."""

from collections.abc import Sequence
from typing import Self

import keras
import tensorflow as tf

from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.corpus import Corpus, count_characters
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer


@keras.saving.register_keras_serializable(package="keras_tfm")
class CharTokenizer(VocabularyTokenizer):
    """One id per Unicode character (split with `tf.strings.unicode_split`).

    `CharTokenizer.from_corpus(text, special_tokens=False)` on Tiny
    Shakespeare gives nanoGPT's vocabulary exactly: the 65 sorted unique
    characters with ids 0..64. With special tokens (the default) the same
    characters get ids 7..71 and unknown characters map to `[UNK]`.

    Args:
        vocabulary: list of single-character strings, in id order.
        special_tokens, add_bos, add_eos, add_cls_sep, max_length,
            **kwargs: see `Tokenizer`.
    """

    def __init__(self, vocabulary: Sequence[str], special_tokens: SpecialTokensArg = True, **kwargs):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        named = set(self.special_tokens.values()) if isinstance(self.special_tokens, dict) else set()
        for token in self._vocabulary:
            if len(token) != 1 and token not in named:
                raise ValueError(
                    f"`vocabulary` of a CharTokenizer must hold single characters; found {token!r}."
                )

    @classmethod
    def from_corpus(cls, corpus: Corpus, special_tokens: SpecialTokensArg = True, **kwargs) -> Self:
        """Builds the vocabulary: the sorted unique characters of `corpus`.

        Args:
            corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
            special_tokens: see `Tokenizer`.
            **kwargs: other constructor arguments.

        Returns:
            A `CharTokenizer`.

        Raises:
            ValueError: if `corpus` is empty or holds no characters.
        """
        if isinstance(corpus, str):
            characters = set(corpus)
        else:
            characters = set(count_characters(corpus))
        if not characters:
            raise ValueError("`corpus` holds no characters; expected some text to take the vocabulary from.")
        return cls(sorted(characters), special_tokens=special_tokens, **kwargs)

    def _encode(self, strings):
        return self._lookup(tf.strings.unicode_split(strings, "UTF-8", errors="replace"))

    def _decode(self, ids):
        return tf.strings.reduce_join(self._tokens(ids), axis=-1)
