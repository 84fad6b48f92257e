"""SentencePiece's precompiled character map (`precompiled_charsmap`), searched with TF ops.

The blob that SentencePiece stores in a model's `normalizer_spec` (and
HuggingFace `tokenizers` in a `Precompiled` normalizer, base64-encoded) is

    u32 little-endian   trie_size (bytes)
    trie_size bytes     a darts-clone double-array trie of u32 units over the UTF-8 bytes of the keys
    the rest            the replacement strings, each ended by a NUL byte

Each unit packs `has_leaf = (u >> 8) & 1`, `value = u & (2**31 - 1)`,
`label = u & (2**31 | 0xFF)` and `offset = (u >> 10) << ((u & 2**9) >> 6)`. A
search starts at `offset(unit[0])`; byte `c` moves from node `p` to
`q = p ^ c` when `label(unit[q]) == c`, then to `q ^ offset(unit[q])`; when
`has_leaf(unit[q])` the key read so far is a rule whose replacement starts at
byte `value(unit[that node])` of the replacement strings.

`CharsmapTrie.matches` runs that search from many start positions at once
(one `tf.while_loop` step per byte, vectorised over the walks still alive), so
a normaliser exported with it needs only core TensorFlow ops and keeps the
whole nmt_nfkc table (about 225,000 rules) as two constants of 180 KB and 60 KB.
"""

import base64
import binascii

import numpy as np
import tensorflow as tf

_VALUE_MASK = (1 << 31) - 1
_LABEL_MASK = (1 << 31) | 0xFF


def decode_charsmap(text: str, where: str) -> bytes:
    """The bytes of a base64 `precompiled_charsmap` (a `tokenizer.json` field), checked."""
    if not isinstance(text, str):
        raise ValueError(
            f"{where}: `precompiled_charsmap` must be a base64 string; found {type(text).__name__}."
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"{where}: `precompiled_charsmap` is not valid base64 ({error}).") from error


def split_charsmap(blob: bytes, where: str) -> tuple[np.ndarray, bytes]:
    """(units as int64 array, replacement bytes) of a charsmap blob; ValueError naming `where` if malformed."""
    if len(blob) < 4:
        raise ValueError(f"{where}: `precompiled_charsmap` is too short ({len(blob)} bytes).")
    trie_size = int.from_bytes(blob[:4], "little")
    if trie_size % 4 or trie_size == 0 or 4 + trie_size > len(blob):
        raise ValueError(
            f"{where}: `precompiled_charsmap` declares a trie of {trie_size} bytes in a {len(blob)}-byte blob."
        )
    units = np.frombuffer(blob, "<u4", count=trie_size // 4, offset=4).astype(np.int64)
    replacements = bytes(blob[4 + trie_size :])
    try:
        replacements.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{where}: the replacement strings of `precompiled_charsmap` are not UTF-8."
        ) from error
    return units, replacements


