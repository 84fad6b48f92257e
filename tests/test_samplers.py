"""Tests for keras_tfm.generation.samplers."""

import numpy as np
import pytest
import tensorflow as tf

from keras_tfm import generation
from keras_tfm.checks import check_sampling_args
from keras_tfm.generation import filter_top_k, filter_top_p, greedy, sample
from keras_tfm.generation.samplers import MASK_VALUE, split_seed

VOCAB = 12


def random_logits(batch, vocab=VOCAB, seed=0, scale=2.0):
    return np.random.RandomState(seed).normal(size=(batch, vocab)).astype("float32") * scale


def seed_tensor(a, b=0):
    return tf.constant([a, b], tf.int32)


def np_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_top_k_sets(logits, k):
    order = np.argsort(-logits, axis=-1)
    return [set(row[:k]) for row in order]


def np_nucleus_sets(logits, p):
    """Smallest set of top tokens with cumulative probability >= p (always >= 1 token)."""
    probs = np_softmax(logits)
    sets = []
    for row in probs:
        order = np.argsort(-row)
        mass_before = np.cumsum(row[order]) - row[order]
        sets.append(set(order[mass_before < p]) | {order[0]})
    return sets


@pytest.fixture(scope="module")
def jit_sample():
    return tf.function(sample, jit_compile=True)


def test_exports():
    for name in ("greedy", "sample", "filter_top_k", "filter_top_p"):
        assert name in generation.__all__ and callable(getattr(generation, name))
    for name in ("split_seed", "check_sampling_args", "MASK_VALUE", "decode", "get_generator"):
        assert name not in generation.__all__ and not hasattr(generation, name)


def test_greedy():
    logits = random_logits(6)
    out = greedy(logits)
    assert out.dtype == tf.int32 and tuple(out.shape) == (6,)
    np.testing.assert_array_equal(out.numpy(), logits.argmax(-1))


def test_zero_temperature_is_greedy(jit_sample):
    logits = random_logits(64)
    expected = logits.argmax(-1)
    for temperature in (0.0, 1e-7):
        np.testing.assert_array_equal(
            sample(logits, seed_tensor(1), temperature=temperature).numpy(), expected
        )
    np.testing.assert_array_equal(
        jit_sample(logits, seed_tensor(1), tf.constant(0.0), tf.constant(0), tf.constant(1.0)).numpy(),
        expected,
    )
    # Per-row temperature: greedy rows are exact, the others are sampled.
    temps = np.where(np.arange(64) % 2 == 0, 0.0, 5.0).astype("float32")
    out = jit_sample(logits, seed_tensor(2), tf.constant(temps), tf.constant(0), tf.constant(1.0)).numpy()
    np.testing.assert_array_equal(out[::2], expected[::2])
    assert np.any(out[1::2] != expected[1::2])


def test_top_k_never_samples_outside_top_k(jit_sample):
    batch = 256
    logits = random_logits(batch, seed=3, scale=0.5)  # flat: plenty of mass outside the top k
    for k in (1, 3, 5):
        allowed = np_top_k_sets(logits, k)
        for s in range(4):
            eager = sample(logits, seed_tensor(s, k), temperature=1.5, top_k=k).numpy()
            jitted = jit_sample(
                logits, seed_tensor(s, k), tf.constant(1.5), tf.constant(k), tf.constant(1.0)
            ).numpy()
            for out in (eager, jitted):
                assert all(tok in allowed[i] for i, tok in enumerate(out))
        if k > 1:  # and it does use more than the top-1
            assert len(set(zip(range(batch), eager)) - {(i, t) for i, t in enumerate(logits.argmax(-1))}) > 0
    # top_k = 1 is greedy.
    np.testing.assert_array_equal(sample(logits, seed_tensor(9), top_k=1).numpy(), logits.argmax(-1))


def test_top_k_per_row_tensor():
    logits = random_logits(200, seed=4, scale=0.5)
    ks = np.random.RandomState(0).randint(0, 4, size=200).astype("int32")  # 0: disabled
    out = sample(logits, seed_tensor(5), top_k=tf.constant(ks)).numpy()
    for i, (tok, k) in enumerate(zip(out, ks)):
        if k > 0:
            assert tok in np_top_k_sets(logits[i : i + 1], k)[0]


