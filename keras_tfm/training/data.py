"""Resumable training data: `indexed_batches` and the dataset `train` feeds to `fit` at a given step."""

from collections.abc import Callable

import tensorflow as tf

from keras_tfm.data.dataset_common import PREFETCH_BATCHES


def indexed_batches(
    batch_fn: Callable[[tf.Tensor], object],
    start_step: int = 0,
    steps: int | None = None,
    seed: int = 0,
    prefetch: int = PREFETCH_BATCHES,
) -> tf.data.Dataset:
    """A resumable dataset: element `i` is `batch_fn(tf.stack([seed, i]))`.

    `batch_fn` receives a stateless-random seed (shape [2] int64) and must
    return one (already batched) element, e.g. nanoGPT-style random windows
    drawn with `tf.random.stateless_uniform`. Because element `i` depends only
    on `(seed, i)`, restarting at `start_step` gives exactly the batches an
    uninterrupted run would have seen.

    Args:
        batch_fn: `seed -> element` in TF ops.
        start_step: index of the first element.
        steps: number of elements (None: infinite).
        seed: int.
        prefetch: prefetch buffer.

    Returns:
        A `tf.data.Dataset`.
    """
    stop = tf.int64.max if steps is None else int(start_step) + int(steps)
    ds = tf.data.Dataset.range(int(start_step), stop)
    ds = ds.map(
        lambda i: batch_fn(tf.stack([tf.constant(int(seed), tf.int64), i])),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return _with_options(ds.prefetch(prefetch))


def _with_options(ds):
    """Shards by data under multi-worker strategies; no tf.data autotuning (see `keras_tfm.data.dataset_common`)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.autotune.enabled = False
    return ds.with_options(options)


def _data_at(data, start_step):
    """`data(start)` for a factory, else the dataset repeated and skipped to `start`."""
    if callable(data) and not isinstance(data, tf.data.Dataset):
        ds = data(start_step)
    else:
        ds = data.repeat()
        if start_step:
            ds = ds.skip(start_step)
    if not isinstance(ds, tf.data.Dataset):
        raise TypeError(
            f"Training data must be a tf.data.Dataset (or a factory returning one); got {type(ds)}."
        )
    return _with_options(ds.prefetch(PREFETCH_BATCHES))
