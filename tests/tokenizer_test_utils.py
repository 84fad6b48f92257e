"""A tokenizer as a SavedModel: the `tf.Module` test_data.py and test_tokenizers.py save and restore."""

import numpy as np
import tensorflow as tf


def tokenizer_module(tokenizer, max_length):
    """A `tf.Module` with `encode` (strings → ids padded to `max_length`) and `decode` signatures."""

    class TokenizerModule(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(self, strings):
            return self.tokenizer(strings, max_length=max_length)

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def decode(self, ids):
            return self.tokenizer.detokenize(ids)

    return TokenizerModule(tokenizer)


def assert_saved_model_round_trip(module, inputs, expected_ids, path):
    """Saves `module` to `path`, loads it back: it encodes `inputs` to `expected_ids` and decodes those
    ids as the module's tokenizer does eagerly."""
    expected_text = module.tokenizer.detokenize(expected_ids).numpy()
    tf.saved_model.save(module, str(path))
    restored = tf.saved_model.load(str(path))
    np.testing.assert_array_equal(restored.encode(inputs).numpy(), expected_ids)
    np.testing.assert_array_equal(restored.decode(expected_ids).numpy(), expected_text)
