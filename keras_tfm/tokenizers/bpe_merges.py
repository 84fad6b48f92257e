"""`MergeRanks`: HuggingFace's BPE merge loop on integer ids, vectorised over the words of a batch.

HuggingFace `tokenizers` (and SentencePiece) merge one word at a time: of all
adjacent symbol pairs that have a merge rule, the one of lowest rank is merged
(the leftmost of equal ranks), then the pairs it forms with its neighbours are
considered, until no pair has a rule. Here every word of a batch takes steps
together in a `tf.while_loop`; in each step a word merges its lowest-rank pair:

- at all its non-overlapping occurrences, left to right, when no merge rule of
  a lower rank uses the merged token (then the new pairs all rank higher, and
  HuggingFace merges these occurrences one after the other anyway);
- at its leftmost occurrence only otherwise (the merged token may take part in
  a lower-rank merge before the next occurrence; SentencePiece-derived and
  tiktoken-derived merge lists have such rules, merge lists learnt by BPE
  training have none).

So the result is HuggingFace's exactly, for any merge list. Pairs are looked
up as `left * vocabulary_size + right` (int64) in a `StaticHashTable`.
"""

from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

NO_MERGE = np.iinfo(np.int32).max


def merge_rules(vocabulary: Mapping[str, int], merges: Sequence[str | Sequence[str]], where: str):
    """`(lefts, rights, results)` int lists of the merge rules, in rank order.

    Args:
        vocabulary: the model's {token: id}.
        merges: `"left right"` strings or `[left, right]` pairs.
        where: the file and field named in errors.
    """
    lefts, rights, results, seen = [], [], [], {}
    for rank, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else list(merge)
        if len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise ValueError(
                f"{where}: `merges[{rank}]` must be 'left right' or [left, right]; found {merge!r}."
            )
        left, right = parts
        for token in (left, right, left + right):
            if token not in vocabulary:
                raise ValueError(
                    f"{where}: `merges[{rank}]` {merge!r} uses {token!r}, which is not in the vocabulary."
                )
        pair = (vocabulary[left], vocabulary[right])
        if pair in seen:
            raise ValueError(f"{where}: `merges[{rank}]` {merge!r} repeats `merges[{seen[pair]}]`.")
        seen[pair] = rank
        lefts.append(pair[0])
        rights.append(pair[1])
        results.append(vocabulary[left + right])
    return lefts, rights, results


def cascading_ranks(lefts, rights, results) -> np.ndarray:
    """Bool per rank: some lower-rank rule uses the token that this rule makes."""
    first_use = {}
    for rank, (left, right) in enumerate(zip(lefts, rights)):
        first_use.setdefault(left, rank)
        first_use.setdefault(right, rank)
    return np.array([first_use.get(t, NO_MERGE) < rank for rank, t in enumerate(results)], bool)


class MergeRanks(tf.Module):
    """Applies BPE merge rules to `[words, None]` int32 symbol ids.

    Args:
        vocabulary_size: the number of ids (pair keys are `left * size + right`).
        lefts, rights, results: the rules of `merge_rules`, in rank order.
    """

    def __init__(self, vocabulary_size: int, lefts, rights, results, name=None):
        super().__init__(name=name)
        self._size = int(vocabulary_size)
        keys = np.asarray(lefts, np.int64) * self._size + np.asarray(rights, np.int64)
        self._ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys if len(keys) else np.array([-1], np.int64)),
                tf.range(max(len(keys), 1), dtype=tf.int32),
            ),
            default_value=NO_MERGE,
        )
        cascade = cascading_ranks(lefts, rights, results)
        self._results = tf.constant(np.asarray(list(results) or [0], np.int32))
        self._cascade = tf.constant(np.concatenate([cascade, [False]]) if len(cascade) else [False, False])
        self.num_cascading = int(cascade.sum())

    def __call__(self, symbols: tf.RaggedTensor) -> tf.RaggedTensor:
        """`[words, None]` int32 ids -> the ids after all merges (same ragged layout, shorter rows)."""
        values = tf.cast(symbols.flat_values, tf.int32)
        lengths = tf.cast(symbols.row_lengths(), tf.int32)

        def body(values, lengths, _):
            return self._merge_step(values, lengths)

        values, lengths, _ = tf.while_loop(
            lambda values, lengths, merged: merged,
            body,
            (values, lengths, tf.constant(True)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
        )
        return tf.RaggedTensor.from_row_lengths(values, tf.cast(lengths, tf.int64), validate=False)

    def _merge_step(self, values, lengths):
        """One step: every word merges its lowest-rank pair (see the module docstring)."""
        size = tf.size(values)
        num_words = tf.size(lengths)
        row_ids = tf.repeat(tf.range(num_words), lengths)
        same_row = tf.concat([row_ids[1:] == row_ids[:-1], [False]], axis=0)[:size]
        right = tf.concat([values[1:], [0]], axis=0)[:size]
        keys = tf.cast(values, tf.int64) * self._size + tf.cast(right, tf.int64)
        ranks = tf.where(same_row, self._ranks.lookup(keys), NO_MERGE)
        best = tf.math.unsorted_segment_min(ranks, row_ids, num_words)
        match = (ranks == tf.gather(best, row_ids)) & (ranks < NO_MERGE)
        # In a run of overlapping matches (a a a -> aa a) take every other one, from the left.
        run_id = tf.cumsum(tf.cast(~match, tf.int32))
        breaks = tf.cast(tf.where(~match)[:, 0], tf.int32)
        previous_break = tf.where(run_id > 0, tf.gather(breaks, tf.maximum(run_id - 1, 0)), -1)
        every_other = match & ((tf.range(size) - previous_break - 1) % 2 == 0)
        # Words whose best rule cascades merge their leftmost occurrence only.
        before = tf.cumsum(tf.cast(match, tf.int32), exclusive=True)
        at_row_start = tf.gather(tf.concat([before, [0]], axis=0), tf.cumsum(lengths, exclusive=True))
        leftmost = match & (before == tf.gather(at_row_start, row_ids))
        cascade = tf.gather(self._cascade, tf.minimum(tf.gather(best, row_ids), tf.size(self._cascade) - 1))
        selected = tf.where(cascade, leftmost, every_other)
        merged = tf.where(selected, tf.gather(self._results, tf.where(selected, ranks, 0)), values)
        removed = tf.concat([[False], selected[:-1]], axis=0)[:size]
        new_lengths = lengths - tf.math.unsorted_segment_sum(tf.cast(selected, tf.int32), row_ids, num_words)
        return tf.boolean_mask(merged, ~removed), new_lengths, tf.reduce_any(selected)


def whole_words_or(whole: tf.Tensor, merged: tf.RaggedTensor) -> tf.RaggedTensor:
    """`ignore_merges`: row i is the one id `whole[i]` where it is >= 0, else `merged[i]`."""
    found = whole >= 0
    lengths = tf.where(found, 1, tf.cast(merged.row_lengths(), tf.int32))
    starts = tf.where(
        found, tf.size(merged.flat_values) + tf.range(tf.size(found)), tf.cast(merged.row_starts(), tf.int32)
    )
    values = tf.gather(
        tf.concat([merged.flat_values, whole], axis=0), tf.ragged.range(starts, starts + lengths).flat_values
    )
    return tf.RaggedTensor.from_row_lengths(values, tf.cast(lengths, tf.int64), validate=False)
