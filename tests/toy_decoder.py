"""A toy decoder for the decoding loops' tests: the protocol of `keras_tfm.generation.generator`
(`vocabulary_size`, `max_length`, `position`, `init_caches`, `decode_step`) over a cache-free
function of the last token, so the loops run on hand-built models whose answers are known."""

from keras import ops


class ToyDecoder:
    """`logits_fn(last_token, position)`: int32 `(batch,)` tokens and their true positions →
    float32 `(batch, vocab)` logits of the next token."""

    position = None

    def __init__(self, logits_fn, vocabulary_size, max_length=None):
        self.logits_fn = logits_fn
        self.vocabulary_size = int(vocabulary_size)
        self.max_length = max_length

    def init_caches(self, batch_size, length):
        return []

    def decode_step(self, ids, positions, caches, cache_index, padding_mask, context=None):
        return ops.cast(self.logits_fn(ids[:, -1], positions[:, -1]), "float32"), caches
