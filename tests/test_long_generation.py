"""Generation past the model's context (keras_tfm.generation.sliding_window).

Greedy tokens of the sliding-window paths equal, token for token, naive
references that recompute the full forward pass at every step:

* learned / sinusoidal / RoPE (recompute path): the forward pass over the
  row's window, which restarts from its last `W // 2` tokens when it would
  pass `W = max_length` tokens;
* ALiBi / T5 relative (shift path): the forward pass over the whole sequence
  with a causal band of width `W` in every layer (with one layer: the
  forward pass over the last `W` tokens).

Tiny models (W = 8, d_model 16) run eagerly (`run_eagerly=True`, the same
decoding code without `tf.function`); one test compiles the XLA loop.

Shared per module (`Case`, one per position scheme and depth): the model, its
eager generator, its greedy tokens and its best beams past the context (each
computed once, then checked by several tests), and the references' forward
passes, each traced once as a `tf.function` with open input shapes (the same
arithmetic as an eager call, about 40 times cheaper per call).
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import functools  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from model_harness import tiny_gpt  # noqa: E402

from keras_tfm.generation import Generator, beam_search, generate, prompts, sliding_window  # noqa: E402

W = 8
STEPS = 21  # three window restarts of the longest prompt
PROMPTS = [[5, 6, 7, 8, 9], [3, 4], [10, 11, 12, 13, 14, 15, 16, 17]]


def tiny(position, num_layers=2):
    return tiny_gpt(vocabulary_size=23, max_length=W, num_layers=num_layers, d_model=16, position=position)


class Case:
    """One tiny model and what the tests share about it (see the module docstring)."""

    def __init__(self, position, num_layers):
        self.model = model = tiny(position, num_layers)
        self.eager = Generator(model, run_eagerly=True)
        #: The full forward pass, (B, T) ids -> (B, T, V) logits.
        self.forward = tf.function(
            lambda ids: model(ids, training=False), input_signature=[tf.TensorSpec([None, None], tf.int32)]
        )
        #: The forward pass of one sequence with a (1, T, T) attention mask (`band_forward`).
        self.masked_forward = tf.function(
            lambda ids, mask: masked_forward(model, ids, mask),
            input_signature=[tf.TensorSpec([1, None], tf.int32), tf.TensorSpec([1, None, None], tf.bool)],
        )

    @functools.cached_property
    def greedy(self):
        """The eager greedy tokens of `PROMPTS`, `STEPS` new ones each."""
        return self.eager.generate(PROMPTS, STEPS)

    @functools.cached_property
    def beams(self):
        """The eager beam search of `PROMPTS`: (sequences, scores, lengths), `BEAMS` beams."""
        return self.eager.beam_search(PROMPTS, BEAM_STEPS, num_beams=BEAMS, length_penalty=ALPHA)


@pytest.fixture(scope="module")
def models():
    return {}


def model_of(models, position, num_layers=2):
    """The module's `Case` of `position` and `num_layers` (built on first use)."""
    key = (position, num_layers)
    if key not in models:
        models[key] = Case(position, num_layers)
    return models[key]


def next_token(logits):
    return int(np.argmax(np.asarray(logits)[0, -1]))


