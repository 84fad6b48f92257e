"""`VocabularyTokenizer`: a tokenizer backed by an explicit list of token strings.

Lookups go through one `tf.lookup.StaticHashTable` (token -> id, -1 when
unknown, then `[UNK]`'s id when there is one), ids back to tokens through
`tf.gather` on a string constant.
"""

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from keras_tfm.tokenizers.base import SpecialTokensArg, Tokenizer
from keras_tfm.tokenizers.special_tokens import NUM_SPECIAL_TOKENS, SPECIAL_TOKEN_ROLES, SPECIAL_TOKENS


class VocabularyTokenizer(Tokenizer):
    """A tokenizer backed by an explicit list of token strings (not used directly).

    Args:
        vocabulary: the tokens in id order. With `special_tokens=True` the
            seven fixed special tokens are put in front for you (a list that
            already starts with them is accepted too); with a `special_tokens`
            dict the list is the complete vocabulary and must contain the
            named tokens.
        special_tokens, **kwargs: see `Tokenizer`.
    """

    def __init__(self, vocabulary: Sequence[str], special_tokens: SpecialTokensArg = True, **kwargs):
        super().__init__(special_tokens=special_tokens, **kwargs)
        if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__iter__"):
            raise TypeError(f"`vocabulary` must be a list of str; received {type(vocabulary).__name__}.")
        vocabulary = [t.decode("utf-8") if isinstance(t, bytes) else t for t in vocabulary]
        fixed = self.special_tokens is True
        if fixed and tuple(vocabulary[:NUM_SPECIAL_TOKENS]) == SPECIAL_TOKENS:
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
        if fixed:
            clash = seen.intersection(SPECIAL_TOKENS)
            if clash:
                raise ValueError(
                    f"`vocabulary` must not contain special tokens {sorted(clash)}; they are added for you."
                )
        self._vocabulary = tuple(vocabulary)
        self._all_tokens = (SPECIAL_TOKENS if fixed else ()) + self._vocabulary
        offset = NUM_SPECIAL_TOKENS if fixed else 0
        if isinstance(self.special_tokens, dict):
            index = {token: i for i, token in enumerate(self._vocabulary)}
            missing = {role: t for role, t in self.special_tokens.items() if t not in index}
            if missing:
                raise ValueError(f"`special_tokens` {missing} are not in the vocabulary.")
            roles = sorted(self.special_tokens, key=SPECIAL_TOKEN_ROLES.index)
            self._set_special_ids({role: index[self.special_tokens[role]] for role in roles})
        self._offset = offset
        self._token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self._vocabulary, tf.string),
                tf.range(offset, offset + len(self._vocabulary), dtype=tf.int32),
            ),
            default_value=-1,
        )
        self._oov_id = -1 if self.unk_id is None else self.unk_id
        self._id_strings = tf.constant(self._all_tokens, tf.string)

    def get_vocabulary(self) -> list[str]:
        return list(self._all_tokens)

    @property
    def vocabulary_size(self) -> int:
        return len(self._all_tokens)

    def _lookup_flat(self, tokens):
        ids = self._token_table.lookup(tokens)
        return ids if self._oov_id == -1 else tf.where(ids < 0, self._oov_id, ids)

    def _lookup(self, tokens):
        return tf.ragged.map_flat_values(self._lookup_flat, tokens)

    def _tokens(self, ids):
        return tf.gather(self._id_strings, ids)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["vocabulary"] = list(self._vocabulary)
        return config
