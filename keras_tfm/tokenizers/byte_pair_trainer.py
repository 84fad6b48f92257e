"""Byte-level BPE learning (Sennrich et al., 2016; GPT-2's byte alphabet), plain Python at build time."""

import collections

from keras_tfm.checks import check_positive_int
from keras_tfm.tokenizers.byte_level import bytes_to_unicode, gpt2_class_tables, split_pieces
from keras_tfm.tokenizers.corpus import Corpus, string_batches
from keras_tfm.tokenizers.pair_merges import greedy_pair_merges
from keras_tfm.tokenizers.special_tokens import NUM_SPECIAL_TOKENS


def learn_byte_pair_vocabulary(
    corpus: Corpus, vocabulary_size: int, special_tokens: bool = True, min_frequency: int = 1
) -> tuple[list[str], list[str]]:
    """Learns a byte-level BPE vocabulary and its merges from a corpus.

    The text is cut into pieces by GPT-2's pre-tokenization regex (the one
    `BytePairTokenizer` applies: a word keeps the space in front of it), each
    piece becomes its UTF-8 bytes written as GPT-2's printable byte
    characters, and, until the vocabulary is full, the most frequent adjacent
    pair is merged into a new token (ties: the alphabetically first pair):

        merge = argmax_(a, b) count(ab)

    The 256 byte characters are always in the vocabulary, so every text is
    tokenized without an unknown token and detokenized to its exact bytes.
    Case is kept.

    Args:
        corpus: a str, a list of str, or a `tf.data.Dataset` of strings.
        vocabulary_size: target size, the 256 byte characters (and the special
            tokens) included; the result is smaller when the corpus runs out
            of pairs.
        special_tokens: whether the tokenizer will reserve ids 0..6 (counted
            in `vocabulary_size`, not returned).
        min_frequency: ignore pieces seen fewer times.

    Returns:
        `(vocabulary, merges)`, ready for `BytePairTokenizer(vocabulary,
        merges, special_tokens=special_tokens)`: the tokens (without the
        special tokens) and the merge rules `"left right"` in rank order.
    """
    check_positive_int("vocabulary_size", vocabulary_size)
    check_positive_int("min_frequency", min_frequency)
    byte_chars = bytes_to_unicode()
    alphabet = [byte_chars[b] for b in range(256)]
    budget = vocabulary_size - (NUM_SPECIAL_TOKENS if special_tokens else 0) - len(alphabet)
    if budget < 0:
        raise ValueError(
            f"`vocabulary_size` must hold the 256 byte characters"
            f"{' and the 7 special tokens' if special_tokens else ''}; received {vocabulary_size}."
        )
    class_tables = gpt2_class_tables()
    counts = collections.Counter()
    for batch in string_batches(corpus):
        counts.update(split_pieces(batch, *class_tables).flat_values.numpy().tolist())
    items = sorted(((p, c) for p, c in counts.items() if c >= min_frequency), key=lambda pc: (-pc[1], pc[0]))
    if not counts:
        raise ValueError("`corpus` holds no text.")
    words = [[byte_chars[b] for b in piece] for piece, _ in items]
    word_counts = [c for _, c in items]
    vocabulary, merges = list(alphabet), []
    if budget == 0:
        return vocabulary, merges
    known = set(vocabulary)

    def frequency(count, first_count, second_count, total):
        return count

    def join(first, second):
        return first + second

    merge_steps = greedy_pair_merges(
        words, word_counts, collections.Counter(), frequency, join, score_uses_symbol_counts=False
    )
    for first, second, merged in merge_steps:
        merges.append(f"{first} {second}")
        if merged not in known:
            vocabulary.append(merged)
            known.add(merged)
        if len(vocabulary) - len(alphabet) >= budget:
            break
    return vocabulary, merges