def reference_recompute(case, prompt, steps):
    """Full forward pass over the window at every step; the window restarts
    from its last W // 2 tokens when it would hold more than W."""
    context, out = list(prompt), []
    for _ in range(steps):
        out.append(next_token(case.forward(np.array([context], np.int32))))
        context.append(out[-1])
        if len(context) > W:
            context = context[-(W // 2) :]
    return out


def masked_forward(model, ids, mask):
    """The blocks' forward pass of `ids` (1, T) with the attention mask `mask` (1, T, T)."""
    x = model.token_embedding(ids)  # relative schemes: no absolute positions
    for block in model.blocks:
        x = block(x, attention_mask=mask, training=False)
    return model.compute_logits(x)


def band_forward(case, sequence, width):
    """Full forward pass of `sequence` where token i attends to j in (i - width, i]."""
    t = len(sequence)
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    band = np.broadcast_to((j <= i) & (i - j < width), (1, t, t))
    return case.masked_forward(np.array([sequence], np.int32), band)


def reference_band(case, prompt, steps):
    sequence, out = list(prompt), []
    for _ in range(steps):
        out.append(next_token(band_forward(case, sequence, W)))
        sequence.append(out[-1])
    return out


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope"])
def test_recompute_path_matches_reference(models, position):
    case = model_of(models, position)
    assert not sliding_window.uses_shift(position)
    assert case.greedy.tolist() == [reference_recompute(case, p, STEPS) for p in PROMPTS]


@pytest.mark.parametrize("position", ["alibi", "relative"])
def test_shift_path_matches_banded_forward(models, position):
    case = model_of(models, position)
    assert sliding_window.uses_shift(position)
    assert case.greedy.tolist() == [reference_band(case, p, STEPS) for p in PROMPTS]


def test_one_layer_shift_is_the_last_window_forward(models):
    """One layer: nothing but the window reaches the last token, so the shift
    path is the plain forward pass over the last W tokens at every step."""
    case = model_of(models, "alibi", num_layers=1)
    for row, prompt in zip(case.greedy.tolist(), PROMPTS):
        sequence = list(prompt)
        for token in row:
            assert token == next_token(case.forward(np.array([sequence[-W:]], np.int32)))
            sequence.append(token)


@pytest.mark.parametrize("position", ["learned", "alibi"])
def test_xla_matches_eager_and_sampling_is_reproducible(models, position):
    case = model_of(models, position)
    xla = Generator(case.model)
    np.testing.assert_array_equal(xla.generate(PROMPTS, STEPS), case.greedy)
    options = dict(sampler="sample", temperature=1.0, top_k=10)
    a = xla.generate(PROMPTS, STEPS, seed=[1, 2], **options)
    np.testing.assert_array_equal(a, xla.generate(PROMPTS, STEPS, seed=[1, 2], **options))
    assert not np.array_equal(a, xla.generate(PROMPTS, STEPS, seed=[3, 4], **options))


def test_rows_independent_and_first_window_unchanged(models):
    case = model_of(models, "learned")
    g, tokens = case.eager, case.greedy
    # The first tokens are those of a call that fits the context (no window).
    np.testing.assert_array_equal(tokens[:, :2], g.generate(PROMPTS, 2))
    # A row does not depend on the others in its batch (rows restart their windows at different steps).
    np.testing.assert_array_equal(tokens[:2], g.generate(PROMPTS[:2], STEPS))
    np.testing.assert_array_equal(tokens[2:], g.generate(PROMPTS[2:], STEPS))


def test_eos_lengths_and_scores_past_the_context(models):
    case = model_of(models, "learned")
    g, free = case.eager, case.greedy
    eos = int(free[0, 12])  # emitted after the first window restart of row 0
    tokens, lengths = g.generate(PROMPTS, STEPS, eos_id=eos, return_lengths=True)
    for b in range(len(PROMPTS)):
        hits = np.flatnonzero(free[b] == eos)
        n = hits[0] + 1 if hits.size else STEPS
        assert lengths[b] == n
        np.testing.assert_array_equal(tokens[b, :n], free[b, :n])
        assert (tokens[b, n:] == 0).all()
    tokens, scores = g.generate(PROMPTS, STEPS, output_scores=True)
    assert scores.shape == (len(PROMPTS), STEPS, 23)
    np.testing.assert_array_equal(scores.argmax(-1), free)


def test_limits_past_the_context(models):
    model = model_of(models, "learned").model
    assert generate(model, [[1] * W], 3).shape == (1, 3)  # a full prompt slides at once
    with pytest.raises(ValueError, match="exceeds the model's maximum length 8"):
        generate(model, [[1] * (W + 1)], 3)
    with pytest.raises(ValueError, match="exceeds the model's maximum length 8"):
        beam_search(model, [[1] * (W + 1)], 3, num_beams=2)


# --------------------------------------------------------------------------- beam search
BEAMS = 3
ALPHA = 0.6
BEAM_STEPS = 13  # two window restarts of the longest prompt


def window_of(sequence, prompt_length):
    """The tokens a row sees after `sequence` (prompt + new tokens) by the recompute rule."""
    length = prompt_length
    for _ in range(len(sequence) - prompt_length):
        length += 1
        if length > W:
            length = W // 2
    return sequence[-length:]


def reference_beam(case, prompt, steps, shift, eos=-1, pad=0):
    """Beam search where every step runs the full forward pass on each beam: over its window
    (recompute path) or over its whole sequence with the width-W band (shift path). GNMT length
    penalty, finished beams frozen (they emit `pad`), ties to the lower (beam, token) index.

    Returns:
        `(tokens (K, steps), scores (K,))` best first.
    """
    beams = [(list(prompt), 0.0, 0, False)]  # (sequence, log-prob, length, finished)
    lp = lambda n: ((5.0 + n) / 6.0) ** ALPHA  # noqa: E731
    for _ in range(steps):
        if all(b[3] for b in beams):
            break
        alive = [b[0] for b in beams if not b[3]]
        if shift:
            logits = np.concatenate([np.asarray(band_forward(case, seq, W))[:, -1] for seq in alive])
        else:
            windows = np.array([window_of(seq, len(prompt)) for seq in alive], np.int32)
            logits = np.asarray(case.forward(windows))[:, -1]  # one window length per step
        logp = logits.astype(np.float64) - np.log(np.exp(logits.astype(np.float64)).sum(-1, keepdims=True))
        candidates, row = [], 0
        for seq, score, length, finished in beams:
            if finished:
                candidates.append((score / lp(length), seq + [pad], score, length, True))
                continue
            for v in range(logp.shape[1]):
                cand = score + logp[row, v]
                candidates.append((cand / lp(length + 1), seq + [v], cand, length + 1, v == eos))
            row += 1
        order = sorted(range(len(candidates)), key=lambda c: -candidates[c][0])[:BEAMS]
        beams = [candidates[c][1:] for c in order]
    beams.sort(key=lambda b: -b[1] / lp(b[2]))
    tokens = [b[0][len(prompt) :] + [pad] * (steps - (len(b[0]) - len(prompt))) for b in beams]
    return np.array(tokens), np.array([b[1] / lp(b[2]) for b in beams])


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "relative"])
def test_beam_search_past_the_context_matches_reference(models, position):
    """Beams slide their windows as greedy rows do (issue 15 §2): token for token the naive search."""
    case = model_of(models, position)
    shift = sliding_window.uses_shift(position)
    sequences, scores, lengths = case.beams
    for b, prompt in enumerate(PROMPTS):
        tokens, want = reference_beam(case, prompt, BEAM_STEPS, shift)
        np.testing.assert_array_equal(sequences[b], tokens, err_msg=f"{position} prompt {b}")
        np.testing.assert_allclose(scores[b], want, rtol=1e-4)
    assert (lengths == BEAM_STEPS).all()


