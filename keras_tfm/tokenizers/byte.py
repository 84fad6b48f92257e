"""`ByteTokenizer`: one id per UTF-8 byte (256 ids, nothing to learn, nothing unknown)."""

import keras
import tensorflow as tf

from keras_tfm.checks import check_choice
from keras_tfm.tokenizers.base import Tokenizer
from keras_tfm.tokenizers.special_tokens import SPECIAL_TOKENS


@keras.saving.register_keras_serializable(package="keras_tfm")
class ByteTokenizer(Tokenizer):
    """One id per byte: 256 ids (shifted by 7 with special tokens).

    Nothing is out of vocabulary. Tokens are named `<0x00>` .. `<0xFF>` in
    `get_vocabulary()`. `tokenize` is lossless for any bytes, valid UTF-8 or
    not. `detokenize` joins the bytes; what it does with bytes that are not
    valid UTF-8 (which a model can generate, e.g. a character cut in the
    middle) is `errors`: by default (`"replace"`) each invalid sequence
    becomes U+FFFD, so `detokenize(tokenize(b"\\xff\\xfeab"))` is
    `"\\ufffd\\ufffdab"` while every valid UTF-8 string round-trips exactly;
    `errors="raw"` returns the bytes unchanged, so every input round-trips.

    Args:
        errors: how `detokenize` treats invalid UTF-8: `"replace"` (U+FFFD),
            `"ignore"` (drop), `"strict"` (raise) or `"raw"` (return the
            bytes unchanged: lossless).
        special_tokens: True (ids 0..6 are the special tokens, bytes start
            at 7) or False; a published special-token dict is not supported.
        add_bos, add_eos, add_cls_sep, max_length, **kwargs: see
            `Tokenizer`.
    """

    _ERRORS = ("replace", "ignore", "strict", "raw")

    def __init__(self, errors: str = "replace", special_tokens: bool = True, **kwargs):
        if not isinstance(special_tokens, bool):
            raise TypeError(
                f"`special_tokens` of a ByteTokenizer must be a bool; received {special_tokens!r}."
            )
        super().__init__(special_tokens=special_tokens, **kwargs)
        self.errors = check_choice("errors", errors, self._ERRORS)
        self._offset = len(SPECIAL_TOKENS) if special_tokens else 0
        specials = [t.encode() for t in SPECIAL_TOKENS] if special_tokens else []
        self._id_strings = tf.constant(specials + [bytes([b]) for b in range(256)], tf.string)

    def get_vocabulary(self) -> list[str]:
        specials = list(SPECIAL_TOKENS) if self.special_tokens else []
        return specials + [f"<0x{b:02X}>" for b in range(256)]

    @property
    def vocabulary_size(self) -> int:
        return 256 + self._offset

    def token_to_id(self, token: str | bytes) -> int:
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
