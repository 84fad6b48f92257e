"""Padding and bucketing: `pad_and_batch` and `bucket_by_length` batch variable-length examples."""

from collections.abc import Callable, Sequence

import tensorflow as tf

from keras_tfm.checks import check_positive_int
from keras_tfm.data.dataset_common import AUTOTUNE, dense_components, finish_pipeline, map_components
from keras_tfm.tokenizers.special_tokens import PAD


def padding_values(spec, padding_value):
    def value(component):
        if component.dtype == tf.string:
            return tf.constant("", tf.string)
        return tf.cast(padding_value, component.dtype)

    return tf.nest.map_structure(value, spec)


def pad_and_batch(
    dataset: tf.data.Dataset,
    batch_size: int,
    max_length: int | None = None,
    padding_value: int | str = PAD,
    drop_remainder: bool = False,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Batches variable-length sequences, padding every rank>=1 component.

    Each sequence component (e.g. ids from `tokenize_dataset`) is padded with
    `padding_value` to the longest in its batch, or truncated and padded to
    exactly `max_length` when given. Scalar components (labels) are
    batched as they are. Works for tensors, tuples and dicts.

    Args:
        dataset: `tf.data.Dataset` of unbatched elements.
        batch_size: elements per batch.
        max_length: optional fixed length of the first axis.
        padding_value: pad value for numeric components ("" for strings).
        drop_remainder: drop the last, smaller batch.
        prefetch: end with a prefetch of `PREFETCH_BATCHES` batches.

    Returns:
        The batched dataset.
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset; received {type(dataset).__name__}.")
    check_positive_int("batch_size", batch_size)
    check_positive_int("max_length", max_length, allow_none=True)
    dataset = dense_components(dataset)
    spec = dataset.element_spec
    if max_length is not None:
        dataset = map_components(
            dataset,
            lambda elem: tf.nest.map_structure(lambda x: x[:max_length] if x.shape.rank >= 1 else x, elem),
            num_parallel_calls=AUTOTUNE,
        )
    padded_shapes = tf.nest.map_structure(
        lambda s: tf.TensorShape([max_length]).concatenate(s.shape[1:]) if s.shape.rank >= 1 else s.shape,
        spec,
    )
    dataset = dataset.padded_batch(
        batch_size,
        padded_shapes=padded_shapes,
        padding_values=padding_values(spec, padding_value),
        drop_remainder=drop_remainder,
    )
    return finish_pipeline(dataset, prefetch)


def bucket_by_length(
    dataset: tf.data.Dataset,
    boundaries: Sequence[int],
    batch_sizes: Sequence[int],
    length_fn: Callable[..., tf.Tensor] | None = None,
    padding_value: int | str = PAD,
    pad_to_bucket_boundary: bool = False,
    drop_remainder: bool = False,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Groups sequences of similar length into batches (less padding), via `bucket_by_sequence_length`.

    An element of length `L` goes to bucket `i` where
    `boundaries[i-1] <= L < boundaries[i]` (bucket 0 below `boundaries[0]`, the
    last bucket at or above `boundaries[-1]`); bucket `i` is batched
    `batch_sizes[i]` at a time and padded with `padding_value` to its longest
    element (or to its upper boundary - 1 with `pad_to_bucket_boundary`).

    Args:
        dataset: `tf.data.Dataset` of unbatched elements.
        boundaries: increasing positive ints.
        batch_sizes: `len(boundaries) + 1` batch sizes.
        length_fn: element -> int32 length (receives tuple elements
            unpacked); default: the longest rank>=1 component.
        padding_value: pad value for numeric components.
        pad_to_bucket_boundary: pad to the bucket's boundary instead of its
            longest element (elements must then be shorter than
            `boundaries[-1]`).
        drop_remainder: drop each bucket's last, smaller batch.
        prefetch: end with a prefetch of `PREFETCH_BATCHES` batches.

    Returns:
        The bucketed, batched dataset.
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset; received {type(dataset).__name__}.")
    boundaries = list(boundaries)
    batch_sizes = list(batch_sizes)
    if not boundaries:
        raise ValueError("`boundaries` must not be empty.")
    for i, boundary in enumerate(boundaries):
        check_positive_int(f"boundaries[{i}]", boundary)
    if any(later <= earlier for earlier, later in zip(boundaries, boundaries[1:])):
        raise ValueError(f"`boundaries` must be strictly increasing; received {boundaries}.")
    if len(batch_sizes) != len(boundaries) + 1:
        raise ValueError(
            f"`batch_sizes` must have len(boundaries) + 1 = {len(boundaries) + 1} entries; received {len(batch_sizes)}."
        )
    for i, size in enumerate(batch_sizes):
        check_positive_int(f"batch_sizes[{i}]", size)
    dataset = dense_components(dataset)
    spec = dataset.element_spec
    if length_fn is None:
        if not any(s.shape.rank >= 1 for s in tf.nest.flatten(spec)):
            raise ValueError("`dataset` has no sequence (rank >= 1) component to measure; pass `length_fn`.")

        def length_fn(*elem):
            lengths = [tf.shape(x)[0] for x in tf.nest.flatten(elem) if x.shape.rank >= 1]
            return tf.reduce_max(tf.stack(lengths))

    dataset = dataset.bucket_by_sequence_length(
        element_length_func=length_fn,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=batch_sizes,
        padding_values=padding_values(spec, padding_value),
        pad_to_bucket_boundary=pad_to_bucket_boundary,
        drop_remainder=drop_remainder,
    )
    return finish_pipeline(dataset, prefetch)
