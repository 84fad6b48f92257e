"""Tests of keras_tfm.generation: cached decoding, the XLA loop, sampling and
beam search.

Most tests run the generators eagerly (`run_eagerly=True`: the very same
decoding code without `tf.function`) to stay fast; one test compiles the XLA
loop and checks no retrace within a bucket, determinism of seeds and
temperature 0 = greedy under XLA.
"""

import math
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from model_harness import tiny_gpt, tiny_llama, tiny_seq2seq  # noqa: E402
from toy_decoder import ToyDecoder  # noqa: E402

from keras_tfm import generation  # noqa: E402
from keras_tfm.generation import Generator  # noqa: E402
from keras_tfm.generation import cache as cache_lib  # noqa: E402
from keras_tfm.generation import prompts as prompts_lib  # noqa: E402
from keras_tfm.generation.beam import beam_search_loop  # noqa: E402
from keras_tfm.generation.decoding import decode  # noqa: E402
from keras_tfm.generation.generator import get_generator  # noqa: E402

POSITIONS = ["learned", "sinusoidal", "rope", "alibi", "relative"]
PROMPTS = [[5, 6, 7, 8, 9], [3, 4], [10, 11, 12, 13, 14, 15, 16, 17, 18]]
SOURCES = [[5, 6, 7, 8, 9, 10], [4, 5], [7, 8, 9, 10, 11, 12, 13, 14, 15]]


@pytest.fixture(scope="module")
def gpt_learned():
    return tiny_gpt(max_length=64)


def full_logits(model, ids):
    return np.asarray(model(np.array([ids], np.int32), training=False))[0]


def reference_greedy(model, prompts, steps):
    """Step-by-step argmax of the full forward pass, row by row (no padding)."""
    out = []
    for p in prompts:
        seq = list(p)
        for _ in range(steps):
            seq.append(int(np.argmax(full_logits(model, seq)[-1])))
        out.append(seq[len(p) :])
    return np.array(out, np.int32)


def reference_seq2seq_greedy(model, source, bos_id, steps, eos_id):
    """Greedy decoding by re-running the whole model on the decoder prefix at
    every step (no cache), row by row; 0 after EOS."""
    out = np.zeros((len(source), steps), np.int32)
    for b, row in enumerate(source):
        decoder = [bos_id]
        for t in range(steps):
            logits = model(
                {"encoder_token_ids": row[None], "decoder_token_ids": np.array([decoder], np.int32)},
                training=False,
            )
            token = int(np.argmax(np.asarray(logits)[0, -1]))
            out[b, t] = token
            if token == eos_id:
                break
            decoder.append(token)
    return out


# --------------------------------------------------------------------------- cache == recompute
@pytest.mark.parametrize("position", POSITIONS)
def test_gpt_cached_logits_match_full_recompute(position):
    model = tiny_gpt(position=position, max_length=64)
    generator = Generator(model, run_eagerly=True)
    steps = 10
    tokens, lengths, scores = generator.generate(PROMPTS, steps, return_lengths=True, output_scores=True)
    assert tokens.shape == (3, steps) and lengths.tolist() == [steps] * 3
    for b, prompt in enumerate(PROMPTS):
        full = full_logits(model, list(prompt) + tokens[b].tolist())
        # scores[:, t] are the logits that chose token t (prefill, then cached steps).
        np.testing.assert_allclose(
            scores[b], full[len(prompt) - 1 : len(prompt) - 1 + steps], atol=1e-5, rtol=0
        )
    # Greedy over a batch of prompts of different lengths = per-row argmax of the full forward pass.
    np.testing.assert_array_equal(tokens, reference_greedy(model, PROMPTS, steps))


def test_gpt_untied_post_norm_cached_matches_recompute():
    model = tiny_gpt(seed=3, position="rope", max_length=64, tie_embeddings=False, norm_first=False)
    assert model.head is model.get_layer("lm_head")
    generator = Generator(model, run_eagerly=True)
    tokens, scores = generator.generate(PROMPTS, 6, output_scores=True)
    for b, prompt in enumerate(PROMPTS):
        full = full_logits(model, list(prompt) + tokens[b].tolist())
        np.testing.assert_allclose(scores[b], full[len(prompt) - 1 : len(prompt) + 5], atol=1e-5, rtol=0)


