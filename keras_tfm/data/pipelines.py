"""tf.data pipelines for Transformer training (this module is their index):

    tokenization     tokenize_dataset
    lm_batches       lm_windows
    seq2seq_batches  seq2seq_pairs
    padding          pad_and_batch, bucket_by_length
    mlm_masking      mlm_mask
    dataset_common   what they share: seeds, integer checks, dense components, the finish

Every function returns a `tf.data.Dataset` built from TensorFlow ops only (no
per-example Python), ending with a small `prefetch` unless `prefetch=False`.
Token id 0 is padding everywhere (`special_tokens.PAD`). Randomness is
stateless and seeded (`tf.random.stateless_*` with seeds made from a base seed
and the batch/element counter), so a pipeline built with the same `seed`
yields the same data.

tf.data autotuning is switched off in the returned datasets (`dataset_common.finish_pipeline`): these
pipelines are light (gathers from in-memory tensors), and on a small CPU the
autotuner's background thread competes with the training step for the same
cores; deleting an iterator also waits for its current optimization round,
which stalled `model.fit` for seconds at the end of every call. Measured on the
2-core machine of `bench/RESULTS.md`: 34.0 ms per GPT training step with
`lm_windows` below, 51 ms (median, 33-60) with one autotuned `map` call per
batch. Re-enable it with `dataset.with_options(...)` for heavy pipelines.
"""

from keras_tfm.data.dataset_common import (  # noqa: F401
    AUTOTUNE,
    PREFETCH_BATCHES,
    RANDOM_BATCHES_PER_CALL,
    check_integer_tensor,
    resolve_seed,
)
from keras_tfm.data.lm_batches import lm_windows
from keras_tfm.data.padding import bucket_by_length, pad_and_batch
from keras_tfm.data.seq2seq_batches import seq2seq_pairs
from keras_tfm.data.tokenization import tokenize_dataset

__all__ = ["bucket_by_length", "lm_windows", "pad_and_batch", "seq2seq_pairs", "tokenize_dataset"]
