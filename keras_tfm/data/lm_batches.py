"""Language-model windows: `lm_windows` cuts next-token `(x, y)` windows from a token stream."""

import tensorflow as tf

from keras_tfm.checks import check_positive_int
from keras_tfm.data.dataset_common import (
    AUTOTUNE,
    RANDOM_BATCHES_PER_CALL,
    check_integer_tensor,
    dense_components,
    finish_pipeline,
    resolve_seed,
)


def _token_stream(ids_or_dataset):
    if isinstance(ids_or_dataset, tf.data.Dataset):
        ids_or_dataset = dense_components(ids_or_dataset)
        spec = ids_or_dataset.element_spec
        if not isinstance(spec, tf.TensorSpec) or not spec.dtype.is_integer:
            raise TypeError(f"`ids_or_dataset` must yield integer id tensors; its element_spec is {spec}.")
        flat = ids_or_dataset.map(lambda x: tf.reshape(x, [-1])).unbatch().batch(1 << 20)
        chunks = [tf.cast(chunk, tf.int32) for chunk in flat]
        tokens = tf.concat(chunks, axis=0) if chunks else tf.zeros([0], tf.int32)
    else:
        if isinstance(ids_or_dataset, tf.RaggedTensor):
            raise TypeError(
                "`ids_or_dataset` must be a 1-D id tensor, not a RaggedTensor (use `.flat_values`)."
            )
        tokens = check_integer_tensor("ids_or_dataset", tf.convert_to_tensor(ids_or_dataset))
        if tokens.shape.rank != 1:
            raise ValueError(f"`ids_or_dataset` must be a 1-D token stream; received shape {tokens.shape}.")
        tokens = tf.cast(tokens, tf.int32)
    return tokens


def lm_windows(
    ids_or_dataset: tf.types.experimental.TensorLike | tf.data.Dataset,
    max_length: int,
    batch_size: int,
    shuffle: bool = True,
    seed: int | None = None,
    random_offsets: bool = True,
    drop_remainder: bool = False,
    repeat: bool = False,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Next-token windows `(x, y)` from a token stream, with `y` = `x` shifted by one.

    Two variants:

    * `random_offsets=True` (nanoGPT's `get_batch`): every batch draws
      `batch_size` random start offsets in `[0, n - max_length)`
      (stateless uniform; batch `i` depends only on `seed` and `i`, drawn
      `RANDOM_BATCHES_PER_CALL` batches at a time) and gathers
      `x = ids[o : o + T]`, `y = ids[o + 1 : o + T + 1]`. The dataset is
      infinite; use `.take(steps)`, and `.skip(i)` to resume at batch `i`.
    * `random_offsets=False` (evaluation): the non-overlapping windows starting
      at 0, T, 2T, ... (`(n - 1) // T` of them; each target token is predicted
      exactly once), optionally shuffled, batched, and repeated when `repeat`.

    The whole stream is held in memory (as a constant of the dataset graph),
    as nanoGPT does; fine for corpora of up to ~10^8 tokens.

    Args:
        ids_or_dataset: 1-D integer ids (tensor, array or list), or a
            `tf.data.Dataset` of id tensors that are concatenated in order.
        max_length: window length `T`.
        batch_size: windows per batch `B`.
        shuffle: shuffle the window order (deterministic variant only).
        seed: int seed; None draws one.
        random_offsets: choose the variant (see above).
        drop_remainder: drop a last, smaller batch (deterministic variant).
        repeat: repeat the deterministic variant forever.
        prefetch: end with a prefetch of `PREFETCH_BATCHES` batches.

    Returns:
        A `tf.data.Dataset` of `(x, y)`, int32 `[B, T]` each.
    """
    check_positive_int("max_length", max_length)
    check_positive_int("batch_size", batch_size)
    seed = resolve_seed(seed)
    tokens = _token_stream(ids_or_dataset)
    n = int(tokens.shape[0])
    if n < max_length + 1:
        raise ValueError(
            f"`max_length` ({max_length}) needs a stream of at least {max_length + 1} tokens; received {n}."
        )
    window = tf.range(max_length + 1, dtype=tf.int64)

    def split(windows):
        return windows[..., :-1], windows[..., 1:]

    if random_offsets:
        # One map call draws RANDOM_BATCHES_PER_CALL batches (block c holds
        # batches c·K .. c·K + K − 1, offsets seeded by (seed, c)), so the
        # per-call overhead of tf.data is paid once per K steps.
        per_call = RANDOM_BATCHES_PER_CALL

        def random_batches(block):
            offsets = tf.random.stateless_uniform(
                [per_call, batch_size],
                seed=tf.stack([tf.constant(seed, tf.int64), block]),
                minval=0,
                maxval=n - max_length,
                dtype=tf.int64,
            )
            return split(tf.gather(tokens, offsets[..., None] + window))

        dataset = tf.data.Dataset.counter().map(random_batches).unbatch()
        return finish_pipeline(dataset, prefetch)

    count = (n - 1) // max_length
    starts = tf.data.Dataset.range(count)
    if shuffle:
        starts = starts.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        starts = starts.repeat()
    dataset = starts.batch(batch_size, drop_remainder=drop_remainder).map(
        lambda index: split(tf.gather(tokens, index[:, None] * max_length + window[None, :])),
        num_parallel_calls=AUTOTUNE,
    )
    return finish_pipeline(dataset, prefetch)
