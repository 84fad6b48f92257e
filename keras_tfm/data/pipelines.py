"""tf.data pipelines for Transformer training: LM windows, seq2seq pairs, padding, bucketing
(MLM masking: `keras_tfm.data.mlm_masking`).

Every function returns a `tf.data.Dataset` built from TensorFlow ops only (no
per-example Python), ending with a small `prefetch` unless `prefetch=False`.
Token id 0 is padding everywhere (`special_tokens.PAD`). Randomness is
stateless and seeded (`tf.random.stateless_*` with seeds made from a base seed
and the batch/element counter), so a pipeline built with the same `seed`
yields the same data.

tf.data autotuning is switched off in the returned datasets (`_finish`): these
pipelines are light (gathers from in-memory tensors), and on a small CPU the
autotuner's background thread competes with the training step for the same
cores; deleting an iterator also waits for its current optimization round,
which stalled `model.fit` for seconds at the end of every call. Measured on the
2-core machine of `bench/RESULTS.md`: 34.0 ms per GPT training step with
`lm_windows` below, 51 ms (median, 33-60) with one autotuned `map` call per
batch. Re-enable it with `dataset.with_options(...)` for heavy pipelines.
"""

import random

import tensorflow as tf

from keras_tfm.checks import check_positive_int
from keras_tfm.data.special_tokens import BOS, EOS, PAD

AUTOTUNE = tf.data.AUTOTUNE


def resolve_seed(seed):
    if seed is None:
        return random.SystemRandom().randrange(2**31)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"`seed` must be an int or None; received {seed!r}.")
    return seed


#: Random LM batches drawn per tf.data map call in `lm_windows`.
RANDOM_BATCHES_PER_CALL = 64
#: Batches prefetched at the end of every pipeline.
PREFETCH_BATCHES = 2


def _finish(dataset, prefetch):
    """Turns off autotuning (see the module docstring) and prefetches a couple of batches."""
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = dataset.with_options(options)
    return dataset.prefetch(PREFETCH_BATCHES) if prefetch else dataset


def _map_components(dataset, fn, **kwargs):
    """Maps `fn(structure)` over a dataset whose elements may be tuples (which tf.data unpacks)."""
    return dataset.map(lambda *elem: fn(elem[0] if len(elem) == 1 else elem), **kwargs)


def check_integer_tensor(name, tensor):
    if not tensor.dtype.is_integer:
        raise TypeError(f"`{name}` must hold integer token ids; received dtype {tensor.dtype.name}.")
    return tensor


# --------------------------------------------------------------------------- #
# Tokenization inside tf.data.
# --------------------------------------------------------------------------- #


def tokenize_dataset(dataset, tokenizer, batch_size=256, sequence_length=None):
    """Tokenizes the string components of a dataset, batched for speed.

    Elements may be a string, a tuple such as `(source, target)` or
    `(text, label)`, or a dict; every scalar string component is tokenized and
    every other component is passed through. The dataset is batched,
    tokenized with one vectorised call per batch and unbatched again, so each
    output element holds a 1-D int32 id tensor per string.

    Args:
        dataset: `tf.data.Dataset` with scalar string components.
        tokenizer: a keras_tfm tokenizer, or for tuple elements a tuple with
            one tokenizer (or None to keep the component) per position.
        batch_size: strings tokenized per call.
        sequence_length: optional fixed length (pad/truncate) passed to the
            tokenizer.

    Returns:
        A `tf.data.Dataset` of the same structure with ids for strings.
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset; received {type(dataset).__name__}.")
    check_positive_int("batch_size", batch_size)
    spec = dataset.element_spec
    if isinstance(tokenizer, (tuple, list)):
        if not isinstance(spec, tuple) or len(spec) != len(tokenizer):
            raise ValueError(
                f"`tokenizer` is a sequence of {len(tokenizer)} tokenizers but the dataset elements are {spec}."
            )
        tokenizers = tuple(tokenizer)
    else:
        tokenizers = tuple(tokenizer for _ in spec) if isinstance(spec, tuple) else None
    for component in tf.nest.flatten(spec):
        if component.dtype == tf.string and component.shape.rank != 0:
            raise ValueError(f"`dataset` string components must be scalars; received {component}.")

    def apply(tok, value):
        if tok is not None and value.dtype == tf.string:
            return tok(value, sequence_length=sequence_length)
        return value

    def tokenize(elem):
        if tokenizers is not None:
            return tuple(
                tf.nest.map_structure(lambda v, t=t: apply(t, v), part) for t, part in zip(tokenizers, elem)
            )
        return tf.nest.map_structure(lambda v: apply(tokenizer, v), elem)

    batched = _map_components(dataset.batch(batch_size), tokenize, num_parallel_calls=AUTOTUNE)
    return _dense_components(batched.unbatch())


# --------------------------------------------------------------------------- #
# Language-model windows.
# --------------------------------------------------------------------------- #


def _token_stream(ids_or_dataset):
    if isinstance(ids_or_dataset, tf.data.Dataset):
        ids_or_dataset = _dense_components(ids_or_dataset)
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
    ids_or_dataset,
    sequence_length,
    batch_size,
    shuffle=True,
    seed=None,
    random_offsets=True,
    drop_remainder=False,
    repeat=False,
    prefetch=True,
):
    """Next-token windows `(x, y)` from a token stream, with `y` = `x` shifted by one.

    Two variants:

    * `random_offsets=True` (nanoGPT's `get_batch`): every batch draws
      `batch_size` random start offsets in `[0, n - sequence_length)`
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
        sequence_length: window length `T`.
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
    check_positive_int("sequence_length", sequence_length)
    check_positive_int("batch_size", batch_size)
    seed = resolve_seed(seed)
    tokens = _token_stream(ids_or_dataset)
    n = int(tokens.shape[0])
    if n < sequence_length + 1:
        raise ValueError(
            f"`sequence_length` ({sequence_length}) needs a stream of at least {sequence_length + 1} tokens; "
            f"received {n}."
        )
    window = tf.range(sequence_length + 1, dtype=tf.int64)

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
                maxval=n - sequence_length,
                dtype=tf.int64,
            )
            return split(tf.gather(tokens, offsets[..., None] + window))

        dataset = tf.data.Dataset.counter().map(random_batches).unbatch()
        return _finish(dataset, prefetch)

    count = (n - 1) // sequence_length
    starts = tf.data.Dataset.range(count)
    if shuffle:
        starts = starts.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        starts = starts.repeat()
    dataset = starts.batch(batch_size, drop_remainder=drop_remainder).map(
        lambda index: split(tf.gather(tokens, index[:, None] * sequence_length + window[None, :])),
        num_parallel_calls=AUTOTUNE,
    )
    return _finish(dataset, prefetch)