def test_multi_query_greedy_generation_equals_full_recompute():
    model = tiny_llama(seed=3, num_key_value_heads=1)
    np.testing.assert_array_equal(
        generation.generate(model, np.array([PROMPTS[0][:3]], np.int32), 5, sampler="greedy"),
        reference_greedy(model, [PROMPTS[0][:3]], 5),
    )


@pytest.mark.parametrize("position", ["sinusoidal", "rope"])
def test_seq2seq_cached_matches_full_recompute(position):
    model = tiny_seq2seq(seed=1, position=position)
    generator = Generator(model, bos_id=1, run_eagerly=True)
    steps = 8
    tokens, lengths, scores = generator.generate(
        SOURCES, steps, eos_id=2, return_lengths=True, output_scores=True
    )
    source = np.zeros((3, 9), np.int32)
    for b, s in enumerate(SOURCES):
        source[b, : len(s)] = s
    np.testing.assert_array_equal(tokens, reference_seq2seq_greedy(model, source, 1, steps, eos_id=2))
    decoder_in = np.concatenate([np.ones((3, 1), np.int32), tokens], axis=1)
    full = np.asarray(model({"encoder_token_ids": source, "decoder_token_ids": decoder_in}, training=False))
    for b in range(3):
        np.testing.assert_allclose(scores[b, : lengths[b]], full[b, : lengths[b]], atol=1e-5, rtol=0)


# --------------------------------------------------------------------------- XLA loop, buckets, seeds
def test_xla_loop_no_retrace_seeded_and_temperature_zero(gpt_learned):
    eager = Generator(gpt_learned, run_eagerly=True)
    xla = Generator(gpt_learned)  # jit_compile=True
    greedy = eager.generate(PROMPTS, 12, eos_id=7)
    # One compiled sampling function: temperature/top_k/top_p/seed/eos are tensors.
    out_t0 = xla.generate(PROMPTS, 12, sampler="sample", temperature=0.0, seed=3, eos_id=7)
    np.testing.assert_array_equal(out_t0, greedy)
    assert xla.trace_count == 1
    a = xla.generate(PROMPTS, 12, sampler="sample", temperature=1.0, top_k=10, seed=[1, 2])
    b = xla.generate(PROMPTS, 12, sampler="sample", temperature=1.0, top_k=10, seed=[1, 2])
    c = xla.generate(PROMPTS, 12, sampler="sample", temperature=1.0, top_k=10, seed=[9, 9])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # Other prompt lengths and max_new_tokens inside the same buckets: no retrace.
    # (PROMPTS: longest 9 → prompt bucket 16; 16 + max_new <= 64 → cache bucket 64.)
    xla.generate([[1, 2, 3], list(range(4, 16)), [11]], 20, sampler="sample", seed=0, top_p=0.9)
    xla.generate([[3] * 16] * 3, 5, sampler="sample", seed=0)
    assert xla.trace_count == 1


def test_same_seed_same_output_eager(gpt_learned):
    generator = Generator(gpt_learned, run_eagerly=True)
    kwargs = dict(sampler="sample", temperature=1.5, top_p=0.95)
    a = generator.generate(PROMPTS, 8, seed=5, **kwargs)
    b = generator.generate(PROMPTS, 8, seed=5, **kwargs)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, generator.generate(PROMPTS, 8, seed=6, **kwargs))


def test_top_k_never_samples_outside_top_k(gpt_learned):
    generator = Generator(gpt_learned, run_eagerly=True)
    k = 3
    for seed in range(3):
        tokens, scores = generator.generate(
            PROMPTS, 6, sampler="sample", temperature=2.0, top_k=k, seed=seed, output_scores=True
        )
        kth = np.sort(scores, axis=-1)[..., -k]
        chosen = np.take_along_axis(scores, tokens[..., None], axis=-1)[..., 0]
        assert np.all(chosen >= kth)


# --------------------------------------------------------------------------- EOS, early exit
def counting_toy(vocab=12, eos=1):
    """Toy LM: the next token is (last + 1) mod vocab with certainty; counts calls."""
    calls = []

    def logits_fn(last, position):
        calls.append(1)
        nxt = (last + 1) % vocab
        return tf.one_hot(nxt, vocab) * 10.0

    return ToyDecoder(logits_fn, vocab), calls


