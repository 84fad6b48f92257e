"""Greedy adjacent-pair merging, the loop shared by the WordPiece and byte-pair trainers (plain Python)."""

import collections
import heapq


def greedy_pair_merges(words, word_counts, symbol_counts, score, join, score_uses_symbol_counts=True):
    """Yields the merges of the best-scoring adjacent pair, one at a time, best first.

    Every word is a list of symbols seen `word_counts[i]` times. At each step
    the adjacent pair with the highest `score` (ties: the more frequent pair,
    then the alphabetically first) is replaced by `join(first, second)` in
    every word, and `(first, second, merged)` is yielded; the caller stops
    iterating when its vocabulary is full. Pair and symbol counts are updated
    incrementally (only the words holding the pair are rewritten) and the best
    pair is kept in a lazily invalidated heap.

    Args:
        words: list of symbol lists, rewritten in place.
        word_counts: how often each word occurs.
        symbol_counts: a `collections.Counter`, updated in place with the
            symbol counts of the current segmentation (added to what it holds).
        score: `score(pair_count, first_count, second_count, total)` -> float,
            `total` being the symbol count of the initial segmentation.
        join: `join(first, second)` -> the merged symbol.
        score_uses_symbol_counts: whether `score` reads the symbol counts: then
            every pair holding a symbol whose count changed is scored again
            after a merge; otherwise only the pairs whose own count changed
            (BPE's frequency score: much less work).

    Yields:
        `(first, second, merged)` tuples.
    """
    pair_counts = collections.Counter()
    pair_words = collections.defaultdict(set)
    symbol_pairs = collections.defaultdict(set)

    def add_word(index, sign):
        symbols, count = words[index], word_counts[index]
        for symbol in symbols:
            symbol_counts[symbol] += sign * count
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += sign * count
            if sign > 0:
                pair_words[pair].add(index)
                symbol_pairs[pair[0]].add(pair)
                symbol_pairs[pair[1]].add(pair)

    for index in range(len(words)):
        add_word(index, +1)

    total = sum(symbol_counts.values())
    heap = []
    stamps = collections.Counter()

    def push(pair):
        count = pair_counts.get(pair, 0)
        stamps[pair] += 1
        if count > 0:
            value = score(count, symbol_counts[pair[0]], symbol_counts[pair[1]], total)
            heapq.heappush(heap, (-value, -count, pair, stamps[pair]))

    for pair in list(pair_counts):
        push(pair)

    while heap:
        _, _, pair, stamp = heapq.heappop(heap)
        if stamp != stamps[pair] or pair_counts.get(pair, 0) <= 0:
            continue
        first, second = pair
        merged = join(first, second)
        touched_symbols = {first, second, merged}
        touched_pairs = set()
        for index in list(pair_words.pop(pair, ())):
            symbols = words[index]
            if not any(a == first and b == second for a, b in zip(symbols, symbols[1:])):
                continue
            touched_pairs.update(zip(symbols, symbols[1:]))
            add_word(index, -1)
            new_symbols, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                    new_symbols.append(merged)
                    i += 2
                else:
                    new_symbols.append(symbols[i])
                    i += 1
            words[index] = new_symbols
            add_word(index, +1)
            touched_pairs.update(zip(new_symbols, new_symbols[1:]))
        yield first, second, merged
        if score_uses_symbol_counts:
            for symbol in touched_symbols:
                touched_pairs.update(symbol_pairs.get(symbol, ()))
        for touched in touched_pairs:
            if pair_counts.get(touched, 0) <= 0:
                pair_counts.pop(touched, None)
                pair_words.pop(touched, None)
                symbol_pairs[touched[0]].discard(touched)
                symbol_pairs[touched[1]].discard(touched)
                stamps[touched] += 1
            else:
                push(touched)
