"""BERT's masked-language-model corruption as a tf.data step: `mlm_mask`.

Of the ordinary tokens, ~15 % are selected; a selected token becomes [MASK]
(80 %), a random token (10 %) or stays (10 %); the loss is taken on the
selected positions only (sample weights). Stateless and seeded like the other
pipelines (`keras_tfm.data.pipelines`).
"""

import tensorflow as tf

from keras_tfm.checks import check_closed_rate, check_open_rate, check_positive_int
from keras_tfm.data.pipelines import check_integer_tensor, resolve_seed
from keras_tfm.data.special_tokens import MASK, NUM_SPECIAL_TOKENS, PAD

# --------------------------------------------------------------------------- #
# Masked language modelling.
# --------------------------------------------------------------------------- #


def mlm_mask(
    ids,
    vocabulary_size,
    mask_rate=0.15,
    mask_token_id=MASK,
    random_token_rate=0.1,
    unchanged_rate=0.1,
    num_special_tokens=NUM_SPECIAL_TOKENS,
    seed=None,
):
    """BERT masking: select ~`mask_rate` of the ordinary tokens; 80% -> [MASK], 10% random, 10% unchanged.

    Each position holding an ordinary token (id >= `num_special_tokens`, so
    never padding or a special token) is selected independently with
    probability `mask_rate`. A selected position becomes `mask_token_id` with
    probability `1 - random_token_rate - unchanged_rate`, a uniformly random
    ordinary token (`[num_special_tokens, vocabulary_size)`) with probability
    `random_token_rate`, and is left unchanged otherwise. The loss is taken on
    the selected positions only (their `sample_weight` is 1, all others 0).

    Works on a tensor (`[B, T]` or `[T]`) or on a whole `tf.data.Dataset` of
    such tensors (or of dicts with a `"token_ids"` entry; other entries such
    as `"segment_ids"` are passed through). For a dataset each element gets
    its own stateless seed `(seed, element index)`, so the masks are
    reproducible and differ between elements (and are the same in every
    epoch; re-mask per epoch by building the dataset with `seed + epoch`).

    Args:
        ids: int tensor of token ids (0 = padding) or a dataset of them.
        vocabulary_size: size of the tokenizer's vocabulary.
        mask_rate: selection probability, in (0, 1).
        mask_token_id: id written at masked positions.
        random_token_rate: share of selected positions given a random token.
        unchanged_rate: share of selected positions left unchanged.
        num_special_tokens: ids below this are never selected nor sampled.
        seed: int seed (for a tensor input also a shape-[2] int tensor);
            None draws one.

    Returns:
        `(features, labels, sample_weight)`, or a dataset of them:
        `features = {"token_ids": masked ids, "padding_mask": ids != 0, ...}`,
        `labels` = the original ids, `sample_weight` float32 (1.0 where
        selected).
    """
    check_open_rate("mask_rate", mask_rate)
    check_closed_rate("random_token_rate", random_token_rate)
    check_closed_rate("unchanged_rate", unchanged_rate)
    if random_token_rate + unchanged_rate > 1.0:
        raise ValueError(
            f"`random_token_rate` + `unchanged_rate` must be <= 1; received {random_token_rate} + {unchanged_rate}."
        )
    check_positive_int("vocabulary_size", vocabulary_size)
    if (
        isinstance(num_special_tokens, bool)
        or not isinstance(num_special_tokens, int)
        or num_special_tokens < 0
    ):
        raise ValueError(f"`num_special_tokens` must be a non-negative int; received {num_special_tokens!r}.")
    if vocabulary_size <= num_special_tokens:
        raise ValueError(
            f"`vocabulary_size` ({vocabulary_size}) must exceed `num_special_tokens` ({num_special_tokens})."
        )
    options = dict(
        vocabulary_size=vocabulary_size,
        mask_rate=mask_rate,
        mask_token_id=mask_token_id,
        random_token_rate=random_token_rate,
        unchanged_rate=unchanged_rate,
        num_special_tokens=num_special_tokens,
    )
    if isinstance(ids, tf.data.Dataset):
        base = tf.constant(resolve_seed(seed), tf.int64)
        return ids.enumerate().map(
            lambda index, element: _mask_element(element, tf.stack([base, index]), **options),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    if seed is None or isinstance(seed, int):
        seed = tf.constant([resolve_seed(seed), 0], tf.int64)
    return _mask_element(ids, seed, **options)


def _mask_element(
    element,
    seed,
    vocabulary_size,
    mask_rate,
    mask_token_id,
    random_token_rate,
    unchanged_rate,
    num_special_tokens,
):
    if isinstance(element, dict):
        if "token_ids" not in element:
            raise ValueError(
                f"`ids` dict elements need a 'token_ids' entry; received keys {sorted(element)}."
            )
        features = dict(element)
        ids = element["token_ids"]
    else:
        features, ids = {}, element
    if isinstance(ids, tf.RaggedTensor):
        raise TypeError("`ids` must be dense (pad the batch first, e.g. with `pad_and_batch`).")
    ids = check_integer_tensor("ids", tf.convert_to_tensor(ids))
    shape = tf.shape(ids)
    select_seed, action_seed, token_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    eligible = ids >= tf.cast(num_special_tokens, ids.dtype)
    selected = eligible & (tf.random.stateless_uniform(shape, select_seed) < mask_rate)
    action = tf.random.stateless_uniform(shape, action_seed)
    mask_share = 1.0 - random_token_rate - unchanged_rate
    use_mask = selected & (action < mask_share)
    use_random = selected & (action >= mask_share) & (action < mask_share + random_token_rate)
    random_ids = tf.random.stateless_uniform(
        shape,
        token_seed,
        minval=num_special_tokens,
        maxval=vocabulary_size,
        dtype=ids.dtype if ids.dtype in (tf.int32, tf.int64) else tf.int64,
    )
    masked = tf.where(use_random, tf.cast(random_ids, ids.dtype), ids)
    masked = tf.where(use_mask, tf.cast(mask_token_id, ids.dtype), masked)
    features["token_ids"] = masked
    features.setdefault("padding_mask", ids != tf.cast(PAD, ids.dtype))
    return features, ids, tf.cast(selected, tf.float32)


# --------------------------------------------------------------------------- #
# Sequence-to-sequence pairs.