def test_eos_stops_rows_independently_and_loop_exits_early():
    adapter, calls = counting_toy(vocab=12, eos=1)
    prompts = np.array([[0, 0, 0, 9], [0, 0, 5, 6]], np.int32)  # left-padded
    out = decode(
        adapter,
        prompts,
        np.array([1, 2], np.int32),
        max_new_tokens=20,
        select=lambda logits, step: generation.greedy(logits),
        cache_length=64,
        eos_id=1,
        pad_id=0,
    )
    tokens, lengths = out["tokens"].numpy()[:, :20], out["lengths"].numpy()
    # Row 0: 10, 11, 0, 1(EOS) then padding; row 1: 7, 8, 9, 10, 11, 0, 1(EOS).
    assert tokens[0, :4].tolist() == [10, 11, 0, 1] and np.all(tokens[0, 4:] == 0)
    assert tokens[1, :7].tolist() == [7, 8, 9, 10, 11, 0, 1] and np.all(tokens[1, 7:] == 0)
    assert lengths.tolist() == [4, 7]
    # prefill + 7 steps: the loop stopped once both rows were finished.
    assert len(calls) == 1 + 7


def test_gpt_eos_rows_finish_independently(gpt_learned):
    generator = Generator(gpt_learned, run_eagerly=True)
    free = generator.generate(PROMPTS, 10)
    eos = int(free[0, 2])  # row 0 emits this at step 2
    tokens, lengths = generator.generate(PROMPTS, 10, eos_id=eos, return_lengths=True)
    for b in range(3):
        hits = np.flatnonzero(free[b] == eos)
        stop = hits[0] + 1 if hits.size else 10
        assert lengths[b] == stop
        np.testing.assert_array_equal(tokens[b, :stop], free[b, :stop])
        assert np.all(tokens[b, stop:] == 0)


# --------------------------------------------------------------------------- beam search
def test_beam_width_one_equals_greedy(gpt_learned):
    generator = Generator(gpt_learned, run_eagerly=True)
    greedy = generator.generate(PROMPTS, 8)
    sequences, scores, lengths = generator.beam_search(PROMPTS, 8, num_beams=1, length_penalty=0.6)
    np.testing.assert_array_equal(sequences[:, 0], greedy)
    assert sequences.shape == (3, 1, 8) and lengths.tolist() == [[8]] * 3


def toy_beam_lm():
    """Vocab: 0 pad, 1 EOS, 2 A, 3 B, 4 C, 5 BOS. From BOS: A 0.6, B 0.4.
    After A: EOS 0.35, C 0.34, A 0.31 (flat, bad); after B: EOS 0.95.
    After C: EOS 1. Greedy: A, EOS (p = 0.21); best: B, EOS (p = 0.38)."""
    table = np.full((6, 6), 1e-9, np.float32)
    table[5, [2, 3]] = [0.6, 0.4]
    table[2, [1, 4, 2]] = [0.35, 0.34, 0.31]
    table[3, [1, 2]] = [0.95, 0.05]
    table[4, 1] = 1.0
    table[1, 1] = 1.0
    logits = tf.constant(np.log(table / table.sum(1, keepdims=True)))

    def logits_fn(last, position):
        return tf.gather(logits, last)

    return ToyDecoder(logits_fn, 6)


def test_beam_finds_better_sequence_than_greedy():
    adapter = toy_beam_lm()
    prompt, lengths = np.array([[5]], np.int32), np.array([1], np.int32)
    greedy = decode(adapter, prompt, lengths, 4, lambda l, s: generation.greedy(l), cache_length=64, eos_id=1)
    assert greedy["tokens"].numpy()[0, :2].tolist() == [2, 1]  # A, EOS: p = 0.21
    out = beam_search_loop(
        adapter, prompt, lengths, 4, num_beams=2, cache_length=64, length_penalty=0.0, eos_id=1
    )
    seqs, log_probs = out["sequences"].numpy()[0], out["log_probs"].numpy()[0]
    assert seqs[0, :3].tolist() == [3, 1, 0]  # B, EOS, then frozen (padding)
    np.testing.assert_allclose(log_probs[0], math.log(0.4 * 0.95), rtol=1e-5)
    assert out["lengths"].numpy()[0, 0] == 2
    np.testing.assert_allclose(out["scores"].numpy()[0, 0], log_probs[0], rtol=1e-6)  # alpha = 0: lp = 1


