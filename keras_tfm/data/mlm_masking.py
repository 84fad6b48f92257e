"""BERT's masked-language-model corruption as a tf.data step: `mlm_mask`.

Of the ordinary tokens, ~15 % are selected; a selected token becomes [MASK]
(80 %), a random token (10 %) or stays (10 %); the loss is taken on the
selected positions only (sample weights). Stateless and seeded like the other
pipelines (`keras_tfm.data.dataset_common`).
"""

from collections.abc import Sequence

import tensorflow as tf

from keras_tfm.checks import check_closed_rate, check_int, check_open_rate, check_positive_int
from keras_tfm.data.dataset_common import check_integer_tensor, resolve_seed
from keras_tfm.tokenizers.base import Tokenizer
from keras_tfm.tokenizers.special_tokens import MASK, NUM_SPECIAL_TOKENS, PAD

# --------------------------------------------------------------------------- #
# Masked language modelling.
# --------------------------------------------------------------------------- #


def mlm_mask(
    ids: tf.types.experimental.TensorLike | tf.data.Dataset,
    vocabulary_size: int | None = None,
    mask_rate: float = 0.15,
    mask_token_id: int | None = None,
    random_token_rate: float = 0.1,
    unchanged_rate: float = 0.1,
    num_special_tokens: int | None = None,
    seed: int | tf.Tensor | None = None,
    *,
    tokenizer: Tokenizer | None = None,
    special_token_ids: Sequence[int] | None = None,
) -> tuple[dict[str, tf.Tensor], tf.Tensor, tf.Tensor] | tf.data.Dataset:
    """BERT masking: select ~`mask_rate` of the ordinary tokens; 80% -> [MASK], 10% random, 10% unchanged.

    Each position holding an ordinary token (not padding, not a special
    token) is selected independently with probability `mask_rate`. A selected
    position becomes `mask_token_id` with probability
    `1 - random_token_rate - unchanged_rate`, a uniformly random ordinary
    token with probability `random_token_rate`, and is left unchanged
    otherwise. The loss is taken on the selected positions only (their
    `sample_weight` is 1, all others 0).

    The special tokens are the tokenizer's (`tokenizer=`: wherever its
    vocabulary puts them, e.g. BERT's `[PAD]`=0, `[UNK]`=100, `[CLS]`=101,
    `[SEP]`=102, `[MASK]`=103), or the ids `special_token_ids`, or else the
    first `num_special_tokens` ids (the fixed ids of the tokenizers built
    `from_corpus`, `keras_tfm.tokenizers.special_tokens`).

    Works on a tensor (`[B, T]` or `[T]`) or on a whole `tf.data.Dataset` of
    such tensors (or of dicts with a `"token_ids"` entry; other entries such
    as `"segment_ids"` are passed through). For a dataset each element gets
    its own stateless seed `(seed, element index)`, so the masks are
    reproducible and differ between elements (and are the same in every
    epoch; re-mask per epoch by building the dataset with `seed + epoch`).

    Args:
        ids: int tensor of token ids (padded with the tokenizer's `pad_id`,
            else 0) or a dataset of them.
        vocabulary_size: size of the vocabulary (default: the tokenizer's).
        mask_rate: selection probability, in (0, 1).
        mask_token_id: id written at masked positions (default: the
            tokenizer's `mask_id`, else `[MASK]`'s fixed id 4; required with
            `special_token_ids`).
        random_token_rate: share of selected positions given a random token.
        unchanged_rate: share of selected positions left unchanged.
        num_special_tokens: ids below this are special (default 7, the fixed
            ids); only without `tokenizer` and `special_token_ids`.
        seed: int seed (for a tensor input also a shape-[2] int tensor);
            None draws one.
        tokenizer: a keras_tfm tokenizer whose special tokens, `mask_id`,
            `pad_id` and vocabulary size are used.
        special_token_ids: ids never selected nor sampled (a sequence of
            ints), when there is no tokenizer at hand.

    Returns:
        `(features, labels, sample_weight)`, or a dataset of them:
        `features = {"token_ids": masked ids, "padding_mask": ids != pad, ...}`,
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
    pad_id = PAD
    if tokenizer is not None:
        vocabulary_size, mask_token_id, special_token_ids, pad_id = _tokenizer_defaults(
            tokenizer, vocabulary_size, mask_token_id, special_token_ids, num_special_tokens
        )
    if vocabulary_size is None:
        raise ValueError("`vocabulary_size` is required (or pass `tokenizer`).")
    check_positive_int("vocabulary_size", vocabulary_size)
    special = _special_ids(vocabulary_size, mask_token_id, special_token_ids, num_special_tokens)
    options = dict(
        vocabulary_size=vocabulary_size,
        mask_rate=mask_rate,
        mask_token_id=check_int("mask_token_id", MASK if mask_token_id is None else mask_token_id, 0),
        random_token_rate=random_token_rate,
        unchanged_rate=unchanged_rate,
        special_token_ids=tuple(special),
        pad_id=pad_id,
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


def _tokenizer_defaults(tokenizer, vocabulary_size, mask_token_id, special_token_ids, num_special_tokens):
    """`(vocabulary_size, mask_token_id, special_token_ids, pad_id)`: the arguments given, else
    the tokenizer's. Raises a ValueError for special ids passed beside the tokenizer, or when
    neither gives a mask id."""
    if special_token_ids is not None or num_special_tokens is not None:
        raise ValueError(
            "Pass `tokenizer` or `special_token_ids` / `num_special_tokens`, not both: the special "
            f"tokens come from the tokenizer; received special_token_ids={special_token_ids!r}, "
            f"num_special_tokens={num_special_tokens!r}."
        )
    if vocabulary_size is None:
        vocabulary_size = tokenizer.vocabulary_size
    if mask_token_id is None:
        mask_token_id = tokenizer.mask_id
        if mask_token_id is None:
            raise ValueError("`tokenizer` has no mask token (`mask_id` is None); pass `mask_token_id`.")
    pad_id = PAD if tokenizer.pad_id is None else tokenizer.pad_id
    return vocabulary_size, mask_token_id, tokenizer.special_token_ids, pad_id


def _special_ids(vocabulary_size, mask_token_id, special_token_ids, num_special_tokens):
    """The sorted special ids: `special_token_ids` (each in [0, vocabulary_size), and then
    `mask_token_id` is required), else `range(num_special_tokens)` (default the fixed
    `NUM_SPECIAL_TOKENS`). Raises if they leave no ordinary token."""
    if special_token_ids is not None:
        if num_special_tokens is not None:
            raise ValueError(
                f"Pass `special_token_ids` or `num_special_tokens`, not both; received {special_token_ids!r} "
                f"and {num_special_tokens!r}."
            )
        if mask_token_id is None:
            raise ValueError(
                "`special_token_ids` needs `mask_token_id` (the vocabulary's [MASK] id) as well."
            )
        if isinstance(special_token_ids, (str, bytes)) or not hasattr(special_token_ids, "__iter__"):
            raise TypeError(
                f"`special_token_ids` must be a sequence of ints; received {special_token_ids!r}."
            )
        special = sorted(
            {
                check_int(
                    "special_token_ids", i, 0, vocabulary_size - 1, maximum_name="the vocabulary size - 1"
                )
                for i in special_token_ids
            }
        )
    else:
        count = NUM_SPECIAL_TOKENS if num_special_tokens is None else num_special_tokens
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"`num_special_tokens` must be a non-negative int; received {count!r}.")
        if vocabulary_size <= count:
            raise ValueError(
                f"`vocabulary_size` ({vocabulary_size}) must exceed `num_special_tokens` ({count})."
            )
        special = list(range(count))
    if len(special) >= vocabulary_size:
        raise ValueError(
            f"`vocabulary_size` ({vocabulary_size}) leaves no ordinary token besides the {len(special)} special ones."
        )
    return special


def _mask_element(
    element,
    seed,
    vocabulary_size,
    mask_rate,
    mask_token_id,
    random_token_rate,
    unchanged_rate,
    special_token_ids,
    pad_id,
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
    dtype = ids.dtype if ids.dtype in (tf.int32, tf.int64) else tf.int64
    special = tf.constant(special_token_ids or (-1,), dtype)
    eligible = ~tf.reduce_any(tf.equal(tf.cast(ids, dtype)[..., None], special), axis=-1)
    selected = eligible & (tf.random.stateless_uniform(shape, select_seed) < mask_rate)
    action = tf.random.stateless_uniform(shape, action_seed)
    mask_share = 1.0 - random_token_rate - unchanged_rate
    use_mask = selected & (action < mask_share)
    use_random = selected & (action >= mask_share) & (action < mask_share + random_token_rate)
    random_ids = _random_ordinary_ids(shape, token_seed, vocabulary_size, special_token_ids, dtype)
    masked = tf.where(use_random, tf.cast(random_ids, ids.dtype), ids)
    masked = tf.where(use_mask, tf.cast(mask_token_id, ids.dtype), masked)
    features["token_ids"] = masked
    features.setdefault("padding_mask", ids != tf.cast(pad_id, ids.dtype))
    return features, ids, tf.cast(selected, tf.float32)


def _random_ordinary_ids(shape, seed, vocabulary_size, special_token_ids, dtype):
    """Uniform ids of `[0, vocabulary_size)` minus the sorted `special_token_ids`.

    Draws `r` uniformly among the `n` ordinary ids and maps it to the `r`-th
    one: `r` plus the number of special ids `s_j` (j-th smallest) with
    `s_j - j <= r` (`s_j - j` ordinary ids come before `s_j`).
    """
    special = list(special_token_ids)
    r = tf.random.stateless_uniform(shape, seed, minval=0, maxval=vocabulary_size - len(special), dtype=dtype)
    if not special:
        return r
    ordinary_before = tf.constant([s - j for j, s in enumerate(special)], dtype)
    flat = tf.reshape(r, [-1])
    skipped = tf.searchsorted(ordinary_before, flat, side="right", out_type=dtype)
    return tf.reshape(flat + skipped, shape)


# --------------------------------------------------------------------------- #
# Sequence-to-sequence pairs.
