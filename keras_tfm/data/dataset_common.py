"""What every tf.data pipeline of keras_tfm.data shares: seeds, integer-id checks, dense components,
and the finish (autotuning off, a small prefetch).

Every pipeline returns a `tf.data.Dataset` built from TensorFlow ops only (no
per-example Python), ending with a prefetch of `PREFETCH_BATCHES` unless
`prefetch=False`. Token id 0 is padding everywhere (`special_tokens.PAD`).
Randomness is stateless and seeded (`tf.random.stateless_*` with seeds made
from a base seed and the batch/element counter), so a pipeline built with the
same `seed` yields the same data.

tf.data autotuning is switched off in the returned datasets (`finish_pipeline`):
these pipelines are light (gathers from in-memory tensors), and on a small CPU
the autotuner's background thread competes with the training step for the same
cores; deleting an iterator also waits for its current optimization round,
which stalls `model.fit` at the end of every call (measured in
`bench/RESULTS.md`). Re-enable it with `dataset.with_options(...)` for heavy
pipelines.
"""

import random

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE

#: Token ids as the pipelines accept them: a list of lists, an array, a dense or ragged tensor.
Ids = tf.RaggedTensor | tf.types.experimental.TensorLike


def resolve_seed(seed: int | None) -> int:
    if seed is None:
        return random.SystemRandom().randrange(2**31)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"`seed` must be an int or None; received {seed!r}.")
    return seed


#: Random LM batches drawn per tf.data map call in `lm_windows`.
RANDOM_BATCHES_PER_CALL = 64
#: Batches prefetched at the end of every pipeline.
PREFETCH_BATCHES = 2


def finish_pipeline(dataset: tf.data.Dataset, prefetch: bool) -> tf.data.Dataset:
    """Turns off autotuning (see the module docstring) and prefetches `PREFETCH_BATCHES` batches."""
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = dataset.with_options(options)
    return dataset.prefetch(PREFETCH_BATCHES) if prefetch else dataset


def map_components(dataset, fn, **kwargs):
    """Maps `fn(structure)` over a dataset whose elements may be tuples (which tf.data unpacks)."""
    return dataset.map(lambda *elem: fn(elem[0] if len(elem) == 1 else elem), **kwargs)


def check_integer_tensor(name: str, tensor: tf.Tensor) -> tf.Tensor:
    if not tensor.dtype.is_integer:
        raise TypeError(f"`{name}` must hold integer token ids; received dtype {tensor.dtype.name}.")
    return tensor


def dense_components(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Returns `dataset` with 1-D ragged slices (from `from_tensor_slices(ragged)`) turned into plain tensors."""
    spec = dataset.element_spec
    needs_map = False
    for component in tf.nest.flatten(spec):
        if isinstance(component, tf.RaggedTensorSpec) and component.ragged_rank == 0:
            needs_map = True
        elif not isinstance(component, tf.TensorSpec):
            raise TypeError(f"`dataset` components must be dense tensors; received {component}.")
        if component.shape.rank is None:
            raise ValueError(f"`dataset` components need a known rank; received {component}.")
    if needs_map:
        dataset = map_components(dataset, lambda elem: tf.nest.map_structure(tf.identity, elem))
    return dataset
