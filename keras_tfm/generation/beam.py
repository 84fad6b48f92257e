"""Beam search over cached decoding, in the same segmented while loop.

Each batch item keeps `K` beams, stored as `batch * K` rows of the caches
(row `b*K + k` is beam `k` of item `b`). At every step:

    log p  = log_softmax(logits)                                (B, K, V)
    cand   = score[b, k] + log p[b, k, v]     (alive beams)
             score[b, k] (only v = pad_id)    (finished beams: frozen)
    len    = length + 1 (alive), length (finished)
    rank candidates by  cand / lp(len),  lp(n) = ((5 + n) / 6)^α   (GNMT)
    keep the top K; gather tokens, scores, lengths, finished flags and the
    caches of their parent beams; a beam finishes when it emits `eos_id`.

Finished beams are frozen: they keep their score and length and emit
`pad_id`; they compete with alive beams through their normalised score. The
loop stops when every beam of every item is finished or after
`max_new_tokens` steps. With one beam this is exactly greedy decoding.

Past the model's maximum length (`sliding=True`, decoder-only models) the
same step runs inside `sliding_window.slide`: every beam's window follows
the rule of greedy generation for the model's position scheme.
"""

import keras
from keras import ops

from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import decoding, sliding_window

NEG = decoding.NEG_INF


