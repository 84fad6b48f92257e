"""`SentencePieceBPETokenizer`: SentencePiece-style BPE with byte fallback (Llama, Mistral), in TF ops.

What HuggingFace `tokenizers` does with a Llama / Mistral `tokenizer.json`:

1. added tokens (`<s>`, ...) are cut out of the raw text (`AddedTokensTokenizer`);
2. the text between them is normalised by `normalizer`, the steps of the
   file's normalizer: "prepend" (`Prepend("▁")`, on a non-empty segment) and
   "escape" (`Replace(" ", "▁")`); Llama 2 / Mistral v0.1 files have
   `["prepend", "escape"]`; added tokens marked `normalized` are then cut out
   of the normalised text;
3. `metaspace` is the `prepend_scheme` of a `Metaspace("▁")` pre-tokenizer
   (newer files; None: there is none): spaces become "▁" and "▁" is put in
   front unless the segment starts with one ("always"), only in front of the
   segment at the start of the text ("first"), or never ("never");
4. the segment, as one word (cut before each "▁" with `split=True`), is
   split into characters; a character that is not in the vocabulary becomes
   the tokens `<0xNN>` of its UTF-8 bytes (`byte_fallback`), else `unk_token`
   (consecutive ones fused with `fuse_unk`), else nothing;
5. the merges are applied in rank order (`MergeRanks`, exact).

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
NORMALIZER_STEPS = ("prepend", "escape")
METASPACE_SCHEMES = ("always", "first", "never")
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
        normalizer: the normaliser's steps, "prepend" and "escape" (module docstring).
        metaspace: the `Metaspace` pre-tokenizer's `prepend_scheme` ("always",
            "first", "never"), or None without that pre-tokenizer.
        split: `Metaspace(split=True)`: cut words before every "▁".
        byte_fallback: unknown characters become `<0xNN>` byte tokens.
        unk_token: the model's unknown token (a vocabulary token) or None.
        fuse_unk: consecutive unknown characters give one `unk_token`.
        ignore_merges: a word found whole in the vocabulary is one token.
        byte_fallback_decoding: `detokenize` turns `<0xNN>` runs into bytes.
        strip_left: leading spaces `detokenize` removes (the decoder's `Strip`).
        special_tokens, add_bos, add_eos, max_length, **kwargs: see
            `AddedTokensTokenizer` and `Tokenizer`.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        merges: Sequence[str],
        added_tokens: Sequence[Mapping[str, Any]] = (),
        normalizer: Sequence[str] = NORMALIZER_STEPS,
        metaspace: str | None = None,
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
        if isinstance(normalizer, str) or any(step not in NORMALIZER_STEPS for step in normalizer):
            raise ValueError(f"`normalizer` must be a list of {NORMALIZER_STEPS}; received {normalizer!r}.")
        if metaspace not in (None, *METASPACE_SCHEMES):
            raise ValueError(
                f"`metaspace` must be None or one of {METASPACE_SCHEMES}; received {metaspace!r}."
            )
        if split and metaspace is None:
            raise ValueError("`split=True` needs the Metaspace pre-tokenizer (`metaspace`).")
        index = self._token_index()
        if unk_token is not None and unk_token not in index:
            raise ValueError(f"`unk_token` {unk_token!r} is not in the vocabulary.")
        if isinstance(strip_left, bool) or not isinstance(strip_left, int) or strip_left < 0:
            raise ValueError(f"`strip_left` must be an int >= 0; received {strip_left!r}.")
        self._options = {
            "normalizer": list(normalizer),
            "metaspace": metaspace,
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
        self._set_added_token_matching()

    def _set_decoding_tables(self):
        replace = [t.replace(METASPACE, " ") for t in self._vocabulary]
        values = [
            byte_token_value(t) if self._options["byte_fallback_decoding"] else None for t in self._vocabulary
        ]
        self._id_text = tf.constant(replace, tf.string)
        self._id_byte = tf.constant([-1 if v is None else v for v in values], tf.int32)
        self._byte_strings = tf.constant([bytes([b]) for b in range(256)], tf.string)

    # ---- encoding ----------------------------------------------------------- #

    def _normalize_text(self, text):
        for step in self._options["normalizer"]:
            text = (METASPACE + text if text else text) if step == "prepend" else text.replace(" ", METASPACE)
        return text

    def _normalize(self, segments):
        for step in self._options["normalizer"]:
            if step == "prepend":
                segments = tf.where(
                    tf.strings.length(segments) > 0, tf.strings.join([METASPACE, segments]), segments
                )
            else:
                segments = tf.strings.regex_replace(segments, " ", METASPACE)
        return segments

    def _pre_tokenize(self, segments, first):
        """The Metaspace pre-tokenizer's replacement and prefix."""
        scheme = self._options["metaspace"]
        if scheme is None:
            return segments
        escaped = tf.strings.regex_replace(segments, " ", METASPACE)
        if scheme == "never":
            return escaped
        add = (tf.strings.length(escaped) > 0) & (tf.strings.substr(escaped, 0, 3) != METASPACE)
        if scheme == "first":
            add &= first
        return tf.where(add, tf.strings.join([METASPACE, escaped]), escaped)

    def _encode_normalized(self, segments, first):
        text = self._pre_tokenize(segments, first)
        chars = tf.strings.unicode_split(text, "UTF-8")
        if self._options["split"] or self._cut_words:
            flat = chars.flat_values
            size = tf.size(flat)
            is_space = flat == METASPACE
            row_ids = chars.value_rowids()
            starts_row = tf.concat([[True], row_ids[1:] != row_ids[:-1]], axis=0)[:size]
            cut = is_space & ~starts_row
            if not self._options["split"]:
                cut &= ~tf.concat([[False], is_space[:-1]], axis=0)[:size]
            word_start = cut | starts_row
            words = tf.strings.unsorted_segment_join(
                flat,
                tf.cumsum(tf.cast(word_start, tf.int64)) - 1,
                tf.reduce_sum(tf.cast(word_start, tf.int32)),
            )
            nested = tf.RaggedTensor.from_value_rowids(
                words, tf.boolean_mask(row_ids, word_start), nrows=chars.nrows(), validate=False
            )
        else:
            nested = tf.RaggedTensor.from_tensor(text[:, None])
        unique, index = tf.unique(nested.flat_values)
        ids = tf.gather(self._encode_words(unique), index)
        return tf.RaggedTensor.from_row_splits(ids, nested.row_splits, validate=False).merge_dims(1, 2)

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
