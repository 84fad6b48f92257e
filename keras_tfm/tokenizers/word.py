"""`WordTokenizer`: lower-cased words and punctuation marks, frequency vocabulary."""

from collections.abc import Sequence
from typing import Self

import keras
import tensorflow as tf

from keras_tfm.checks import check_bool, check_positive_int
from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.corpus import Corpus, count_words, split_words
from keras_tfm.tokenizers.special_tokens import NUM_SPECIAL_TOKENS, SPECIAL_TOKENS
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer


@keras.saving.register_keras_serializable(package="keras_tfm")
class WordTokenizer(VocabularyTokenizer):
    """Lower-cased words and punctuation marks, looked up in a vocabulary.

    Text is split by `split_words`: lower-cased (optional), every punctuation
    mark or symbol made its own token, then split on whitespace. Unknown words
    map to `[UNK]`. `detokenize` joins tokens with single spaces, so a round
    trip gives the normalised text (`"Hi, you!"` -> `"hi , you !"`).

    Args:
        vocabulary: list of word strings, in id order.
        lowercase: lower-case the input before splitting.
        special_tokens, add_bos, add_eos, add_cls_sep, max_length,
            **kwargs: see `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        lowercase: bool = True,
        special_tokens: SpecialTokensArg = True,
        **kwargs,
    ):
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        self.lowercase = check_bool("lowercase", lowercase)

    @classmethod
    def from_corpus(
        cls,
        corpus: Corpus,
        max_vocabulary_size: int | None = None,
        min_frequency: int = 1,
        lowercase: bool = True,
        special_tokens: SpecialTokensArg = True,
        **kwargs,
    ) -> Self:
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