class CharsmapTrie(tf.Module):
    """The double-array trie of a precompiled charsmap, as TF constants.

    Args:
        blob: the charsmap bytes (decoded from base64 where it came so).
        where: the file and field it came from, for error messages.
    """

    def __init__(self, blob: bytes, where: str = "precompiled_charsmap", name=None):
        super().__init__(name=name)
        units, replacements = split_charsmap(blob, where)
        self._size = len(units)
        self._units = tf.constant(units, tf.int64)
        self._root = int((units[0] >> 10) << ((units[0] & (1 << 9)) >> 6))
        self._replacements = tf.constant(replacements + b"\0", tf.string)
        # Bytes from each offset of the replacement strings to the next NUL.
        data = np.frombuffer(replacements + b"\0", np.uint8)
        nul = np.flatnonzero(data == 0)
        next_nul = nul[np.searchsorted(nul, np.arange(len(data)))]
        self._lengths = tf.constant((next_nul - np.arange(len(data))).astype(np.int64))

    def matches(self, data: tf.Tensor, starts: tf.Tensor, limits: tf.Tensor):
        """Every rule that is a prefix of `data[starts[i]:limits[i]]`, for all `i` at once.

        Args:
            data: int64 `[bytes]`, the byte values (0..255) of all texts end to end.
            starts: int64 `[n]` start offsets into `data`.
            limits: int64 `[n]` end offsets (exclusive); a walk stops there.

        Returns:
            `(walk, length, value)`, int64 `[m]` each: walk `walk[k]` matched a
            rule of `length[k]` bytes whose replacement starts at `value[k]`.
            The matches of one walk come in increasing length order.
        """
        n = tf.size(starts, out_type=tf.int64)
        found = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False)

        def cond(step, walk, node, found):
            return tf.size(walk) > 0

        def body(step, walk, node, found):
            byte = tf.gather(data, tf.gather(starts, walk) + step)
            child = tf.bitwise.bitwise_xor(node, byte)
            inside = child < self._size
            unit = tf.gather(self._units, tf.where(inside, child, 0))
            ok = inside & (tf.bitwise.bitwise_and(unit, _LABEL_MASK) == byte) & (byte != 0)
            node = tf.bitwise.bitwise_xor(child, _offset(unit))
            leaf = ok & (tf.bitwise.bitwise_and(tf.bitwise.right_shift(unit, 8), 1) == 1)
            leaf_walk = tf.boolean_mask(walk, leaf)
            leaf_node = tf.boolean_mask(node, leaf)
            value = tf.bitwise.bitwise_and(tf.gather(self._units, leaf_node), _VALUE_MASK)
            record = tf.stack([leaf_walk, tf.fill(tf.shape(leaf_walk), step + 1), value], axis=1)
            found = found.write(found.size(), record)
            alive = ok & (tf.gather(starts, walk) + step + 1 < tf.gather(limits, walk))
            return step + 1, tf.boolean_mask(walk, alive), tf.boolean_mask(node, alive), found

        walk = tf.boolean_mask(tf.range(n), starts < limits)
        node = tf.fill(tf.shape(walk), tf.constant(self._root, tf.int64))
        _, _, _, found = tf.while_loop(
            cond,
            body,
            (tf.constant(0, tf.int64), walk, node, found),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]), tf.TensorShape([None]), None),
        )
        found = found.write(found.size(), tf.zeros([0, 3], tf.int64))
        records = tf.reshape(found.concat(), [-1, 3])
        return records[:, 0], records[:, 1], records[:, 2]

    def touches(self, strings: tf.Tensor) -> tf.Tensor:
        """Bool `[n]`: some rule matches somewhere in the string (else no normaliser changes it).

        Walks start at every byte: keys are UTF-8 strings, so a walk from a
        continuation byte dies at once and the characters need not be decoded.
        """
        lengths = tf.cast(tf.strings.length(strings), tf.int64)
        ends = tf.cumsum(lengths)
        data = tf.reshape(
            tf.cast(tf.io.decode_raw(tf.strings.reduce_join(strings), tf.uint8), tf.int64), [-1]
        )
        starts = tf.range(tf.size(data, out_type=tf.int64))
        row = tf.searchsorted(ends, starts, side="right", out_type=tf.int64)
        walk, _, _ = self.matches(data, starts, tf.gather(ends, row))
        n = tf.size(strings, out_type=tf.int64)
        return tf.math.unsorted_segment_max(tf.ones_like(walk, tf.int32), tf.gather(row, walk), n) > 0

    def replacement(self, value: tf.Tensor) -> tf.Tensor:
        """The replacement strings that start at offsets `value` (int64, any shape)."""
        return tf.strings.substr(self._replacements, value, tf.gather(self._lengths, value))


def _offset(unit):
    shift = tf.bitwise.right_shift(tf.bitwise.bitwise_and(unit, 1 << 9), 6)
    return tf.bitwise.left_shift(tf.bitwise.right_shift(unit, 10), shift)


def first_and_last(walk, length, value, n):
    """Per walk (of `n`): (shortest length, its value, longest length, its value); lengths 0 if none."""
    index = tf.range(tf.size(walk, out_type=tf.int64))
    first = tf.math.unsorted_segment_min(index, walk, n)
    last = tf.math.unsorted_segment_max(index, walk, n)
    has = last >= 0
    first, last = tf.where(has, first, 0), tf.where(has, last, 0)
    pad = tf.constant([0], tf.int64)
    length, value = tf.concat([length, pad], 0), tf.concat([value, pad], 0)
    return (
        tf.where(has, tf.gather(length, first), 0),
        tf.where(has, tf.gather(value, first), 0),
        tf.where(has, tf.gather(length, last), 0),
        tf.where(has, tf.gather(value, last), 0),
    )


def exact_match(walk, length, value, wanted_length, n):
    """Per walk (of `n`): the value of its match of exactly `wanted_length[walk]` bytes, or -1."""
    hit = tf.equal(length, tf.gather(wanted_length, walk))
    return tf.maximum(tf.math.unsorted_segment_max(tf.where(hit, value, -1), walk, n), -1)