def test_top_p_respects_nucleus(jit_sample):
    batch = 256
    logits = random_logits(batch, seed=6)
    for temperature in (1.0, 0.7):
        for p in (0.3, 0.6, 0.9):
            allowed = np_nucleus_sets(logits / temperature, p)
            assert any(len(a) > 1 for a in allowed)
            for s in range(3):
                eager = sample(logits, seed_tensor(s), temperature=temperature, top_p=p).numpy()
                jitted = jit_sample(
                    logits, seed_tensor(s), tf.constant(temperature), tf.constant(0), tf.constant(p)
                ).numpy()
                for out in (eager, jitted):
                    assert all(tok in allowed[i] for i, tok in enumerate(out))


def test_top_p_per_row_tensor(jit_sample):
    batch = 240
    logits = random_logits(batch, seed=8)
    ps = np.tile(np.array([0.2, 0.5, 0.8, 1.0], "float32"), batch // 4)
    for fn in (sample, jit_sample):
        out = fn(logits, seed_tensor(3), tf.constant(1.0), tf.constant(0), tf.constant(ps)).numpy()
        for i, (tok, p) in enumerate(zip(out, ps)):
            assert tok in np_nucleus_sets(logits[i : i + 1], p)[0]
    # A Python top_p is still validated when the other arguments are tensors.
    with pytest.raises(ValueError, match="top_p"):
        sample(logits, seed_tensor(0), temperature=tf.constant(1.0), top_p=2.0)


def test_top_k_and_top_p_combined():
    logits = random_logits(256, seed=7, scale=0.7)
    k, p = 4, 0.5
    # Top-p is applied to the renormalised top-k distribution.
    top_k_logits = filter_top_k(logits, k).numpy()
    allowed = np_nucleus_sets(top_k_logits, p)
    for s in range(3):
        out = sample(logits, seed_tensor(s), top_k=k, top_p=p).numpy()
        assert all(
            tok in allowed[i] and tok in np_top_k_sets(logits[i : i + 1], k)[0] for i, tok in enumerate(out)
        )


def test_filters_mask_with_finite_value():
    logits = random_logits(4)
    for out in (
        filter_top_k(logits, 2),
        filter_top_p(logits, 0.5),
        filter_top_k(logits, tf.constant([1, 2, 3, 0])),
    ):
        out = out.numpy()
        assert np.all(np.isfinite(out))
        kept = out > MASK_VALUE
        np.testing.assert_array_equal(out[kept], logits[kept])
        assert np.all(out[~kept] == MASK_VALUE)
        probs = tf.nn.softmax(out).numpy()
        assert np.all(np.isfinite(probs)) and np.all(probs[~kept] == 0.0)
    assert filter_top_k(logits, 2).numpy().__gt__(MASK_VALUE).sum(-1).tolist() == [2, 2, 2, 2]
    # Disabled filters are the identity.
    for out in (filter_top_k(logits, 0), filter_top_k(logits, VOCAB + 5), filter_top_p(logits, 1.0)):
        np.testing.assert_array_equal(np.asarray(out), logits)
    np.testing.assert_array_equal(filter_top_p(logits, tf.constant(1.0)).numpy(), logits)
    np.testing.assert_array_equal(filter_top_k(logits, tf.constant(0)).numpy(), logits)
    # Tiny p keeps exactly the top-1.
    np.testing.assert_array_equal((filter_top_p(logits, 1e-6).numpy() > MASK_VALUE).sum(-1), [1, 1, 1, 1])


def test_seed_determinism_and_variation(jit_sample):
    logits = random_logits(64, scale=0.3)
    a = sample(logits, seed_tensor(11, 3)).numpy()
    b = sample(logits, seed_tensor(11, 3)).numpy()
    np.testing.assert_array_equal(a, b)
    outs = [sample(logits, seed_tensor(s)).numpy() for s in range(5)]
    assert any(np.any(o != outs[0]) for o in outs[1:])
    args = (tf.constant(1.0), tf.constant(0), tf.constant(1.0))
    j1 = jit_sample(logits, seed_tensor(4), *args).numpy()
    j2 = jit_sample(logits, seed_tensor(4), *args).numpy()
    j3 = jit_sample(logits, seed_tensor(5), *args).numpy()
    np.testing.assert_array_equal(j1, j2)
    assert np.any(j1 != j3)


def test_split_seed():
    seed = seed_tensor(123, 7)
    s1, s1b, s2 = split_seed(seed, 1), split_seed(seed, 1), split_seed(seed, 2)
    assert s1.dtype == tf.int32 and tuple(s1.shape) == (2,)
    np.testing.assert_array_equal(s1.numpy(), s1b.numpy())
    assert np.any(s1.numpy() != s2.numpy())
    assert np.any(s1.numpy() != seed.numpy())

    @tf.function(jit_compile=True)
    def decode(logits, seed):
        # Per-step seeds inside a compiled loop: one draw per step.
        def body(i, acc):
            token = sample(logits, split_seed(seed, i))
            return i + 1, acc.write(i, token)

        _, acc = tf.while_loop(lambda i, _: i < 6, body, (tf.constant(0), tf.TensorArray(tf.int32, size=6)))
        return acc.stack()

    logits = random_logits(8, scale=0.2)
    steps = decode(logits, seed).numpy()
    assert steps.shape == (6, 8)
    np.testing.assert_array_equal(steps, decode(logits, seed).numpy())
    assert len({tuple(r) for r in steps}) > 1  # different seeds per step
    with pytest.raises(ValueError, match="seed"):
        split_seed(tf.constant([1, 2, 3]), 0)


def _chi_square(counts, probs):
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


# 99.9% quantiles of chi-square with df = 4 and df = 2.
CHI2_999 = {4: 18.47, 2: 13.82}


def test_empirical_distribution_matches_softmax():
    draws = 4000
    row = np.array([1.0, 0.5, 0.0, -0.5, -1.0], "float32")
    logits = np.tile(row, (draws, 1))
    out = sample(logits, seed_tensor(2024)).numpy()
    counts = np.bincount(out, minlength=5).astype(np.float64)
    assert _chi_square(counts, np_softmax(row)) < CHI2_999[4]
    # Temperature 2 flattens the distribution as softmax(logits / 2).
    out = sample(logits, seed_tensor(7), temperature=2.0).numpy()
    counts = np.bincount(out, minlength=5).astype(np.float64)
    assert _chi_square(counts, np_softmax(row / 2.0)) < CHI2_999[4]
    # Top-k = 3 renormalises over the 3 largest.
    out = sample(logits, seed_tensor(8), top_k=3).numpy()
    counts = np.bincount(out, minlength=5).astype(np.float64)
    assert counts[3:].sum() == 0
    assert _chi_square(counts[:3], np_softmax(row[:3])) < CHI2_999[2]


@pytest.mark.parametrize(
    "kwargs, name, error",
    [
        ({"temperature": -0.1}, "temperature", ValueError),
        ({"temperature": float("nan")}, "temperature", ValueError),
        ({"temperature": "1"}, "temperature", TypeError),
        ({"top_k": -1}, "top_k", ValueError),
        ({"top_k": 2.5}, "top_k", TypeError),
        ({"top_p": 0.0}, "top_p", ValueError),
        ({"top_p": 1.5}, "top_p", ValueError),
        ({"top_p": None}, "top_p", TypeError),
    ],
)
def test_check_sampling_args(kwargs, name, error):
    with pytest.raises(error, match=name):
        check_sampling_args(**kwargs)
    if error is ValueError:  # Python values passed to `sample` are checked too.
        with pytest.raises(error, match=name):
            sample(random_logits(2), seed_tensor(0), **kwargs)


def test_check_sampling_args_accepts_valid():
    assert check_sampling_args(0, 0, 1) == (0.0, 0, 1.0)
    assert check_sampling_args(0.7, 40, 0.95) == (0.7, 40, 0.95)


def test_bad_shapes():
    with pytest.raises(ValueError, match="logits"):
        greedy(np.zeros((2, 3, 4), "float32"))
    with pytest.raises(ValueError, match="seed"):
        sample(random_logits(2), tf.constant(1))
