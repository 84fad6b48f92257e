"""Added tokens (HuggingFace's `added_tokens`): matched whole in the text before the model sees it.

`AddedTokensTokenizer` is the base of the tokenizers read from a `tokenizer.json`
(`SentencePieceBPETokenizer`, `Qwen2BPETokenizer`). As HuggingFace `tokenizers`
does, the text is first cut at every occurrence of an added token with
`normalized: false` (leftmost, longest first); the text between them is
normalised and cut again at every occurrence of the normalised form of an added
token with `normalized: true`; each token becomes its id and the rest goes
through pre-tokenization and the model. In TF ops each cut is one
`tf.strings.regex_replace` that wraps every occurrence in 0xFF bytes (which
never occur in UTF-8) and one `tf.strings.split` there, so a row becomes text,
token, text, ... with the tokens at the odd positions. Input that is not valid
UTF-8 is read with U+FFFD in place of each invalid sequence (HuggingFace takes
only valid text).

Added tokens marked `special` are special tokens: `detokenize` drops them
(HuggingFace's `decode(..., skip_special_tokens=True)`) and `is_special`
reports them.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer

_MARK = b"\xff"


def check_added_tokens(added_tokens: Sequence[Mapping[str, Any]], vocabulary: Sequence[str]) -> list[dict]:
    """`[{"content": str, "special": bool, "normalized": bool}]` of tokens of `vocabulary`."""
    if isinstance(added_tokens, (str, bytes, Mapping)) or not hasattr(added_tokens, "__iter__"):
        raise TypeError(
            f"`added_tokens` must be a list of {{'content', 'special'}} dicts; received {added_tokens!r}."
        )
    index, checked = set(vocabulary), []
    for i, token in enumerate(added_tokens):
        if (
            not isinstance(token, Mapping)
            or not isinstance(token.get("content"), str)
            or not token["content"]
        ):
            raise ValueError(
                f"`added_tokens[{i}]` must be a dict with a non-empty str 'content'; received {token!r}."
            )
        if token["content"] not in index:
            raise ValueError(f"`added_tokens[{i}]` {token['content']!r} is not in the vocabulary.")
        flags = {key: token.get(key, False) for key in ("special", "normalized")}
        for key, value in flags.items():
            if not isinstance(value, bool):
                raise TypeError(f"`added_tokens[{i}]['{key}']` must be a bool; received {value!r}.")
        checked.append({"content": token["content"], **flags})
    return checked


def added_tokens_pattern(contents: Sequence[str]) -> str:
    """An RE2 pattern matching any of `contents`, longest first (so leftmost-longest, as HuggingFace)."""
    ordered = sorted(set(contents), key=lambda c: (-len(c.encode("utf-8")), c))
    return "|".join("".join(f"\\x{{{ord(ch):x}}}" for ch in content) for content in ordered)


def valid_utf8(strings: tf.Tensor) -> tf.Tensor:
    """`strings` with every invalid UTF-8 sequence replaced by U+FFFD."""
    return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


class AddedTokensTokenizer(VocabularyTokenizer):
    """A vocabulary tokenizer whose added tokens are cut out of the text first (not used directly).

    Args:
        vocabulary: every token in id order (the model's and the added ones).
        added_tokens: `[{"content": str, "special": bool, "normalized": bool}]`,
            tokens of `vocabulary` matched whole in the raw text (`normalized`:
            their normalised form in the normalised text).
        special_tokens: `{role: token}` naming tokens of the vocabulary (the
            roles `bos` / `eos` are what `add_bos` / `add_eos` add), or False.
        **kwargs: see `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        added_tokens: Sequence[Mapping[str, Any]] = (),
        special_tokens: SpecialTokensArg = False,
        **kwargs,
    ):
        if special_tokens is True:
            raise ValueError("`special_tokens` must be a {role: token} dict or False for this tokenizer.")
        super().__init__(vocabulary, special_tokens=special_tokens, **kwargs)
        self._added_tokens = check_added_tokens(added_tokens, self._vocabulary)
        index = self._token_index()
        self._added_special_ids = tuple(
            sorted(index[t["content"]] for t in self._added_tokens if t["special"])
        )

    def _set_added_token_matching(self):
        """Builds the patterns and the id table of the added tokens; subclasses call it at the end of
        `__init__`, once `_normalize_text` works."""
        index = self._token_index()
        raw = {t["content"]: index[t["content"]] for t in self._added_tokens if not t["normalized"]}
        normalized = {}
        for token in self._added_tokens:
            if token["normalized"]:
                form = self._normalize_text(token["content"])
                if normalized.setdefault(form, index[token["content"]]) != index[token["content"]]:
                    raise ValueError(f"`added_tokens`: two tokens normalise to {form!r}.")
        self._raw_pattern = added_tokens_pattern(list(raw)) if raw else None
        self._normalized_pattern = added_tokens_pattern(list(normalized)) if normalized else None
        matched = {**raw, **normalized}
        self._matched_ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(matched) or [""], tf.string),
                tf.constant(list(matched.values()) or [-1], tf.int32),
            ),
            default_value=-1,
        )

    @property
    def added_tokens(self) -> list[dict]:
        """The added tokens, `[{"content": str, "special": bool, "normalized": bool}, ...]`."""
        return [dict(t) for t in self._added_tokens]

    @property
    def special_token_ids(self) -> tuple[int, ...]:
        """Sorted ids of the special-role tokens and of the added tokens marked special."""
        return tuple(sorted(set(super().special_token_ids) | set(self._added_special_ids)))

    def _normalize_text(self, text: str) -> str:
        """The normaliser on one Python string (for the `normalized: true` added tokens)."""
        return text

    def _normalize(self, segments: tf.Tensor) -> tf.Tensor:
        """The normaliser on `[n]` string segments."""
        return segments

    def _encode_normalized(self, segments: tf.Tensor, first: tf.Tensor) -> tf.RaggedTensor:
        """`[n]` normalised segments -> `[n, None]` int32 ids (pre-tokenization and the model).
        `first` is True for the segments at the start of their text (HuggingFace: offset 0)."""
        raise NotImplementedError

    def _encode(self, strings):
        def normalized_part(segments, first):
            return self._split_added(
                self._normalize(segments), first, self._normalized_pattern, self._encode_normalized
            )

        strings = valid_utf8(strings)
        return self._split_added(strings, tf.ones_like(strings, tf.bool), self._raw_pattern, normalized_part)

    def _split_added(self, strings, first, pattern, encode_text):
        """Ids of `[n]` strings cut at the matches of `pattern` (added tokens); the text between
        goes to `encode_text(segments, first)`."""
        if pattern is None:
            return encode_text(strings, first)
        marked = tf.strings.regex_replace(strings, pattern, _MARK + b"\\0" + _MARK)
        parts = tf.strings.split(marked, sep=_MARK)
        position = tf.range(tf.size(parts.flat_values, out_type=tf.int64)) - tf.gather(
            parts.row_splits, parts.value_rowids()
        )
        is_token = position % 2 == 1
        text_first = (position == 0) & tf.gather(first, parts.value_rowids())
        text = encode_text(
            tf.boolean_mask(parts.flat_values, ~is_token), tf.boolean_mask(text_first, ~is_token)
        )
        token_ids = self._matched_ids.lookup(tf.boolean_mask(parts.flat_values, is_token))
        # Interleave: part k takes its text ids, or its one token id.
        text_index = tf.cumsum(tf.cast(~is_token, tf.int32), exclusive=True)
        token_index = tf.cumsum(tf.cast(is_token, tf.int32), exclusive=True)
        text_starts = tf.cast(text.row_starts(), tf.int32)
        num_text_values = tf.size(text.flat_values)
        text_index = tf.minimum(text_index, tf.size(text_starts) - 1)
        lengths = tf.where(is_token, 1, tf.gather(tf.cast(text.row_lengths(), tf.int32), text_index))
        starts = tf.where(is_token, num_text_values + token_index, tf.gather(text_starts, text_index))
        values = tf.gather(
            tf.concat([text.flat_values, token_ids], axis=0),
            tf.ragged.range(starts, starts + lengths).flat_values,
        )
        per_part = tf.RaggedTensor.from_row_lengths(values, tf.cast(lengths, tf.int64), validate=False)
        return tf.RaggedTensor.from_row_splits(per_part, parts.row_splits, validate=False).merge_dims(1, 2)

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["added_tokens"] = self.added_tokens
        return config

    @classmethod
    def _from_tokens(cls, tokens, config, path):
        if "merges" not in config:
            raise ValueError(
                f"`path` {path!r}: a {cls.__name__} vocabulary file needs `merges` in its header."
            )
        return cls(vocabulary=tokens, **config)