def test_beam_length_penalty_gnmt_and_frozen_beams():
    adapter = toy_beam_lm()
    prompt, lengths = np.array([[5], [5]], np.int32), np.array([1, 1], np.int32)
    alpha = 0.6
    out = beam_search_loop(
        adapter, prompt, lengths, 5, num_beams=3, cache_length=64, length_penalty=alpha, eos_id=1
    )
    seqs, lens = out["sequences"].numpy(), out["lengths"].numpy()
    scores, log_probs = out["scores"].numpy(), out["log_probs"].numpy()
    np.testing.assert_allclose(scores, log_probs / ((5.0 + lens) / 6.0) ** alpha, rtol=1e-5)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first
    assert seqs[0, 0, :2].tolist() == [3, 1]
    for b in range(2):
        for k in range(3):
            n = lens[b, k]
            eos = np.flatnonzero(seqs[b, k] == 1)
            if eos.size:  # finished: frozen after EOS (padding, length and score kept)
                assert eos[0] == n - 1 and np.all(seqs[b, k, n:] == 0)
            else:
                assert n == 5


def test_seq2seq_beam_width_one_equals_greedy():
    model = tiny_seq2seq(seed=2)
    generator = Generator(model, bos_id=1, run_eagerly=True)
    greedy = generator.generate(SOURCES, 6, eos_id=2)
    sequences, _, _ = generator.beam_search(SOURCES, 6, num_beams=1, eos_id=2)
    np.testing.assert_array_equal(sequences[:, 0], greedy)
    sequences, scores, _ = generator.beam_search(SOURCES, 6, num_beams=3, eos_id=2)
    assert sequences.shape == (3, 3, 6) and np.all(np.isfinite(scores))


def test_public_generate_and_beam_search(gpt_learned):
    assert isinstance(get_generator(gpt_learned), Generator)
    assert isinstance(get_generator(tiny_seq2seq()), Generator)
    assert get_generator(gpt_learned) is get_generator(gpt_learned)
    # A generator object is accepted in place of the model (eager here, for speed).
    eager = Generator(gpt_learned, run_eagerly=True)
    tokens = generation.generate(eager, PROMPTS, 4)
    assert tokens.shape == (3, 4) and tokens.dtype == np.int32
    seqs, scores, lengths = generation.beam_search(eager, PROMPTS, 4, num_beams=2)
    assert seqs.shape == (3, 2, 4) and scores.shape == (3, 2) and lengths.shape == (3, 2)


# --------------------------------------------------------------------------- buckets
def test_buckets_and_segments():
    assert prompts_lib.cache_bucket(16 + 10) == 64
    assert prompts_lib.cache_bucket(16 + 256) == 512
    assert prompts_lib.prompt_bucket(5) == 8 and prompts_lib.prompt_bucket(9) == 16
    assert cache_lib.segment_sizes(16, 1040) == (272, 528, 1040)
    assert cache_lib.segment_sizes(16, 272) == (272,)  # up to 256 new tokens: one loop body
    assert cache_lib.segment_sizes(16, 512, minimum=64) == (80, 144, 272, 512)
    assert cache_lib.segment_sizes(128, 512, minimum=64) == (192, 256, 384, 512)
    assert cache_lib.segment_sizes(16, 64) == (64,)
    assert cache_lib.segment_sizes(None, 512) == (512,)


def test_segments_do_not_change_the_tokens(gpt_learned, monkeypatch):
    """A real GPT decoding across cache segments (first segment of 8 new slots: 24 → 32 → 48 → 64
    slots for P = 16) gives the tokens of one segment, greedy and sampled, on the compiled loop,
    with the model step traced once for the four loop bodies."""
    prompts = [[5, 6, 7], list(range(1, 12))]
    sample = dict(sampler="sample", seed=4, top_k=5)
    one = Generator(gpt_learned)
    want, want_sampled = one.generate(prompts, 40), one.generate(prompts, 40, **sample)
    monkeypatch.setattr(cache_lib, "MIN_SEGMENT_LENGTH", 8)
    assert cache_lib.segment_sizes(16, 64) == (24, 32, 48, 64)
    segmented = Generator(gpt_learned)  # a fresh generator: traced with the four segments
    np.testing.assert_array_equal(segmented.generate(prompts, 40), want)
    np.testing.assert_array_equal(segmented.generate(prompts, 40, **sample), want_sampled)
    # The four loop bodies call one traced step (compiled.SharedStep); one segment calls the model directly.
    assert len(segmented.step.functions) == 1 and not one.step.functions


