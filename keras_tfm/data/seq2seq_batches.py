"""Teacher-forcing batches for an encoder-decoder model: `seq2seq_pairs`."""

import tensorflow as tf

from keras_tfm.checks import check_positive_int
from keras_tfm.data.dataset_common import (
    AUTOTUNE,
    Ids,
    check_integer_tensor,
    dense_components,
    finish_pipeline,
)
from keras_tfm.tokenizers.special_tokens import BOS, EOS, PAD


def _as_ragged_ids(name, ids):
    if isinstance(ids, tf.RaggedTensor):
        ragged = ids
    elif isinstance(ids, tf.Tensor) or hasattr(ids, "dtype"):
        dense = tf.convert_to_tensor(ids)
        if dense.shape.rank != 2:
            raise ValueError(f"`{name}` must be [num_sequences, length] ids; received shape {dense.shape}.")
        ragged = tf.RaggedTensor.from_tensor(dense, padding=tf.cast(PAD, dense.dtype))
    else:
        try:
            ragged = tf.ragged.constant(list(ids))
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"`{name}` must be a list of id sequences, a RaggedTensor or a dataset."
            ) from error
        if not isinstance(ragged, tf.RaggedTensor):
            raise ValueError(f"`{name}` must be a list of id sequences; received {ids!r}.")
    if ragged.shape.rank != 2:
        raise ValueError(f"`{name}` must be [num_sequences, None] ids; received shape {ragged.shape}.")
    check_integer_tensor(name, ragged.flat_values)
    return ragged


def _pair_dataset(source_ids, target_ids):
    if isinstance(source_ids, tf.data.Dataset):
        if target_ids is None:
            spec = source_ids.element_spec
            if not isinstance(spec, tuple) or len(spec) != 2:
                raise ValueError(
                    f"`source_ids` must yield (source, target) pairs when `target_ids` is None; got {spec}."
                )
            return dense_components(source_ids)
        if not isinstance(target_ids, tf.data.Dataset):
            raise TypeError("`target_ids` must be a tf.data.Dataset when `source_ids` is one.")
        return dense_components(tf.data.Dataset.zip((source_ids, target_ids)))
    if target_ids is None:
        raise ValueError("`target_ids` is required unless `source_ids` is a dataset of pairs.")
    source = _as_ragged_ids("source_ids", source_ids)
    target = _as_ragged_ids("target_ids", target_ids)
    if int(source.nrows()) != int(target.nrows()):
        raise ValueError(
            f"`source_ids` and `target_ids` must hold as many sequences; received {int(source.nrows())} and "
            f"{int(target.nrows())}."
        )
    return dense_components(tf.data.Dataset.from_tensor_slices((source, target)))


def seq2seq_pairs(
    source_ids: Ids | tf.data.Dataset,
    target_ids: Ids | tf.data.Dataset | None = None,
    batch_size: int = 64,
    source_length: int | None = None,
    target_length: int | None = None,
    bos_id: int = BOS,
    eos_id: int = EOS,
    shuffle: bool = False,
    buffer_size: int = 10_000,
    seed: int | None = None,
    drop_remainder: bool = False,
    sample_weights: bool = False,
    cache: bool = False,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Teacher-forcing batches for an encoder-decoder model.

    For each pair: `encoder_token_ids = source`, `decoder_token_ids = [BOS] +
    target`, `labels = target + [EOS]`, so position t of the decoder input is
    the token before label t. With `target_length`, the target is truncated to
    `target_length - 1` tokens first so both decoder sequences are exactly
    `target_length` long (after padding); `source_length` truncates the
    source. Sequences are padded with 0, to the longest in the batch or to the
    fixed lengths.

    Args:
        source_ids: source id sequences: a list of lists, a RaggedTensor, a
            dense `[N, L]` tensor (trailing 0s are padding), a dataset of 1-D
            id tensors, or a dataset of `(source, target)` pairs.
        target_ids: the targets, in the same forms; None when `source_ids`
            already yields pairs.
        batch_size: pairs per batch.
        source_length: optional fixed encoder length.
        target_length: optional fixed decoder length.
        bos_id: id put in front of the decoder input.
        eos_id: id appended to the labels.
        shuffle: shuffle pairs (buffer `buffer_size`, `seed`) before batching.
        buffer_size: shuffle buffer.
        seed: shuffle seed.
        drop_remainder: drop the last, smaller batch.
        sample_weights: also yield float32 weights `labels != 0`.
        cache: cache the pairs in memory (before shuffling).
        prefetch: end with a prefetch of `PREFETCH_BATCHES` batches.

    Returns:
        A dataset of `({"encoder_token_ids", "decoder_token_ids"}, labels)`
        (plus `sample_weight` when asked), int32.
    """
    check_positive_int("batch_size", batch_size)
    check_positive_int("source_length", source_length, allow_none=True)
    check_positive_int("target_length", target_length, allow_none=True)
    check_positive_int("buffer_size", buffer_size)
    if target_length is not None and target_length < 2:
        raise ValueError(
            f"`target_length` must be at least 2 (BOS/EOS plus one token); received {target_length}."
        )
    pairs = _pair_dataset(source_ids, target_ids)
    for spec in pairs.element_spec:
        if not isinstance(spec, tf.TensorSpec) or not spec.dtype.is_integer or spec.shape.rank != 1:
            raise TypeError(f"seq2seq pairs must be 1-D integer id tensors; received {spec}.")

    if cache:
        pairs = pairs.cache()
    if shuffle:
        pairs = pairs.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True)

    def prepare(source, target):  # [B, None] ragged batches, processed as a whole
        source = tf.cast(source, tf.int32)
        target = tf.cast(target, tf.int32)
        if source_length is not None:
            source = source[:, :source_length]
        if target_length is not None:
            target = target[:, : target_length - 1]
        rows = target.nrows(out_type=tf.int32)
        bos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(bos_id, tf.int32)))
        eos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(eos_id, tf.int32)))
        decoder_inputs = tf.concat([bos, target], axis=1).to_tensor(PAD, shape=[None, target_length])
        labels = tf.concat([target, eos], axis=1).to_tensor(PAD, shape=[None, target_length])
        features = {
            "encoder_token_ids": source.to_tensor(PAD, shape=[None, source_length]),
            "decoder_token_ids": decoder_inputs,
        }
        if sample_weights:
            return features, labels, tf.cast(labels != PAD, tf.float32)
        return features, labels

    dataset = pairs.ragged_batch(batch_size, drop_remainder=drop_remainder)
    return finish_pipeline(dataset.map(prepare, num_parallel_calls=AUTOTUNE), prefetch)