def test_beam_search_past_the_context_eos_and_narrower_width(models):
    """EOS freezes beams past the context; a loop of K beams with n active is the width-n search."""
    case = model_of(models, "learned")
    g, (free, _, _) = case.eager, case.beams
    eos = int(free[0, 0, 9])  # emitted by the best beam after the first window restart of row 0
    # The default length penalty here (GNMT's 0.6 = ALPHA of the reference).
    sequences, scores, lengths = g.beam_search(PROMPTS, BEAM_STEPS, num_beams=BEAMS, eos_id=eos)
    for b, prompt in enumerate(PROMPTS):
        tokens, want = reference_beam(case, prompt, BEAM_STEPS, shift=False, eos=eos)
        np.testing.assert_array_equal(sequences[b], tokens)
        np.testing.assert_allclose(scores[b], want, rtol=1e-4)
    assert (lengths < BEAM_STEPS).any()
    (ids, prompt_lengths), cache_length, _ = prompts.prepare(g, "beam_search", PROMPTS, BEAM_STEPS, {})
    out = g.beam_search_fn(
        ids, prompt_lengths, BEAM_STEPS, ALPHA, -1, num_beams=BEAMS, cache_length=cache_length,
        active_beams=tf.constant(2), sliding=True,
    )  # fmt: skip
    narrow, narrow_scores, _ = g.beam_search(PROMPTS, BEAM_STEPS, num_beams=2)
    np.testing.assert_array_equal(out["sequences"].numpy()[:, :2, :BEAM_STEPS], narrow)
    np.testing.assert_allclose(out["scores"].numpy()[:, :2], narrow_scores, rtol=1e-5)
