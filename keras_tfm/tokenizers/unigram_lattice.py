"""Viterbi segmentation of a Unigram language model (SentencePiece / HuggingFace `Unigram`) in TF ops.

For a text of characters `x[0:n]` the best segmentation maximises the sum of
its pieces' scores (log probabilities):

    best[0] = 0,    best[j] = max over l in 1..K with x[j-l:j] a piece of best[j-l] + score(x[j-l:j])

where K is the longest piece in characters. Where no piece is a single
character `x[i]`, an unknown piece `x[i:i+1]` of score `min_score - 10` stands
in (SentencePiece's and `tokenizers`' `kUnkPenalty`), and consecutive unknown
pieces are fused into one. Ties go to the piece that starts first (the
longest), as both libraries keep the first candidate they see.

`UnigramLattice` segments a batch of texts at once: the candidate pieces of
all positions are looked up in one `StaticHashTable` call; the texts are
sorted by length so that the ones still running at step `j` of the forward
`tf.while_loop` are a prefix of the batch, which carries the scores of the
last K positions as a `[K, texts]` window; a backward loop then follows the
best lengths from each text's end.
"""

import numpy as np
import tensorflow as tf

UNK_PENALTY = 10.0


class UnigramLattice(tf.Module):
    """Best segmentation of texts into scored pieces.

    Args:
        pieces: the piece strings that may be used.
        scores: their scores.
        unk_score: the score of an unknown single character.
        dtype: `tf.float64` (HuggingFace `tokenizers` adds scores in f64) or
            `tf.float32` (SentencePiece adds them in f32).

    Call arguments:
        texts: `[n]` strings (valid UTF-8).

    Returns:
        `(index, text)`: `[n, None]` ragged int64 piece indices into `pieces`
        (-1 for a run of unknown characters) and the ragged string of each
        piece (the run's text for an unknown run).
    """

    def __init__(self, pieces, scores, unk_score, dtype=tf.float64, name=None):
        super().__init__(name=name)
        # Every prefix of a piece -> 2 * (piece index + 1, or 0 if the prefix is no piece)
        # + (1 if a longer piece starts with it): candidates grow only while they can still match.
        codes = {}
        for piece in pieces:
            for m in range(1, len(piece)):
                codes[piece[:m]] = 1
        for i, piece in enumerate(pieces):
            if codes.get(piece, 0) < 2:  # the first of equal pieces
                codes[piece] = codes.get(piece, 0) | 2 * (i + 1)
        self._prefixes = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(codes), tf.string), tf.constant(list(codes.values()), tf.int64)
            ),
            default_value=0,
        )
        self._scores = tf.constant(np.asarray(scores, np.float64), dtype)
        self._unk_score = tf.constant(unk_score, dtype)
        self._dtype = dtype
        self.max_piece_chars = max([len(p) for p in pieces] + [1])

    def __call__(self, texts):
        k = self.max_piece_chars
        n = tf.size(texts, out_type=tf.int64)
        _, offsets = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
        counts = offsets.row_lengths()
        order = tf.argsort(-counts, stable=True)
        texts_sorted = tf.gather(texts, order)
        offsets = tf.gather(offsets, order)
        counts = tf.gather(counts, order)
        base = offsets.row_starts()
        ends = tf.concat([offsets, tf.cast(tf.strings.length(texts_sorted), tf.int64)[:, None]], axis=1)
        layout = {
            "texts": texts_sorted,
            "row": offsets.value_rowids(),
            "local": offsets.values,
            "ends": ends,
            "base": base,
            "counts": counts,
        }
        scores, ids = self._candidates(layout, k)
        best_length = self._forward(scores, base, counts, k)
        start, length = _backtrack(best_length, base, counts)
        index, text, row = self._pieces(layout, ids, start, length, k)
        pieces = tf.RaggedTensor.from_value_rowids(
            tf.stack([index, tf.range(tf.size(index, tf.int64))], 1), row, n
        )
        inverse = tf.math.invert_permutation(order)
        pieces = tf.gather(pieces, inverse)
        flat = pieces.flat_values
        return pieces.with_flat_values(flat[:, 0]), pieces.with_flat_values(tf.gather(text, flat[:, 1]))

    def _matches(self, layout):
        """(position, length, piece index) of every piece that occurs in the texts: candidates of
        length 1, 2, ... are looked up while some piece still starts with them."""
        positions = tf.size(layout["row"], out_type=tf.int64)
        row, ends = layout["row"], layout["ends"]
        within = tf.range(positions) - tf.gather(layout["base"], row)
        remaining = tf.gather(layout["counts"], row) - within
        end_index = tf.gather(ends.row_starts(), row) + within
        found = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False)

        def body(length, alive, found):
            begin = tf.gather(layout["local"], alive)
            end = tf.gather(ends.values, tf.gather(end_index, alive) + length)
            key = tf.strings.substr(tf.gather(layout["texts"], tf.gather(row, alive)), begin, end - begin)
            code = self._prefixes.lookup(key)
            hit = code >= 2
            index = tf.boolean_mask(code // 2 - 1, hit)
            found = found.write(
                found.size(),
                tf.stack([tf.boolean_mask(alive, hit), tf.fill(tf.shape(index), length), index], 1),
            )
            grow = tf.equal(code % 2, 1) & (tf.gather(remaining, alive) > length)
            return length + 1, tf.boolean_mask(alive, grow), found

        _, _, found = tf.while_loop(
            lambda length, alive, found: tf.size(alive) > 0,
            body,
            (tf.constant(1, tf.int64), tf.range(positions), found),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]), None),
        )
        found = found.write(found.size(), tf.zeros([0, 3], tf.int64))
        found = tf.reshape(found.concat(), [-1, 3])
        return found[:, 0], found[:, 1], found[:, 2]

    def _candidates(self, layout, k):
        """Dense `[positions * K]` score and piece-index tables: entry `p * K + l - 1` is the piece
        of `l` characters starting at position `p` (-inf / -1 if none; the unknown piece at l = 1)."""
        positions = tf.size(layout["row"], out_type=tf.int64)
        owner, length, ids = self._matches(layout)
        slot = (owner * k + length - 1)[:, None]
        single = tf.math.unsorted_segment_max(tf.cast(tf.equal(length, 1), tf.int32), owner, positions)
        score = tf.gather(self._scores, ids)
        size = positions * k
        table = tf.fill([size], tf.constant(-np.inf, self._dtype))
        table = tf.tensor_scatter_nd_update(table, slot, score)
        unknown = tf.where(single <= 0)[:, 0] * k
        table = tf.tensor_scatter_nd_update(
            table, unknown[:, None], tf.fill(tf.shape(unknown), self._unk_score)
        )
        index = tf.tensor_scatter_nd_update(tf.fill([size], tf.constant(-1, tf.int64)), slot, ids)
        return table, index

    def _forward(self, scores, base, counts, k):
        """`[positions]` int64: the length of the last piece of the best path ending after each position."""
        steps = tf.reduce_max(tf.concat([counts, [0]], 0))
        # active[j - 1] = number of texts with at least j characters (texts are sorted longest first).
        active = tf.searchsorted(-counts, -tf.range(1, steps + 1), side="right", out_type=tf.int64)
        lengths = tf.range(1, k + 1, dtype=tf.int64)
        minus_inf = tf.constant(-np.inf, self._dtype)
        window = tf.concat(
            [tf.zeros([1, tf.size(counts)], self._dtype), tf.fill([k - 1, tf.size(counts)], minus_inf)], 0
        )
        chosen = tf.TensorArray(
            tf.int64,
            size=tf.cast(steps + 1, tf.int32),
            element_shape=tf.TensorShape([None]),
            infer_shape=False,
        )

        def body(j, window, chosen):
            count = active[j - 1]
            window = window[:, :count]
            start = j - lengths
            slot = (base[:count, None] + tf.maximum(start, 0)[None, :]) * k + lengths[None, :] - 1
            piece = tf.where(start[None, :] >= 0, tf.gather(scores, slot), minus_inf)
            total = tf.transpose(window) + piece
            best = tf.reduce_max(total, axis=1)
            # The longest of the best pieces (the first one the reference libraries see).
            length = tf.reduce_max(tf.where(tf.equal(total, best[:, None]), lengths[None, :], 0), axis=1)
            window = tf.concat([best[None, :], window[:-1]], 0)
            return j + 1, window, chosen.write(tf.cast(j - 1, tf.int32), length)

        _, _, chosen = tf.while_loop(
            lambda j, *_: j <= steps,
            body,
            (tf.constant(1, tf.int64), window, chosen),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([k, None]), None),
        )
        chosen = chosen.write(tf.cast(steps, tf.int32), tf.zeros([0], tf.int64))
        text = tf.ragged.range(active)
        where = tf.gather(base, text.flat_values) + text.value_rowids()
        positions = tf.reduce_sum(counts)
        return tf.scatter_nd(where[:, None], chosen.concat(), positions[None])

    def _pieces(self, layout, ids, start, length, k):
        """(piece index or -1, piece text, sorted-text row) of the chosen pieces, unknown runs fused."""
        order = tf.argsort(start)
        start, length = tf.gather(start, order), tf.gather(length, order)
        index = tf.gather(ids, start * k + length - 1)
        row = tf.gather(layout["row"], start)
        unknown = index < 0
        follows_unknown = tf.concat([[False], unknown[:-1] & tf.equal(row[:-1], row[1:])], 0)
        keep = ~(unknown & follows_unknown)
        run = tf.cumsum(tf.cast(keep, tf.int64)) - 1
        within = start - tf.gather(layout["base"], row)
        ends = layout["ends"]
        end_byte = tf.gather(ends.values, tf.gather(ends.row_starts(), row) + within + length)
        end_byte = tf.math.unsorted_segment_max(end_byte, run, tf.reduce_sum(tf.cast(keep, tf.int64)))
        start, index, row = (tf.boolean_mask(t, keep) for t in (start, index, row))
        begin = tf.gather(layout["local"], start)
        text = tf.strings.substr(tf.gather(layout["texts"], row), begin, end_byte - begin)
        return index, text, row


def _backtrack(best_length, base, counts):
    """(start position, length) of every piece on the best paths, following `best_length` back from
    each text's end (one step per piece, over the texts not finished)."""
    pieces = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False)
    text = tf.where(counts > 0)[:, 0]
    end = tf.gather(base + counts, text)

    def body(end, stop, pieces):
        length = tf.gather(best_length, end - 1)
        end = end - length
        pieces = pieces.write(pieces.size(), tf.stack([end, length], axis=1))
        alive = end > stop
        return tf.boolean_mask(end, alive), tf.boolean_mask(stop, alive), pieces

    _, _, pieces = tf.while_loop(
        lambda end, stop, pieces: tf.size(end) > 0,
        body,
        (end, tf.gather(base, text), pieces),
        shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), None),
    )
    pieces = pieces.write(pieces.size(), tf.zeros([0, 2], tf.int64))
    found = tf.reshape(pieces.concat(), [-1, 2])
    return found[:, 0], found[:, 1]
