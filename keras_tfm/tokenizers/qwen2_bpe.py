"""`Qwen2BPETokenizer`: Qwen2's byte-level BPE (NFC, Qwen2's split regex, added tokens) in TF ops.

What HuggingFace `tokenizers` does with a Qwen2 `tokenizer.json`:

1. added tokens (`<|endoftext|>`, `<|im_start|>`, ...) are cut out of the raw
   text (`AddedTokensTokenizer`);
2. the rest is normalised to NFC (`nfc.NFC`, optional), and added tokens
   marked `normalized` are cut out of the normalised text;
3. cut into pieces by Qwen2's regex (`qwen2_pieces`);
4. each piece's UTF-8 bytes become GPT-2's byte characters (`ByteLevel`
   without prefix space) and the merges are applied (`MergeRanks`, exact for
   any merge list), once per distinct piece of the batch.

`detokenize` is HuggingFace's `ByteLevel` decoder: each token's characters
back to bytes (a token with a character outside the byte alphabet, such as an
added token, gives its UTF-8), joined, then read as UTF-8 with U+FFFD for each
invalid sequence (Rust's `from_utf8_lossy`).
"""

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import tensorflow as tf

from keras_tfm.tokenizers.added_tokens import AddedTokensTokenizer
from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.bpe_merges import MergeRanks, merge_rules, whole_words_or
from keras_tfm.tokenizers.byte_level import bytes_to_unicode, gpt2_class_tables
from keras_tfm.tokenizers.nfc import NFC
from keras_tfm.tokenizers.qwen2_pieces import qwen2_pieces


def byte_level_bytes(token: str, char_bytes: Mapping[str, int]) -> bytes:
    """The bytes HuggingFace's ByteLevel decoder gives for `token`."""
    if all(c in char_bytes for c in token):
        return bytes(char_bytes[c] for c in token)
    return token.encode("utf-8")


@keras.saving.register_keras_serializable(package="keras_tfm")
class Qwen2BPETokenizer(AddedTokensTokenizer):
    """Qwen2's byte-level BPE, exactly as HuggingFace `tokenizers` reads its `tokenizer.json`.

    Build it with `keras_tfm.tokenizers.load_tokenizer_json(path)`.

    Args:
        vocabulary: every token in id order (the 256 byte characters included).
        merges: the merge rules in rank order (`"left right"` or `[left, right]`).
        added_tokens: `[{"content": str, "special": bool}]` (see `AddedTokensTokenizer`).
        nfc: normalise the text to NFC first (Qwen2's normalizer).
        ignore_merges: a piece found whole in the vocabulary is one token.
        special_tokens, add_bos, add_eos, max_length, **kwargs: see
            `AddedTokensTokenizer` and `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        merges: Sequence[str],
        added_tokens: Sequence[Mapping[str, Any]] = (),
        nfc: bool = True,
        ignore_merges: bool = False,
        special_tokens: SpecialTokensArg = False,
        **kwargs,
    ):
        super().__init__(vocabulary, added_tokens, special_tokens=special_tokens, **kwargs)
        index = self._token_index()
        byte_chars = bytes_to_unicode()
        missing = [c for c in byte_chars.values() if c not in index]
        if missing:
            raise ValueError(
                f"`vocabulary` lacks byte characters {missing[:5]}; it is not a byte-level BPE vocabulary."
            )
        self._options = {"nfc": bool(nfc), "ignore_merges": bool(ignore_merges)}
        rules = merge_rules(index, merges, "`merges`")
        self._merges = tuple(
            f"{self._vocabulary[a]} {self._vocabulary[b]}" for a, b in zip(rules[0], rules[1])
        )
        self._merge_ranks = MergeRanks(len(self._vocabulary), *rules)
        self._byte_ids = tf.constant([index[byte_chars[b]] for b in range(256)], tf.int32)
        self._byte_chars = tf.constant([byte_chars[b] for b in range(256)], tf.string)
        self._class_starts, self._classes = gpt2_class_tables()
        self._nfc = NFC() if nfc else None
        char_bytes = {c: b for b, c in byte_chars.items()}
        self._id_bytes = tf.constant([byte_level_bytes(t, char_bytes) for t in self._vocabulary], tf.string)
        self._set_added_token_matching()

    def _normalize_text(self, text):
        return unicodedata.normalize("NFC", text) if self._nfc is not None else text

    def _normalize(self, segments):
        if self._nfc is None:
            return segments
        return tf.strings.unicode_encode(self._nfc(tf.strings.unicode_decode(segments, "UTF-8")), "UTF-8")

    def split_pieces(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """`[batch]` normalised UTF-8 strings -> `[batch, None]` pieces of Qwen2's regex."""
        return qwen2_pieces(tf.strings.unicode_decode(strings, "UTF-8"), self._class_starts, self._classes)

    def _encode_normalized(self, segments, first):
        pieces = self.split_pieces(segments)
        unique, index = tf.unique(pieces.flat_values)
        ids = tf.gather(self._merge_pieces(unique), index)
        return tf.RaggedTensor.from_row_splits(ids, pieces.row_splits, validate=False).merge_dims(1, 2)

    def _merge_pieces(self, pieces):
        """`[n]` distinct pieces -> `[n, None]` ids."""
        piece_bytes = tf.strings.bytes_split(pieces)
        raw = tf.reshape(tf.cast(tf.io.decode_raw(piece_bytes.flat_values, tf.uint8), tf.int32), [-1])
        symbols = piece_bytes.with_flat_values(tf.gather(self._byte_ids, raw))
        merged = self._merge_ranks(symbols)
        if not self._options["ignore_merges"]:
            return merged
        words = tf.strings.reduce_join(
            piece_bytes.with_flat_values(tf.gather(self._byte_chars, raw)), axis=-1
        )
        return whole_words_or(self._lookup_flat(words), merged)

    def _decode(self, ids):
        text = tf.strings.reduce_join(tf.gather(self._id_bytes, ids), axis=-1)
        return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["merges"] = list(self._merges)
        config.update(self._options)
        return config
