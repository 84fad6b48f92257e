"""HuggingFace's beam search (`GenerationMixin._beam_search`, transformers 5), over cached decoding.

The same tokens and scores as HuggingFace `generate(num_beams=K, length_penalty=α,
early_stopping=...)` for a model with the same logits; the loop of `beam` (GNMT) ranks
differently (see the table at the end). Each batch item keeps `K` *running* beams (raw
sums of log-probabilities, initially `[0, -1e9, …]`) and a *pool* of `K` finished
hypotheses (scores initially -1e9). At step `i` (tokens generated so far):

    log p   = processor(log_softmax(logits), i)                   (B·K, V), float32
    cand    = running[b, k] + log p[b, k, v]; keep the top 2K by raw score
    hit     = token == eos_id  or  i + 1 == max_new_tokens       (stopping criteria)
    running ← the best K candidates that did not hit (raw score; a hit counts -1e9)
    pool    ← best K of  pool ∪ { cand / (i + 1)^α : hit, among the first K of the 2K }
              (nothing enters while the item cannot improve, or, with
              early_stopping=True, once its pool holds K hypotheses)
    improvable[b] &= best running[b] / L^α > worst pooled[b]      (a pool not yet full: always)
              L = i + 1 (early_stopping False / True), max_new_tokens ("never" with α > 0)

The loop ends when no item can improve, when every pool is full with
`early_stopping=True`, or after `max_new_tokens` steps (where every remaining
candidate "hits" and the best K enter the pool with length `max_new_tokens`). The
length of a hypothesis counts its generated tokens, EOS included, not the prompt
(decoder-only) or the decoder start token (seq2seq). The result is the pool, best
first: its tokens (`pad_id` after a hypothesis' end), penalised scores (HuggingFace's
`sequences_scores`) and lengths. With `active_beams=n` the loop compiled for `K`
searches exactly `n` beams (running beams `n…K-1` dead, the pool read in its first `n`
slots); the first `n` results are that search's.

Interface (all traceable; encoder–decoder models pass their `context`, e.g.
`Generator.decoder_inputs` → `model.encode_context(...)`, which is tiled to the beams):

    hf_beam_search_loop(model, prompt_ids, prompt_lengths, max_new_tokens, *, num_beams,
        cache_length, length_penalty=1.0, early_stopping=False, eos_id=-1, pad_id=0,
        context=None, active_beams=None, sliding=False, step=None, processor=None)
      → {"sequences": (B, K, N) int32, "scores": (B, K) float32, "log_probs": (B, K),
         "lengths": (B, K) int32}

`processor(log_probs (B·K, V), i) -> log_probs` applies logits processors in
log-probability space, as HuggingFace's beam search does (no renormalisation: a
forced token adds 0); `forced_tokens_processor` builds the usual ones (forced BOS at
the first step, forced EOS at the last, banned ids). `Generator.beam_search(...,
length_penalty_style="hf", early_stopping=...)` runs this loop.

Where the GNMT loop of `beam` differs: it ranks candidates by the penalised score
((5 + n) / 6)^α at every step, keeps finished beams in the K slots (fewer live
beams), takes the top K (not 2K) candidates, and stops only when every beam has
finished.
"""

from keras import ops

from keras_tfm.generation import beam as beam_lib
from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import decoding, sliding_window

NEG = decoding.NEG_INF
#: `early_stopping` values (HuggingFace's): stop an item when its pool is full (True), when
#: no running beam can beat its worst hypothesis at the current length (False), or at the
#: best length the penalty allows ("never").
EARLY_STOPPING = (True, False, "never")


def check_early_stopping(value: object) -> bool | str:
    """One of `EARLY_STOPPING` (bools as bools); a ValueError naming `early_stopping` otherwise."""
    if isinstance(value, bool) or (isinstance(value, str) and value == "never"):
        return value
    raise ValueError(f"Unknown `early_stopping` {value!r}; expected one of {list(EARLY_STOPPING)}.")


def forced_tokens_processor(
    vocabulary_size, max_new_tokens, forced_bos_id=None, forced_eos_id=None, banned_ids=()
):
    """HuggingFace's `ForcedBOSTokenLogitsProcessor` (step 0: only `forced_bos_id`),
    `ForcedEOSTokenLogitsProcessor` (step `max_new_tokens - 1`: only `forced_eos_id`) and
    `NoBadWordsLogitsProcessor` for single ids (`banned_ids` never chosen), as a
    `processor(log_probs, i)` of `hf_beam_search_loop` (forced steps: 0 on the token,
    -inf elsewhere; HuggingFace's rules for a one-token decoder prompt)."""
    ids = ops.arange(vocabulary_size, dtype="int32")[None, :]
    last = ops.cast(max_new_tokens, "int32") - 1

    def process(log_probs, i):
        neg_inf = ops.full_like(log_probs, float("-inf"))
        for token in banned_ids:
            log_probs = ops.where(ids == token, neg_inf, log_probs)
        for token, step in ((forced_bos_id, 0), (forced_eos_id, last)):
            if token is not None:
                forced = ops.where(ids == token, ops.zeros_like(log_probs), neg_inf)
                log_probs = ops.where(ops.equal(i, step), forced, log_probs)
        return log_probs

    return process


