"""WordPiece vocabulary learning by greedy likelihood merges (plain Python, at build time only)."""

import collections
import math

from keras_tfm.checks import check_positive_int
from keras_tfm.tokenizers.corpus import Corpus, count_words
from keras_tfm.tokenizers.pair_merges import greedy_pair_merges
from keras_tfm.tokenizers.special_tokens import NUM_SPECIAL_TOKENS


def learn_wordpiece_vocabulary(
    corpus: Corpus,
    vocabulary_size: int,
    lowercase: bool = True,
    special_tokens: bool = True,
    suffix_indicator: str = "##",
    min_frequency: int = 1,
    max_unique_words: int | None = None,
) -> list[str]:
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

    def gain(count, first_count, second_count, total):
        return count * (math.log(count) + math.log(total) - math.log(first_count * second_count))

    def join(first, second):
        return first + second[len(ind) :]

    if len(vocabulary) >= budget:
        return vocabulary
    for _, _, merged in greedy_pair_merges(words, word_counts, symbol_counts, gain, join):
        if merged not in in_vocabulary:
            vocabulary.append(merged)
            in_vocabulary.add(merged)
            if len(vocabulary) >= budget:
                break
    return vocabulary
