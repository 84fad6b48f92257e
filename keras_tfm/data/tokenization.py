"""Tokenization inside tf.data: `tokenize_dataset` tokenizes the string components of a dataset."""

import tensorflow as tf

from keras_tfm.checks import check_positive_int
from keras_tfm.data.dataset_common import AUTOTUNE, dense_components, map_components
from keras_tfm.tokenizers.base import Tokenizer


def tokenize_dataset(
    dataset: tf.data.Dataset,
    tokenizer: Tokenizer | tuple[Tokenizer | None, ...],
    batch_size: int = 256,
    max_length: int | None = None,
) -> tf.data.Dataset:
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
        max_length: optional fixed length (pad/truncate) passed to the
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
            return tok(value, max_length=max_length)
        return value

    def tokenize(elem):
        if tokenizers is not None:
            return tuple(
                tf.nest.map_structure(lambda v, t=t: apply(t, v), part) for t, part in zip(tokenizers, elem)
            )
        return tf.nest.map_structure(lambda v: apply(tokenizer, v), elem)

    batched = map_components(dataset.batch(batch_size), tokenize, num_parallel_calls=AUTOTUNE)
    return dense_components(batched.unbatch())