def hf_beam_search_loop(
    model,
    prompt_ids,
    prompt_lengths,
    max_new_tokens,
    *,
    num_beams,
    cache_length,
    length_penalty=1.0,
    early_stopping=False,
    eos_id=-1,
    pad_id=0,
    context=None,
    active_beams=None,
    sliding=False,
    step=None,
    processor=None,
):
    """Traceable HuggingFace beam search (module docstring).

    Args:
        model: a decoder (`decoding`).
        prompt_ids: int32 `(batch, P)` left-padded prompts (seq2seq: decoder prompts).
        prompt_lengths: int32 `(batch,)`.
        max_new_tokens: int32 scalar >= 1, <= `cache_length - P`.
        num_beams: Python int `K`.
        cache_length: Python int (the token buffer holds `cache_length - P`).
        length_penalty: α of `score = sum log p / length^α` (float scalar or tensor).
        early_stopping: Python True, False or "never" (`EARLY_STOPPING`).
        eos_id: int32 scalar (-1: none; hypotheses then finish at `max_new_tokens`).
        pad_id: Python int, the tokens after a hypothesis' end.
        context: the model's context of the `batch` rows (encoder–decoder models).
        active_beams: optional int32 scalar `n` in [1, K]: search `n` beams.
        sliding: decoder-only models past their maximum length (`sliding_window`).
        step: the model's step function (default `model.decode_step`).
        processor: optional `processor(log_probs (B·K, V), i) -> log_probs`.

    Returns:
        dict: `sequences` int32 `(batch, K, cache_length - P)` best first, `scores` float32
        `(batch, K)` (penalised, HuggingFace's `sequences_scores`), `log_probs` (their raw
        sums), `lengths` int32 `(batch, K)` (generated tokens, EOS included).
    """
    k = int(num_beams)
    early_stopping = check_early_stopping(early_stopping)
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
        "pool_sequences": ops.full((batch, k, num_new), pad_id, dtype="int32"),
        "pool_scores": ops.full((batch, k), NEG, "float32"),
        "pool_finished": ops.zeros((batch, k), "bool"),
        "pool_lengths": ops.zeros((batch, k), "int32"),
        "improvable": ops.ones((batch,), "bool"),
    }
    width = None if active_beams is None else ops.cast(active_beams, "int32")
    choose = hf_beam_step(
        batch, k, model.vocabulary_size, alpha, early_stopping, eos_id, max_new_tokens, width, processor
    )
    in_pool = _pool_slots(k, width)

    def keep_going(s):
        going = ops.logical_and(s["i"] < max_new_tokens, ops.any(s["improvable"]))
        if early_stopping is True:
            full = ops.all(ops.logical_or(s["pool_finished"], ops.logical_not(in_pool)))
            going = ops.logical_and(going, ops.logical_not(full))
        return going

    step = model.decode_step if step is None else step
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
            done=lambda s: ops.zeros((batch * k,), "bool"),
            keep_going=keep_going,
            pad_id=pad_id,
        )
    else:
        state = beam_lib.search_in_context(
            model, step, state, prompt_ids, prompt_lengths, cache_length, context, k, choose, keep_going
        )
    lengths = state["pool_lengths"]
    return {
        "sequences": state["pool_sequences"],
        "scores": state["pool_scores"],
        "log_probs": state["pool_scores"] * _penalty(ops.maximum(lengths, 1), alpha),
        "lengths": lengths,
    }


def _penalty(length, alpha):
    """length^α, float32."""
    return ops.power(ops.cast(length, "float32"), alpha)


def _pool_slots(k, width):
    """Bool `(1, K)`: the pool slots of a width-`width` search (all K when None)."""
    if width is None:
        return ops.ones((1, k), "bool")
    return ops.arange(k, dtype="int32")[None, :] < width