# --------------------------------------------------------------------------- #


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
            return _dense_components(source_ids)
        if not isinstance(target_ids, tf.data.Dataset):
            raise TypeError("`target_ids` must be a tf.data.Dataset when `source_ids` is one.")
        return _dense_components(tf.data.Dataset.zip((source_ids, target_ids)))
    if target_ids is None:
        raise ValueError("`target_ids` is required unless `source_ids` is a dataset of pairs.")
    source = _as_ragged_ids("source_ids", source_ids)
    target = _as_ragged_ids("target_ids", target_ids)
    if int(source.nrows()) != int(target.nrows()):
        raise ValueError(
            f"`source_ids` and `target_ids` must hold as many sequences; received {int(source.nrows())} and "
            f"{int(target.nrows())}."
        )
    return _dense_components(tf.data.Dataset.from_tensor_slices((source, target)))


def seq2seq_pairs(
    source_ids,
    target_ids=None,
    batch_size=64,
    source_length=None,
    target_length=None,
    bos_id=BOS,
    eos_id=EOS,
    shuffle=False,
    buffer_size=10_000,
    seed=None,
    drop_remainder=False,
    sample_weights=False,
    cache=False,
    prefetch=True,
):
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
    return _finish(dataset.map(prepare, num_parallel_calls=AUTOTUNE), prefetch)


# --------------------------------------------------------------------------- #
# Padding and bucketing.
# --------------------------------------------------------------------------- #


def _padding_values(spec, padding_value):
    def value(component):
        if component.dtype == tf.string:
            return tf.constant("", tf.string)
        return tf.cast(padding_value, component.dtype)

    return tf.nest.map_structure(value, spec)


def _dense_components(dataset):
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
        dataset = _map_components(dataset, lambda elem: tf.nest.map_structure(tf.identity, elem))
    return dataset


def pad_and_batch(
    dataset, batch_size, sequence_length=None, padding_value=PAD, drop_remainder=False, prefetch=True
):
    """Batches variable-length sequences, padding every rank>=1 component.

    Each sequence component (e.g. ids from `tokenize_dataset`) is padded with
    `padding_value` to the longest in its batch, or truncated and padded to
    exactly `sequence_length` when given. Scalar components (labels) are
    batched as they are. Works for tensors, tuples and dicts.

    Args:
        dataset: `tf.data.Dataset` of unbatched elements.
        batch_size: elements per batch.
        sequence_length: optional fixed length of the first axis.
        padding_value: pad value for numeric components ("" for strings).
        drop_remainder: drop the last, smaller batch.
        prefetch: end with a prefetch of `PREFETCH_BATCHES` batches.

    Returns:
        The batched dataset.
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset; received {type(dataset).__name__}.")
    check_positive_int("batch_size", batch_size)
    check_positive_int("sequence_length", sequence_length, allow_none=True)
    dataset = _dense_components(dataset)
    spec = dataset.element_spec
    if sequence_length is not None:
        dataset = _map_components(
            dataset,
            lambda elem: tf.nest.map_structure(
                lambda x: x[:sequence_length] if x.shape.rank >= 1 else x, elem
            ),
            num_parallel_calls=AUTOTUNE,
        )
    padded_shapes = tf.nest.map_structure(
        lambda s: (
            tf.TensorShape([sequence_length]).concatenate(s.shape[1:]) if s.shape.rank >= 1 else s.shape
        ),
        spec,
    )
    dataset = dataset.padded_batch(
        batch_size,
        padded_shapes=padded_shapes,
        padding_values=_padding_values(spec, padding_value),
        drop_remainder=drop_remainder,
    )
    return _finish(dataset, prefetch)


def bucket_by_length(
    dataset,
    boundaries,
    batch_sizes,
    length_fn=None,
    padding_value=PAD,
    pad_to_bucket_boundary=False,
    drop_remainder=False,
    prefetch=True,
):
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
    dataset = _dense_components(dataset)
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
        padding_values=_padding_values(spec, padding_value),
        pad_to_bucket_boundary=pad_to_bucket_boundary,
        drop_remainder=drop_remainder,
    )
    return _finish(dataset, prefetch)
