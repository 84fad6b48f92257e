"""`SentencePieceBPETokenizer`: SentencePiece-style BPE with byte fallback (Llama, Mistral), in TF ops.

What HuggingFace `tokenizers` does with a Llama / Mistral `tokenizer.json`:

1. added tokens (`<s>`, ...) are cut out of the raw text (`AddedTokensTokenizer`);
2. every other segment gets "▁" in front and its spaces replaced by "▁":
   `prefix="always_prepend"` is the normalizer `Sequence[Prepend("▁"),
   Replace(" ", "▁")]` of Llama 2 / Mistral v0.1 files (every non-empty
   segment); `"always"` / `"first"` are the `Metaspace` pre-tokenizer's
   `prepend_scheme` (only when the segment does not already start with "▁";
   "first": only the segment at the start of the text); `"never"`: none;
3. the segment, as one word (or cut before each "▁" with `split=True`), is
   split into characters; a character that is not in the vocabulary becomes
   the tokens `<0xNN>` of its UTF-8 bytes (`byte_fallback`), else `unk_token`
   (consecutive ones fused with `fuse_unk`), else nothing;
4. the merges are applied in rank order (`MergeRanks`, exact).

For speed the words of a segment are cut before every "▁" that follows
another character whenever that cannot change the result (no merged token
has a "▁" after another character, "▁" is in the vocabulary and
`ignore_merges` is off), and each distinct word is merged once per batch.

`detokenize` is the decoder `Sequence[Replace("▁", " "), ByteFallback, Fuse,
Strip(" ", strip_left, 0)]`: runs of `<0xNN>` tokens become their bytes when
these are valid UTF-8 (else one U+FFFD per byte), then up to `strip_left`
leading spaces are removed.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import tensorflow as tf

from keras_tfm.tokenizers.added_tokens import AddedTokensTokenizer
from keras_tfm.tokenizers.base import SpecialTokensArg
from keras_tfm.tokenizers.bpe_merges import MergeRanks, merge_rules, whole_words_or

METASPACE = "\u2581"
PREFIXES = ("always_prepend", "always", "first", "never")
_BYTE_TOKEN = re.compile(r"<0x(\+?[0-9A-Fa-f]{1,2})>")


def byte_token_value(token: str) -> int | None:
    """The byte of a `<0xNN>` token as HuggingFace's ByteFallback decoder reads it, else None."""
    match = _BYTE_TOKEN.fullmatch(token)
    if match is None or len(token.encode("utf-8")) != 6:
        return None
    return int(match.group(1), 16)


