"""`NFC`: Unicode canonical composition (normalisation form C) on ragged codepoints, in TF ops.

NFC is computed as the standard defines it, in three vectorised steps:

1. canonical decomposition: every codepoint with a canonical decomposition is
   replaced by its full decomposition (a `CodepointMap` lookup; precomposed
   Hangul syllables are kept, see below);
2. canonical ordering: in every run of combining marks (canonical combining
   class > 0) the marks are stably sorted by class (one `argsort`, run only
   when some run is out of order);
3. canonical composition: from each starter, every following character that
   is not blocked (no character in between left uncomposed with class 0 or
   with a class >= its own) and forms a primary composite with the starter
   replaces it. Characters only interact inside a "block" that starts at a
   class-0 character which is never the second half of a composition, so the
   sequential rule runs as a `tf.while_loop` over the position inside the
   blocks of two or more characters (a base letter and its marks), all blocks
   of the batch at once.

Hangul: syllables are not decomposed; the jamo pairs L+V and LV+T are in the
composition table instead, which gives the same result.

The tables come from Python's `unicodedata` (Unicode 14 on Python 3.11):
decompositions and combining classes of codepoints below U+40000 (none above
has one), and the composition pairs checked with `unicodedata.normalize`. The
result equals `unicodedata.normalize("NFC", text)` for every string; HuggingFace
`tokenizers` uses its own Unicode tables, which can differ for characters
assigned in recent Unicode versions.
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from keras_tfm.tokenizers import unicode_tables as U

_HANGUL_FIRST, _HANGUL_LAST = 0xAC00, 0xD7A3
_L, _V, _T = 0x1100, 0x1161, 0x11A7  # first leading consonant, first vowel, T base (one before the first)
_NUM_L, _NUM_V, _NUM_T = 19, 21, 28
_SHIFT = 1 << 21  # pair key = first * 2**21 + second


@functools.cache
def nfc_tables():
    """`(decompositions, ccc, pairs, seconds)` from `unicodedata`.

    decompositions: {codepoint: full canonical decomposition str} (Hangul syllables left out);
    ccc: int32 array, the combining class of codepoints `0.._SCANNED-1`;
    pairs: {(first, second): composite} of every primary composite, Hangul included;
    seconds: bool array, codepoints that are the second half of some pair.
    """
    size = U._SCANNED
    decompositions, pairs = {}, {}
    ccc = np.zeros(size, np.int32)
    for cp in range(size):
        ch = chr(cp)
        ccc[cp] = unicodedata.combining(ch)
        if _HANGUL_FIRST <= cp <= _HANGUL_LAST:
            continue
        decomposition = unicodedata.decomposition(ch)
        if not decomposition or decomposition.startswith("<"):
            continue
        decompositions[cp] = unicodedata.normalize("NFD", ch)
        parts = [int(p, 16) for p in decomposition.split()]
        if len(parts) == 2 and unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == ch:
            pairs[tuple(parts)] = cp
    for l_index in range(_NUM_L):
        for v_index in range(_NUM_V):
            lv = _HANGUL_FIRST + (l_index * _NUM_V + v_index) * _NUM_T
            pairs[(_L + l_index, _V + v_index)] = lv
            for t_index in range(1, _NUM_T):
                pairs[(lv, _T + t_index)] = lv + t_index
    seconds = np.zeros(size, bool)
    seconds[[second for _, second in pairs]] = True
    return decompositions, ccc, pairs, seconds


class NFC(tf.Module):
    """Maps `[batch, None]` int32 codepoints to their NFC form (see the module docstring)."""

    def __init__(self, name=None):
        super().__init__(name=name)
        decompositions, ccc, pairs, seconds = nfc_tables()
        nothing_removed = (np.zeros([1], np.int32), np.zeros([1], np.int32))
        self._decompose = U.CodepointMap(decompositions, nothing_removed)
        self._ccc_starts, self._ccc = (tf.constant(t) for t in U.runs(ccc, lambda cp, cat: 0))
        self._second_starts, self._second = (
            tf.constant(t) for t in U.runs(seconds.astype(np.int32), lambda cp, cat: 0)
        )
        keys = np.array([a * _SHIFT + b for a, b in pairs], np.int64)
        self._pairs = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant(list(pairs.values()), tf.int32)
            ),
            default_value=-1,
        )

    def __call__(self, codepoints: tf.RaggedTensor) -> tf.RaggedTensor:
        decomposed = self._decompose(codepoints)
        values = decomposed.flat_values
        row_ids = decomposed.value_rowids()
        first = tf.concat([[True], row_ids[1:] != row_ids[:-1]], axis=0)[: tf.size(values)]
        ccc = U.lookup_runs(values, self._ccc_starts, self._ccc)
        values, ccc = self._reorder(values, ccc, first)
        values, keep = self._compose(values, ccc, first)
        return tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(values, keep),
            tf.boolean_mask(row_ids, keep),
            nrows=decomposed.nrows(),
            validate=False,
        )

    def _reorder(self, values, ccc, first):
        """Stable sort of every run of combining marks by combining class."""
        size = tf.size(values)
        next_ccc = tf.concat([ccc[1:], [0]], axis=0)[:size]
        next_first = tf.concat([first[1:], [True]], axis=0)[:size]
        unordered = tf.reduce_any((next_ccc > 0) & (ccc > next_ccc) & ~next_first)

        def reorder():
            group = tf.cumsum(tf.cast((ccc == 0) | first, tf.int64))
            order = tf.argsort(group * 256 + tf.cast(ccc, tf.int64), stable=True)
            return tf.gather(values, order), tf.gather(ccc, order)

        return tf.cond(unordered, reorder, lambda: (values, ccc))

    def _compose(self, values, ccc, first):
        """Canonical composition: `(values with the composites written in, mask of the kept ones)`."""
        size = tf.size(values)
        second = U.lookup_runs(values, self._second_starts, self._second) > 0
        block_start = first | ((ccc == 0) & ~second)
        starts = tf.cast(tf.where(block_start)[:, 0], tf.int32)
        lengths = tf.concat([starts[1:], [size]], axis=0) - starts
        long_blocks = lengths > 1
        starts, lengths = tf.boolean_mask(starts, long_blocks), tf.boolean_mask(lengths, long_blocks)
        head = tf.gather(values, starts)
        starter = tf.where(tf.gather(ccc, starts) == 0, head, -1)
        state = (
            tf.constant(1),
            values,
            tf.ones([size], tf.bool),
            starter,
            starts,
            tf.zeros_like(starts),
        )

        def step(j, values, keep, starter, starter_at, last):
            active = j < lengths
            at = tf.boolean_mask(starts + j, active)
            c = tf.gather(values, at)
            c_ccc = tf.gather(ccc, at)
            s, s_at, s_last = (tf.boolean_mask(x, active) for x in (starter, starter_at, last))
            free = (s >= 0) & (s_last < tf.maximum(c_ccc, 1))
            key = tf.cast(tf.maximum(s, 0), tf.int64) * _SHIFT + tf.cast(c, tf.int64)
            composite = tf.where(free, self._pairs.lookup(key), -1)
            composed = composite >= 0
            new_starter = ~composed & (c_ccc == 0)
            s_new = tf.where(composed, composite, tf.where(new_starter, c, s))
            s_at_new = tf.where(new_starter, at, s_at)
            last_new = tf.where(new_starter, 0, tf.where(composed, s_last, tf.maximum(s_last, c_ccc)))
            values = tf.tensor_scatter_nd_update(
                values, tf.boolean_mask(s_at, composed)[:, None], tf.boolean_mask(composite, composed)
            )
            keep = tf.tensor_scatter_nd_update(
                keep,
                tf.boolean_mask(at, composed)[:, None],
                tf.zeros_like(tf.boolean_mask(at, composed), tf.bool),
            )
            index = tf.cast(tf.where(active)[:, 0], tf.int32)[:, None]
            starter = tf.tensor_scatter_nd_update(starter, index, s_new)
            starter_at = tf.tensor_scatter_nd_update(starter_at, index, s_at_new)
            last = tf.tensor_scatter_nd_update(last, index, last_new)
            return j + 1, values, keep, starter, starter_at, last

        max_length = tf.reduce_max(tf.concat([lengths, [0]], axis=0))
        _, composed, keep, _, _, _ = tf.while_loop(
            lambda j, *_: j < max_length,
            step,
            state,
            shape_invariants=(tf.TensorShape([]),) + (tf.TensorShape([None]),) * 5,
        )
        return composed, keep
