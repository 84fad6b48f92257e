"""WordPiece vocabulary learning by greedy likelihood merges (plain Python, at build time only)."""

import collections
import heapq
import math

from keras_tfm.checks import check_positive_int
from keras_tfm.data.special_tokens import NUM_SPECIAL_TOKENS
from keras_tfm.data.tokenizers.corpus import count_words


def learn_wordpiece_vocabulary(
    corpus,
    vocabulary_size,
    lowercase=True,
    special_tokens=True,
    suffix_indicator="##",
    min_frequency=1,
    max_unique_words=None,
):
    """Learns a WordPiece vocabulary by greedy likelihood merges.

    Words are counted with `split_words` (TF ops, batched). Every word starts
    as its characters (`"low"` -> `l ##o ##w`); all these characters form the
    initial alphabet. Then, until the vocabulary is full, the adjacent pair
    `(a, b)` whose merge most increases the corpus likelihood under a unigram
    piece model (WordPiece's criterion, Schuster & Nakajima 2012) is merged
    into a new piece:

        gain(a, b) = count(ab) * log(count(ab) * N / (count(a) * count(b)))

    with `N` the initial number of symbols. (The bare ratio
    `count(ab) / (count(a) * count(b))` that is sometimes quoted favours rare
    pairs and spends a small vocabulary on rare words; weighting by
    `count(ab)` keeps frequent words whole.) Ties go to the more frequent
    pair, then the alphabetically first. Pair and symbol counts are updated
    incrementally and the best pair is kept in a lazily invalidated heap.
    Only this learning runs in Python; tokenization with the result is pure
    TF.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
        vocabulary_size: target size, special tokens included (the result can
            be smaller when the corpus runs out of pairs).
        lowercase: lower-case words (must match the tokenizer's).
        special_tokens: whether the tokenizer will reserve ids 0..6 (they are
            counted in `vocabulary_size` but not returned).
        suffix_indicator: prefix of continuation pieces.
        min_frequency: ignore words seen fewer times.
        max_unique_words: keep only this many most frequent words.

    Returns:
        The list of pieces (without the special tokens), ready for
        `WordPieceTokenizer(vocabulary=...)`.
    """
    check_positive_int("vocabulary_size", vocabulary_size)
    check_positive_int("min_frequency", min_frequency)
    check_positive_int("max_unique_words", max_unique_words, allow_none=True)
    budget = vocabulary_size - (NUM_SPECIAL_TOKENS if special_tokens else 0)
    if budget <= 0:
        raise ValueError(
            f"`vocabulary_size` must exceed the {NUM_SPECIAL_TOKENS} special tokens; received {vocabulary_size}."
        )
    counts = count_words(corpus, lowercase=lowercase)
    items = sorted(((w, c) for w, c in counts.items() if c >= min_frequency), key=lambda wc: (-wc[1], wc[0]))
    if max_unique_words is not None:
        items = items[:max_unique_words]
    if not items:
        raise ValueError("`corpus` holds no words (after `min_frequency`).")

    ind = suffix_indicator
    words = [[w[0]] + [ind + ch for ch in w[1:]] for w, _ in items]
    word_counts = [c for _, c in items]

    symbol_counts = collections.Counter()
    for symbols, count in zip(words, word_counts):
        for symbol in symbols:
            symbol_counts[symbol] += count
    alphabet = sorted(symbol_counts, key=lambda s: (-symbol_counts[s], s))
    vocabulary = alphabet[:budget]
    if len(alphabet) > budget:
        return vocabulary
    in_vocabulary = set(vocabulary)

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

    log_total = math.log(sum(symbol_counts.values()))
    heap = []
    stamps = collections.Counter()

    def push(pair):
        count = pair_counts.get(pair, 0)
        stamps[pair] += 1
        if count > 0:
            score = count * (
                math.log(count) + log_total - math.log(symbol_counts[pair[0]] * symbol_counts[pair[1]])
            )
            heapq.heappush(heap, (-score, -count, pair, stamps[pair]))

    for pair in list(pair_counts):
        push(pair)

    while len(vocabulary) < budget and heap:
        _, _, pair, stamp = heapq.heappop(heap)
        if stamp != stamps[pair] or pair_counts.get(pair, 0) <= 0:
            continue
        first, second = pair
        merged = first + second[len(ind) :]
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
        if merged not in in_vocabulary:
            vocabulary.append(merged)
            in_vocabulary.add(merged)
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
    return vocabulary