def hf_beam_step(batch, k, vocab, alpha, early_stopping, eos_id, max_new_tokens, width=None, processor=None):
    """One step of HuggingFace's beam search as a `step(state)` of the decoding loops.

    `step(s)` reads the `(batch * K, V)` logits `s["logits"]`, the running beams
    (`sequences`, `log_probs`) and the pool (`pool_*`, `improvable`) at step `s["i"]`, and
    returns `(new state, token (batch * K,), parent (batch * K,))`: the running beams'
    tokens and the rows whose caches they continue.
    """
    eos_id = ops.cast(eos_id, "int32")
    beam_offsets = (ops.arange(batch, dtype="int32") * k)[:, None]
    in_pool = _pool_slots(k, width)
    top_k_mask = ops.arange(2 * k, dtype="int32")[None, :] < (k if width is None else width)

    def step(s):
        i = s["i"]
        log_probs = ops.log_softmax(ops.cast(s["logits"], "float32"), axis=-1)
        if processor is not None:
            log_probs = processor(log_probs, i)
        scores = s["log_probs"][:, :, None] + ops.reshape(log_probs, (batch, k, vocab))
        top_scores, top = ops.top_k(ops.reshape(scores, (batch, k * vocab)), 2 * k)
        top = ops.cast(top, "int32")
        parent, token = top // vocab, top % vocab
        zero = ops.zeros((), "int32")
        candidates = ops.take_along_axis(s["sequences"], parent[:, :, None], axis=1)
        candidates = ops.slice_update(candidates, (zero, zero, i), token[:, :, None])
        hit = ops.logical_or(ops.logical_and(eos_id >= 0, ops.equal(token, eos_id)), i + 1 >= max_new_tokens)
        new = dict(s)

        # The next running beams: the best K candidates that did not finish.
        running_scores = top_scores + ops.cast(hit, "float32") * NEG
        kept_scores, kept = ops.top_k(running_scores, k)
        kept = ops.cast(kept, "int32")
        if width is not None:
            kept_scores = ops.where(in_pool, kept_scores, NEG)
        new["log_probs"] = kept_scores
        new["sequences"] = ops.take_along_axis(candidates, kept[:, :, None], axis=1)
        new_token = ops.take_along_axis(token, kept, axis=1)
        new_parent = ops.take_along_axis(parent, kept, axis=1) + beam_offsets

        # The pool: finished candidates among the first K, penalised, when the item may still improve.
        finished = ops.logical_and(hit, top_k_mask)
        penalised = top_scores / _penalty(i + 1, alpha)
        pool_full = ops.all(ops.logical_or(s["pool_finished"], ops.logical_not(in_pool)), axis=1)
        if early_stopping is True:
            penalised = penalised + ops.cast(pool_full, "float32")[:, None] * NEG
        penalised = penalised + ops.cast(ops.logical_not(s["improvable"]), "float32")[:, None] * NEG
        penalised = penalised + ops.cast(ops.logical_not(finished), "float32") * NEG
        merged_scores = ops.concatenate([s["pool_scores"], penalised], axis=1)
        pool_scores, best = ops.top_k(merged_scores, k)
        best = ops.cast(best, "int32")
        merged_sequences = ops.concatenate([s["pool_sequences"], candidates], axis=1)
        merged_finished = ops.concatenate([s["pool_finished"], finished], axis=1)
        new_length = ops.broadcast_to(i + 1, ops.shape(token))
        merged_lengths = ops.concatenate([s["pool_lengths"], new_length], axis=1)
        new["pool_scores"] = pool_scores
        new["pool_sequences"] = ops.take_along_axis(merged_sequences, best[:, :, None], axis=1)
        new["pool_finished"] = ops.take_along_axis(merged_finished, best, axis=1)
        new["pool_lengths"] = ops.take_along_axis(merged_lengths, best, axis=1)

        # Can a running beam still beat the worst pooled hypothesis? (sticky once False)
        length = i + 1
        if early_stopping == "never":
            length = ops.where(alpha > 0.0, max_new_tokens, length)
        best_running = kept_scores[:, 0] / _penalty(length, alpha)
        pooled = ops.where(in_pool, new["pool_scores"], float("inf"))
        worst = ops.where(new["pool_finished"], ops.min(pooled, axis=1, keepdims=True), NEG)
        better = ops.any(ops.logical_and(best_running[:, None] > worst, in_pool), axis=1)
        new["improvable"] = ops.logical_and(s["improvable"], better)
        new["i"] = i + 1
        return new, ops.reshape(new_token, (-1,)), ops.reshape(new_parent, (-1,))

    return step


__all__ = [
    "EARLY_STOPPING",
    "check_early_stopping",
    "forced_tokens_processor",
    "hf_beam_search_loop",
    "hf_beam_step",
]