def test_long_generation_crosses_segments():
    """Cache segments (257 → 512) are transparent: a 300-token toy run."""
    adapter, _ = counting_toy(vocab=7)
    out = decode(
        adapter,
        np.array([[3]], np.int32),
        np.array([1], np.int32),
        300,
        lambda l, s: generation.greedy(l),
        cache_length=512,
    )
    np.testing.assert_array_equal(out["tokens"].numpy()[0, :300], (np.arange(300) + 4) % 7)


def test_beam_width_as_an_input_is_the_narrower_search(gpt_learned):
    """A loop compiled for K beams with `active_beams=n` returns the width-n search (served `translate`)."""
    g = Generator(gpt_learned, run_eagerly=True)
    ids, lengths = generation.prompts.pad_prompts("prompt_ids", PROMPTS, vocabulary_size=64)
    cache_length = prompts_lib.cache_bucket(ids.shape[1] + 6)
    for n in (1, 3):
        want, want_scores, _ = g.beam_search(PROMPTS, 6, num_beams=n, eos_id=7)
        out = g.beam_search_fn(
            ids, lengths, 6, 0.6, 7, num_beams=4, cache_length=cache_length, active_beams=tf.constant(n)
        )
        np.testing.assert_array_equal(out["sequences"].numpy()[:, :n, :6], want)
        np.testing.assert_allclose(out["scores"].numpy()[:, :n], want_scores, rtol=1e-5)
        assert (out["scores"].numpy()[:, n:] < -1e6).all()  # the spare beams stay dead


# --------------------------------------------------------------------------- argument checks
def test_malformed_arguments(gpt_learned):
    g = Generator(gpt_learned, run_eagerly=True)
    with pytest.raises(ValueError, match="max_new_tokens"):
        g.generate(PROMPTS, -1)
    with pytest.raises(ValueError, match="maximum length"):
        g.beam_search([[5] * 65], 2)  # past the context beams slide (tests/test_long_generation.py)
    with pytest.raises(ValueError, match="maximum length"):
        g.generate([[5] * 65], 2)  # a prompt longer than the context
    with pytest.raises(TypeError, match="max_new_tokens"):
        g.generate(PROMPTS, 2.5)
    with pytest.raises(ValueError, match="top_p"):
        g.generate(PROMPTS, 2, sampler="sample", top_p=0.0)
    with pytest.raises(ValueError, match="top_p"):
        g.generate(PROMPTS, 2, sampler="sample", top_p=1.5)
    with pytest.raises(ValueError, match="temperature"):
        g.generate(PROMPTS, 2, sampler="sample", temperature=-1.0)
    with pytest.raises(ValueError, match="empty batch"):
        g.generate([], 2)
    with pytest.raises(ValueError, match="empty batch"):
        g.generate(np.zeros((0, 4), np.int32), 2)
    with pytest.raises(ValueError, match="at least one token"):
        g.generate([[1, 2], []], 2)
    with pytest.raises(TypeError, match="integer token ids"):
        g.generate(np.ones((2, 3), np.float32), 2)
    with pytest.raises(TypeError, match="integer token ids"):
        g.generate([[1.5, 2.0]], 2)
    with pytest.raises(ValueError, match="outside"):
        g.generate([[1, 999]], 2)
    for name in ("nucleus", "top_k", "top_p", "temperature"):
        with pytest.raises(
            ValueError, match=rf"Unknown `sampler` '{name}'; expected one of \['greedy', 'sample'\]"
        ):
            g.generate(PROMPTS, 2, sampler=name)
    with pytest.raises(ValueError, match="seed"):
        g.generate(PROMPTS, 2, sampler="sample", seed=[1, 2, 3])
    with pytest.raises(ValueError, match="num_beams"):
        g.beam_search(PROMPTS, 2, num_beams=0)
    with pytest.raises(ValueError, match="length_penalty"):
        g.beam_search(PROMPTS, 2, length_penalty=-1.0)
    assert g.generate(PROMPTS, 0).shape == (3, 0)
    s2s = Generator(tiny_seq2seq(), run_eagerly=True)
    with pytest.raises(ValueError, match="bos_id"):
        s2s.generate(SOURCES, 2)
    with pytest.raises(ValueError, match="maximum length"):
        s2s.generate(SOURCES, 16, bos_id=1)  # 1 + 16 > max_length 16
