"""Graph pieces shared by the serving endpoints of every model kind: request
validation (`tf.debugging.Assert`, outside XLA), prompt padding and length buckets,
and the token chooser of the compiled decoding loops. Text goes in and out by
`keras_tfm.tokenizers.text`, the rules of the models' text methods. The design of
the endpoints is in `keras_tfm.export.signatures`.
"""

import tensorflow as tf

from keras_tfm.checks import MAX_LENGTH_PENALTY, SEED_MAX
from keras_tfm.generation import samplers
from keras_tfm.tokenizers.special_tokens import MASK, SPECIAL_TOKENS

MASK_TOKEN = SPECIAL_TOKENS[MASK]
FILL_MASK_TOP_K = 5

SAMPLING_SIGNATURE = {
    "max_new_tokens": tf.TensorSpec([], tf.int32, name="max_new_tokens"),
    "temperature": tf.TensorSpec([], tf.float32, name="temperature"),
    "top_k": tf.TensorSpec([], tf.int32, name="top_k"),
    "top_p": tf.TensorSpec([], tf.float32, name="top_p"),
    "seed": tf.TensorSpec([], tf.int32, name="seed"),
}

BEAM_SIGNATURE = {
    "max_new_tokens": tf.TensorSpec([], tf.int32, name="max_new_tokens"),
    "num_beams": tf.TensorSpec([], tf.int32, name="num_beams"),
    "length_penalty": tf.TensorSpec([], tf.float32, name="length_penalty"),
}


# --------------------------------------------------------------------------- helpers
def require(condition, *message):
    """`tf.debugging.Assert` returning the op (for control dependencies)."""
    return tf.debugging.Assert(condition, list(message), summarize=8)


def check_nonempty_batch(name, batch_size):
    return require(batch_size > 0, f"`{name}` is an empty batch; send at least one item.")


def check_max_new_tokens(max_new_tokens, max_new_tokens_limit):
    """Asserts that the scalar `max_new_tokens` lies in [0, max_new_tokens_limit]."""
    return [
        require(max_new_tokens >= 0, "`max_new_tokens` must be >= 0; received:", max_new_tokens),
        require(
            max_new_tokens <= max_new_tokens_limit,
            f"`max_new_tokens` must be <= {max_new_tokens_limit} (max_new_tokens_limit of the export); received:",
            max_new_tokens,
        ),
    ]


def check_beams(num_beams, length_penalty, max_beams):
    """Asserts on the beam-search inputs: `num_beams` in [1, max_beams], `length_penalty` in
    [0, `checks.MAX_LENGTH_PENALTY`] (the rule of in-process beam search, `checks.check_length_penalty`)."""
    return [
        require(
            tf.logical_and(num_beams >= 1, num_beams <= max_beams),
            f"`num_beams` must be in [1, {max_beams}] (1 = greedy; max_beams of the export); received:",
            num_beams,
        ),
        require(
            tf.logical_and(length_penalty >= 0.0, length_penalty <= MAX_LENGTH_PENALTY),
            f"`length_penalty` must be in [0, {MAX_LENGTH_PENALTY}]; received:",
            length_penalty,
        ),
    ]


def check_seed(seed):
    """Asserts that the scalar `seed` lies in [0, `keras_tfm.checks.SEED_MAX`]: the range of every seed
    of the recipes, the command line and in-process generation."""
    in_range = tf.logical_and(seed >= 0, tf.cast(seed, tf.int64) <= SEED_MAX)
    return [require(in_range, f"`seed` must be a seed in [0, {SEED_MAX}]; received:", seed)]


def check_sampling(max_new_tokens, temperature, top_k, top_p, max_new_tokens_limit):
    """Asserts on the sampling inputs (all scalars), by the rules of `checks.check_sampling_args`
    (a request may set temperature 0 for greedy decoding: the served sampler decides in the graph)."""
    return check_max_new_tokens(max_new_tokens, max_new_tokens_limit) + [
        require(
            tf.logical_and(temperature >= 0.0, tf.math.is_finite(temperature)),
            "`temperature` must be a finite float >= 0 (0 = greedy); received:",
            temperature,
        ),
        require(top_k >= 0, "`top_k` must be >= 0 (0 disables it); received:", top_k),
        require(
            tf.logical_and(top_p > 0.0, top_p <= 1.0),
            "`top_p` must be in (0, 1] (1 disables it); received:",
            top_p,
        ),
    ]


def longest(lengths):
    """Largest length, 0 for an empty batch."""
    return tf.reduce_max(tf.concat([tf.cast(lengths, tf.int32), [0]], axis=0))


def lookup(table, *indices):
    """`table[i][j]...` of a Python (nested) list, with int32 tensor indices
    clipped to the table's range (the requests were validated before)."""
    table = tf.constant(table, tf.int32)
    index = [tf.clip_by_value(tf.cast(i, tf.int32), 0, table.shape[d] - 1) for d, i in enumerate(indices)]
    return tf.gather_nd(table, tf.stack(index))


def left_pad(ragged, width, pad_id):
    """`[batch, (len)]` ragged ids → `[batch, width]` LEFT-padded (len <= width; `width` a Python int
    or an int32 scalar tensor)."""
    lengths = tf.cast(ragged.row_lengths(), tf.int32)
    dense = ragged.to_tensor(default_value=pad_id)
    dense = tf.pad(dense, [[0, 0], [0, width - tf.shape(dense)[1]]], constant_values=pad_id)
    index = tf.range(width, dtype=tf.int32)[None, :] - (width - lengths)[:, None]
    gathered = tf.gather(dense, tf.maximum(index, 0), batch_dims=1)
    out = tf.where(index >= 0, gathered, tf.cast(pad_id, dense.dtype))
    return tf.ensure_shape(tf.cast(out, tf.int32), [None, width if isinstance(width, int) else None])


def ragged_from_padded(ids, lengths):
    """Right-padded `[batch, T]` ids with lengths → ragged."""
    return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32), lengths=tf.cast(lengths, tf.int64))


#: `choose_token` functions by vocabulary size.
_CHOOSERS = {}


def choose_token(vocabulary_size):
    """`samplers.choose_token` as one traced function per vocabulary size, shared by every
    decoding loop of an export (saved once): `fn(logits, step, seed, temperature, top_k, top_p)`."""
    if vocabulary_size not in _CHOOSERS:
        scalar = tf.TensorSpec([], tf.float32)
        signature = [
            tf.TensorSpec([None, vocabulary_size], tf.float32),  # logits
            tf.TensorSpec([], tf.int32),  # step
            tf.TensorSpec([2], tf.int32),  # seed
            scalar,  # temperature
            tf.TensorSpec([], tf.int32),  # top_k
            scalar,  # top_p
        ]
        _CHOOSERS[vocabulary_size] = tf.function(
            samplers.choose_token, input_signature=signature, autograph=False
        )
    return _CHOOSERS[vocabulary_size]


def served_seed(seed):
    """The int32 `(2,)` seed of a served int `seed` (as `generation.prompts.make_seed(int)`)."""
    return tf.stack([tf.zeros([], tf.int32), tf.cast(seed, tf.int32)])


def string_vector(name, strings):
    """`strings` checked at run time to be a vector `[batch]`.

    The signature's `TensorSpec([None])` is not enforced by TF Serving (a
    rank-2 request tensor would be tokenized as if it were a batch);
    `EnsureShape` fails with "Shape of tensor <name> [..] is not compatible
    with expected shape [?]" instead.
    """
    return tf.ensure_shape(strings, [None], name=name)