def length_penalty_factor(length, alpha):
    """GNMT length penalty lp(n) = ((5 + n) / 6)^α, float32."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, ops.cast(alpha, "float32"))


def beam_search_loop(
    model,
    prompt_ids,
    prompt_lengths,
    max_new_tokens,
    *,
    num_beams,
    cache_length,
    length_penalty=0.6,
    eos_id=-1,
    pad_id=0,
    context=None,
    active_beams=None,
    sliding=False,
    step=None,
    constrain=None,
):
    """Traceable beam search (use inside `tf.function(jit_compile=True)`).

    Args:
        model: a decoder (`decoding`).
        prompt_ids: int32 `(batch, P)` left-padded prompts.
        prompt_lengths: int32 `(batch,)`.
        max_new_tokens: int32 scalar.
        num_beams: Python int `K`.
        cache_length: Python int; `cache_length - P` is the size of the
            token buffer (`max_new_tokens` <= it).
        length_penalty: α (float scalar tensor or number).
        eos_id: int32 scalar (-1: never finishes early).
        pad_id: Python int.
        context: the model's context of the `batch` rows (tiled here).
        active_beams: optional int32 scalar `n` in [1, K] (a request input):
            beams `n .. K-1` are kept dead (finished, score -1e9), so the
            search is exactly a width-`n` search in a loop compiled for K;
            its results are the first `n` of the K returned.
        sliding: go past the model's maximum length W (decoder-only
            models): every beam slides its window by the rule of
            `generation.sliding_window` for the model's position scheme
            (beams of one prompt hold the same number of tokens, so they
            restart their windows at the same step).
        step: the step function (default `model.decode_step`).
        constrain: optional `constrain(log_probs (batch * K, V), step) -> log_probs`, the
            request's forced / suppressed tokens (`constraints.apply_constraints`), applied
            to the alive beams' log-probabilities before they are ranked.

    Returns:
        dict: `sequences` int32 `(batch, K, cache_length - P)` sorted best
        first, `scores` float32 `(batch, K)` (log-prob / lp(length)),
        `log_probs` float32 `(batch, K)`, `lengths` int32 `(batch, K)`.
    """
    k = int(num_beams)
    static_p = prompt_ids.shape[1]
    num_new = cache_length - (static_p if static_p is not None else ops.shape(prompt_ids)[1])
    batch = ops.shape(prompt_ids)[0]
    max_new_tokens = ops.cast(max_new_tokens, "int32")
    alpha = ops.cast(length_penalty, "float32")
    first = ops.concatenate([ops.zeros((1,), "float32"), ops.full((k - 1,), NEG, "float32")], axis=0)
    state = {
        "i": ops.zeros((), "int32"),
        "sequences": ops.full((batch, k, num_new), pad_id, dtype="int32"),
        "log_probs": ops.broadcast_to(first[None, :], (batch, k)),
        "finished": ops.zeros((batch, k), "bool"),
        "lengths": ops.zeros((batch, k), "int32"),
    }
    spare = None
    if active_beams is not None:  # beams >= n: dead from the start, and after every step
        spare = ops.broadcast_to(
            ops.arange(k, dtype="int32")[None, :] >= ops.cast(active_beams, "int32"), (batch, k)
        )
        state["log_probs"] = ops.where(spare, NEG, state["log_probs"])
        state["finished"] = spare
    step = model.decode_step if step is None else step
    choose = beam_step(
        batch, k, model.vocabulary_size, alpha, ops.cast(eos_id, "int32"), pad_id, spare, constrain
    )

    def keep_going(s):
        return ops.logical_and(s["i"] < max_new_tokens, ops.logical_not(ops.all(s["finished"])))

    if sliding:
        if context is not None:
            raise ValueError("A sliding window is for decoder-only models (no encoder context).")
        state = sliding_window.slide(
            model,
            step,
            state,
            cache_lib.tile_beams(ops.cast(prompt_ids, "int32"), k),
            cache_lib.tile_beams(ops.cast(prompt_lengths, "int32"), k),
            step=choose,
            done=lambda s: ops.reshape(s["finished"], (-1,)),
            keep_going=keep_going,
            pad_id=pad_id,
        )
    else:
        state = search_in_context(
            model, step, state, prompt_ids, prompt_lengths, cache_length, context, k, choose, keep_going
        )
    scores = state["log_probs"] / length_penalty_factor(state["lengths"], alpha)
    order_scores, order = ops.top_k(scores, k)
    order = ops.cast(order, "int32")
    return {
        "sequences": ops.take_along_axis(state["sequences"], order[:, :, None], axis=1),
        "scores": order_scores,
        "log_probs": ops.take_along_axis(state["log_probs"], order, axis=1),
        "lengths": ops.take_along_axis(state["lengths"], order, axis=1),
    }


def beam_step(batch, k, vocab, alpha, eos_id, pad_id, spare=None, constrain=None):
    """The choice of one beam-search step, as a `step(state)` of the decoding loops.

    `step(s)` reads the `(batch * K, V)` next-token logits `s["logits"]` and
    the beams' `i`, `sequences`, `log_probs`, `finished`, `lengths`, and
    returns `(new state, token (batch * K,), parent (batch * K,))`: the new
    beams' tokens and, for every new beam row, the row of its parent (whose
    caches it continues). `spare` `(batch, K)`: beams kept dead; `constrain`: as in
    `beam_search_loop`.
    """
    frozen = ops.where(ops.arange(vocab) == pad_id, 0.0, NEG)  # (V,)
    beam_offsets = (ops.arange(batch, dtype="int32") * k)[:, None]

    def step(s):
        logp = ops.log_softmax(ops.cast(s["logits"], "float32"), axis=-1)
        if constrain is not None:
            logp = constrain(logp, s["i"])
        logp = ops.reshape(logp, (batch, k, vocab))
        finished = s["finished"]
        logp = ops.where(finished[:, :, None], frozen[None, None, :], logp)
        cand = s["log_probs"][:, :, None] + logp
        cand_len = s["lengths"] + ops.cast(ops.logical_not(finished), "int32")
        norm = cand / length_penalty_factor(cand_len, alpha)[:, :, None]
        _, top = ops.top_k(ops.reshape(norm, (batch, k * vocab)), k)
        top = ops.cast(top, "int32")
        parent = top // vocab
        token = top % vocab
        new = dict(s)
        new["log_probs"] = ops.take_along_axis(ops.reshape(cand, (batch, k * vocab)), top, axis=1)
        parent_finished = ops.take_along_axis(finished, parent, axis=1)
        new["lengths"] = ops.take_along_axis(cand_len, parent, axis=1)
        new["finished"] = ops.logical_or(
            parent_finished, ops.logical_and(eos_id >= 0, ops.equal(token, eos_id))
        )
        token = ops.where(parent_finished, pad_id, token)
        if spare is not None:
            new["log_probs"] = ops.where(spare, NEG, new["log_probs"])
            new["finished"] = ops.logical_or(new["finished"], spare)
        sequences = ops.take_along_axis(s["sequences"], parent[:, :, None], axis=1)
        zero = ops.zeros((), "int32")
        new["sequences"] = ops.slice_update(sequences, (zero, zero, s["i"]), token[:, :, None])
        new["i"] = s["i"] + 1
        return new, ops.reshape(token, (-1,)), ops.reshape(parent + beam_offsets, (-1,))

    return step


def search_in_context(
    model, step, state, prompt_ids, prompt_lengths, cache_length, context, k, choose, keep_going
):
    """Beam search within the context: one prefill (tiled to `k` rows per item), then one step
    per token in cache segments. `choose(state) -> (new state, token, parent row)` picks the
    beams (`beam_step`, `beam_hf.hf_beam_step`); each new row continues its parent's caches."""
    pre = decoding.prefill(model, step, prompt_ids, prompt_lengths, cache_length, context)
    p = pre["prompt_length"]
    pad = cache_lib.tile_beams(pre["pad"], k)
    if context is not None:
        context = keras.tree.map_structure(lambda t: cache_lib.tile_beams(t, k), context)
    state = dict(
        state,
        logits=cache_lib.tile_beams(pre["logits"], k),
        caches=[cache_lib.tile_beams(c, k) for c in pre["caches"]],
        valid=cache_lib.tile_beams(pre["valid"], k),
    )
    masked_id = decoding.padding_token(model)

    def body(s, size):
        new, token, parent = choose(s)
        caches = [cache_lib.gather_beams(c, parent) for c in s["caches"]]
        slot = p + s["i"]
        valid = decoding.mark_slot(cache_lib.gather_beams(s["valid"], parent), slot, token, masked_id)
        new["valid"] = valid
        new["logits"], new["caches"] = step(
            token[:, None], (slot - pad)[:, None], caches, slot, valid[:, :size], context
        )
        return new

    return decoding.run_segments(state, p, pre["sizes"], keep_going, body)