@keras.saving.register_keras_serializable(package="keras_tfm")
class SentencePieceBPETokenizer(AddedTokensTokenizer):
    """SentencePiece-style BPE (Llama, Mistral), exactly as HuggingFace `tokenizers` reads `tokenizer.json`.

    Build it with `keras_tfm.tokenizers.load_tokenizer_json(path)`.

    Args:
        vocabulary: every token in id order.
        merges: the merge rules in rank order (`"left right"` or `[left, right]`).
        added_tokens: `[{"content": str, "special": bool}]` (see `AddedTokensTokenizer`).
        prefix: "always_prepend", "always", "first" or "never" (module docstring).
        split: cut words before every "▁" (`Metaspace(split=True)`).
        byte_fallback: unknown characters become `<0xNN>` byte tokens.
        unk_token: the model's unknown token (a vocabulary token) or None.
        fuse_unk: consecutive unknown characters give one `unk_token`.
        ignore_merges: a word found whole in the vocabulary is one token.
        byte_fallback_decoding: `detokenize` turns `<0xNN>` runs into bytes.
        strip_left: leading spaces `detokenize` removes (the decoder's `Strip`).
        special_tokens, add_bos, add_eos, sequence_length, **kwargs: see
            `AddedTokensTokenizer` and `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        merges: Sequence[str],
        added_tokens: Sequence[Mapping[str, Any]] = (),
        prefix: str = "always_prepend",
        split: bool = False,
        byte_fallback: bool = True,
        unk_token: str | None = None,
        fuse_unk: bool = True,
        ignore_merges: bool = False,
        byte_fallback_decoding: bool = True,
        strip_left: int = 1,
        special_tokens: SpecialTokensArg = False,
        **kwargs,
    ):
        super().__init__(vocabulary, added_tokens, special_tokens=special_tokens, **kwargs)
        if prefix not in PREFIXES:
            raise ValueError(f"`prefix` must be one of {PREFIXES}; received {prefix!r}.")
        index = self._token_index()
        if unk_token is not None and unk_token not in index:
            raise ValueError(f"`unk_token` {unk_token!r} is not in the vocabulary.")
        if isinstance(strip_left, bool) or not isinstance(strip_left, int) or strip_left < 0:
            raise ValueError(f"`strip_left` must be an int >= 0; received {strip_left!r}.")
        self._options = {
            "prefix": prefix,
            "split": bool(split),
            "byte_fallback": bool(byte_fallback),
            "unk_token": unk_token,
            "fuse_unk": bool(fuse_unk),
            "ignore_merges": bool(ignore_merges),
            "byte_fallback_decoding": bool(byte_fallback_decoding),
            "strip_left": strip_left,
        }
        rules = merge_rules(index, merges, "`merges`")
        self._merges = tuple(
            f"{self._vocabulary[a]} {self._vocabulary[b]}" for a, b in zip(rules[0], rules[1])
        )
        self._merge_ranks = MergeRanks(len(self._vocabulary), *rules)
        self._unk_id = -1 if unk_token is None else index[unk_token]
        byte_ids = [index.get(f"<0x{b:02X}>", -1) if byte_fallback else -1 for b in range(256)]
        self._byte_ids = tf.constant(byte_ids, tf.int32)
        merged = [self._vocabulary[r] for r in rules[2]]
        self._cut_words = (
            not split
            and not ignore_merges
            and METASPACE in index
            and not any(METASPACE in t.lstrip(METASPACE) for t in merged)
        )
        self._set_decoding_tables()

    def _set_decoding_tables(self):
        replace = [t.replace(METASPACE, " ") for t in self._vocabulary]
        values = [
            byte_token_value(t) if self._options["byte_fallback_decoding"] else None for t in self._vocabulary
        ]
        self._id_text = tf.constant(replace, tf.string)
        self._id_byte = tf.constant([-1 if v is None else v for v in values], tf.int32)
        self._byte_strings = tf.constant([bytes([b]) for b in range(256)], tf.string)

    # ---- encoding ----------------------------------------------------------- #

    def _normalize(self, segments, first):
        prefix = self._options["prefix"]
        escaped = tf.strings.regex_replace(segments, " ", METASPACE)
        non_empty = tf.strings.length(segments) > 0
        if prefix == "always_prepend":
            add = non_empty
        elif prefix == "never":
            return escaped
        else:
            add = non_empty & (tf.strings.substr(escaped, 0, 3) != METASPACE)
            if prefix == "first":
                add &= first
        return tf.where(add, tf.strings.join([METASPACE, escaped]), escaped)

    def _encode_segments(self, segments, first):
        text = self._normalize(segments, first)
        chars = tf.strings.unicode_split(text, "UTF-8")
        if self._options["split"] or self._cut_words:
            flat = chars.flat_values
            size = tf.size(flat)
            is_space = flat == METASPACE
            starts_row = tf.concat([[True], chars.value_rowids()[1:] != chars.value_rowids()[:-1]], axis=0)[
                :size
            ]
            cut = is_space & ~starts_row
            if not self._options["split"]:
                cut &= ~tf.concat([[False], is_space[:-1]], axis=0)[:size]
            word_ids = tf.cumsum(tf.cast(cut | starts_row, tf.int64)) - 1
            words = tf.strings.unsorted_segment_join(
                flat, word_ids, tf.reduce_sum(tf.cast(cut | starts_row, tf.int32))
            )
            word_rows = tf.boolean_mask(chars.value_rowids(), cut | starts_row)
            nested = tf.RaggedTensor.from_value_rowids(words, word_rows, nrows=chars.nrows(), validate=False)
        else:
            nested = tf.RaggedTensor.from_tensor(text[:, None])
        unique, index = tf.unique(nested.flat_values)
        ids = tf.gather(self._encode_words(unique), index)
        per_word = tf.RaggedTensor.from_row_splits(ids, nested.row_splits, validate=False)
        return per_word.merge_dims(1, 2)

    def _encode_words(self, words):
        """`[n]` distinct words -> `[n, None]` ids: characters, byte fallback / unk, then the merges."""
        chars = tf.strings.unicode_split(words, "UTF-8")
        flat = chars.flat_values
        char_ids = self._lookup_flat(flat)
        unknown = char_ids < 0
        char_bytes = tf.strings.bytes_split(flat)
        size = tf.size(flat)
        raw = tf.reshape(tf.cast(tf.io.decode_raw(char_bytes.flat_values, tf.uint8), tf.int32), [-1])
        byte_ids = tf.gather(self._byte_ids, raw)
        byte_ok = tf.math.unsorted_segment_min(
            tf.cast(byte_ids >= 0, tf.int32), char_bytes.value_rowids(), size
        )
        use_bytes = unknown & (byte_ok > 0)
        as_unk = unknown & ~use_bytes
        row_ids = chars.value_rowids()
        same_row_prev = tf.concat([[False], row_ids[1:] == row_ids[:-1]], axis=0)[:size]
        drop = as_unk & (self._unk_id < 0)
        if self._options["fuse_unk"]:
            drop |= as_unk & same_row_prev & tf.concat([[False], as_unk[:-1]], axis=0)[:size]
        values = tf.where(as_unk, self._unk_id, char_ids)
        lengths = tf.where(use_bytes, tf.cast(char_bytes.row_lengths(), tf.int32), tf.where(drop, 0, 1))
        starts = tf.where(use_bytes, size + tf.cast(char_bytes.row_starts(), tf.int32), tf.range(size))
        symbols = tf.gather(
            tf.concat([values, byte_ids], axis=0), tf.ragged.range(starts, starts + lengths).flat_values
        )
        row_lengths = tf.math.unsorted_segment_sum(lengths, tf.cast(row_ids, tf.int32), tf.size(words))
        symbols = tf.RaggedTensor.from_row_lengths(symbols, tf.cast(row_lengths, tf.int64), validate=False)
        merged = self._merge_ranks(symbols)
        if not self._options["ignore_merges"]:
            return merged
        return whole_words_or(self._lookup_flat(words), merged)

    # ---- decoding ----------------------------------------------------------- #

    def _decode(self, ids):
        flat = ids.flat_values
        size = tf.size(flat)
        byte = tf.gather(self._id_byte, flat)
        is_byte = byte >= 0
        row_ids = ids.value_rowids()
        same_row_prev = tf.concat([[False], row_ids[1:] == row_ids[:-1]], axis=0)[:size]
        run_start = is_byte & ~(same_row_prev & tf.concat([[False], is_byte[:-1]], axis=0)[:size])
        run_id = tf.cumsum(tf.cast(run_start, tf.int32)) - 1
        num_runs = tf.reduce_sum(tf.cast(run_start, tf.int32))
        byte_strings = tf.gather(self._byte_strings, tf.maximum(byte, 0))
        runs = tf.strings.unsorted_segment_join(
            tf.boolean_mask(byte_strings, is_byte), tf.boolean_mask(run_id, is_byte), num_runs
        )
        valid = tf.equal(
            tf.strings.unicode_transcode(runs, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD),
            runs,
        )
        run_valid = tf.gather(tf.concat([valid, [True]], axis=0), tf.where(is_byte, run_id, num_runs))
        pieces = tf.where(
            is_byte, tf.where(run_valid, byte_strings, "\ufffd"), tf.gather(self._id_text, flat)
        )
        text = tf.strings.reduce_join(ids.with_flat_values(pieces), axis=-1)
        strip = self._options["strip_left"]
        return tf.strings.regex_replace(text, f"^ {{0,{strip}}}", "") if strip else text

    # ---- configuration ------------------------------------------------------ #

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["merges"] = list(self._merges)
        config.update(self._options)
        return config
