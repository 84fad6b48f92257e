"""The decoding loop shared by every generator (GPT, seq2seq, toy functions).

Design
------
*Prompts are left-padded* to a static bucket length `P`, so every row's last
prompt token sits in slot `P - 1` and all rows write the same cache slot at
every step: one scalar `cache_index` serves the whole batch and the layers'
slice update works unchanged. Slot `c` of row `b` holds the token at true
position `c - pad_b` (`pad_b = P - length_b`):

* the padding mask over the cache positions, `(batch, cache_length)`, hides
  slots `< pad_b` from every query (left-padding slots are written with
  harmless finite values and never read);
* position schemes inside attention (RoPE, ALiBi, T5 relative bias) depend
  only on differences of positions, which a per-row constant shift leaves
  unchanged, so the layers can use the slot index as position;
* absolute position embeddings (learned, sinusoidal) get the true per-row
  positions `c - pad_b`: `decode_step` passes them to the model's embedding
  (`model.call_with_cache(..., positions=...)`).

*Prefill*: the whole (padded) prompt goes through the model in one pass,
filling slots `0 .. P-1` of every layer's cache. *Steps*: each iteration of a
`keras.ops.while_loop` chooses one token per row, records it and feeds it back at
slot `P + i` (one query against the cache). Finished rows (EOS emitted) keep
emitting `pad_id`; the loop exits when all rows are finished or
`max_new_tokens` are generated. The loop runs in cache-length segments (see
`keras_tfm.generation.cache`) so a step costs O(current length).

The loops run any *decoder*: a model with the protocol of `generation.generator`
(`vocabulary_size`, `max_length`, `init_caches(batch, length)`, `decode_step(ids,
positions, caches, cache_index, padding_mask, context)` → `(last-position float32
logits, caches)`; `GPT` and `Seq2Seq` implement it). `step` (default
`model.decode_step`) is the function the loops call; a `compiled.SharedStep` is
told to trace itself once for every loop body when a call has several segments.
"""

from keras import ops

from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import compiled

#: Score given to impossible beam candidates (finite, so no inf - inf = NaN).
NEG_INF = -1e9


# --------------------------------------------------------------------------- loop pieces
def padding_token(model):
    """The id a model treats as padding wherever it stands (`mask_zero` embeddings: 0), or None."""
    return 0 if getattr(model, "mask_zero", False) else None


def share(step):
    """Tells a `compiled.SharedStep` that several loop bodies will call it (a no-op for a plain step)."""
    if hasattr(step, "shared"):
        step.shared = True


def prefill(model, step, prompt_ids, prompt_lengths, cache_length, context=None):
    """Runs the left-padded prompts through the model in one pass.

    Returns:
        dict with `logits` (last-position logits), `caches` (first segment
        size), `valid` (bool `(batch, cache_length)`, slots of real tokens or
        later tokens), `pad` (int32 `(batch,)`), `sizes` (segment sizes) and
        `prompt_length` (`P`, int32 scalar).
    """
    prompt_ids = ops.cast(prompt_ids, "int32")
    static_p = prompt_ids.shape[1]
    p = ops.shape(prompt_ids)[1] if static_p is None else static_p
    batch = ops.shape(prompt_ids)[0]
    pad = ops.cast(p, "int32") - ops.cast(prompt_lengths, "int32")
    valid = ops.arange(cache_length, dtype="int32")[None, :] >= pad[:, None]
    masked_id = padding_token(model)
    if masked_id is not None:
        real = ops.not_equal(prompt_ids, masked_id)
        rest = ops.ones((batch, cache_length - p), "bool")
        valid = ops.logical_and(valid, ops.concatenate([real, rest], axis=1))
    positions = ops.arange(p, dtype="int32")[None, :] - pad[:, None]
    sizes = cache_lib.segment_sizes(static_p, cache_length)
    if len(sizes) > 1:
        share(step)
    caches = model.init_caches(batch, sizes[0])
    logits, caches = step(
        prompt_ids, positions, caches, ops.zeros((), "int32"), valid[:, : sizes[0]], context
    )
    return {
        "logits": logits,
        "caches": caches,
        "valid": valid,
        "pad": pad,
        "sizes": sizes,
        "prompt_length": ops.cast(p, "int32"),
    }


def run_segments(state, prompt_length, sizes, keep_going, body, slot=None):
    """Runs `keras.ops.while_loop(keep_going & slot < size, body)` once per segment
    (TensorFlow: `tf.while_loop`; JAX: `lax.while_loop`; PyTorch: a Python loop over
    a compiled step, `compiled.while_loop`).

    `state` is a dict with an int32 step counter `"i"`, the caches under
    `"caches"` and the bool `(batch, cache_length)` slot mask under
    `"valid"`; the body writes slot `prompt_length + i` (or `slot(state)`
    when given). Between segments the caches are zero-padded to the next size
    (log2(L/64) times per call, never per token). `body(state, size)` returns
    the next state; it attends over `size` slots (`state["valid"][:, :size]`).
    """
    if slot is None:

        def slot(s):
            return prompt_length + s["i"]

    for n, size in enumerate(sizes):
        if n:
            state = dict(state, caches=cache_lib.grow_caches(state["caches"], size))

        def cond(s, size=size):
            return ops.logical_and(keep_going(s), slot(s) < size)

        def loop_body(s, size=size):
            return (body(s, size),)

        (state,) = compiled.while_loop(cond, loop_body, (state,))
    return state


def mark_slot(valid, slot, token, masked_id):
    """Marks `slot` invalid for rows whose token is `masked_id` (`padding_token(model)`:
    models with `mask_zero` embeddings treat that id as padding anywhere; None: no-op)."""
    if masked_id is None:
        return valid
    keep = ops.not_equal(token, masked_id)[:, None]  # slots >= P start valid
    return ops.slice_update(valid, (ops.zeros((), "int32"), slot), keep)


def start_state(batch, num_new, pad_id, vocabulary_size, output_scores=False):
    """The per-row outputs of a decoding loop before its first step: step
    counter `i`, `tokens` (`pad_id`), `lengths`, `done` (and `scores`)."""
    state = {
        "i": ops.zeros((), "int32"),
        "done": ops.zeros((batch,), "bool"),
        "tokens": ops.full((batch, num_new), pad_id, dtype="int32"),
        "lengths": ops.zeros((batch,), "int32"),
    }
    if output_scores:
        state["scores"] = ops.zeros((batch, num_new, vocabulary_size), "float32")
    return state


def emit(s, select, eos_id, pad_id, output_scores=False):
    """One decoding step's choice: the token of every row from `s["logits"]`
    (`pad_id` for finished rows), recorded at step `s["i"]`.

    Returns:
        `(new state, token (batch,))`; `i` is advanced, the caller feeds
        `token` back to the model.
    """
    i = s["i"]
    token = ops.cast(select(s["logits"], i), "int32")
    token = ops.where(s["done"], pad_id, token)
    new = dict(s)
    zero = ops.zeros((), "int32")
    new["tokens"] = ops.slice_update(s["tokens"], (zero, i), token[:, None])
    if output_scores:
        new["scores"] = ops.slice_update(s["scores"], (zero, i, zero), s["logits"][:, None, :])
    new["lengths"] = s["lengths"] + ops.cast(ops.logical_not(s["done"]), "int32")
    new["done"] = ops.logical_or(s["done"], ops.logical_and(eos_id >= 0, ops.equal(token, eos_id)))
    new["i"] = i + 1
    return new, token


def decode(
    model,
    prompt_ids,
    prompt_lengths,
    max_new_tokens,
    select,
    *,
    cache_length,
    eos_id=-1,
    pad_id=0,
    context=None,
    output_scores=False,
    step=None,
):
    """THE decoding loop: prefill, then one token per step in a while loop (a one-token
    prompt, a seq2seq decoder's start, skips the prefill: `decode_from_start`).

    Traceable (inside `tf.function(jit_compile=True)` or `jax.jit`; PyTorch
    runs it eagerly); all inputs other
    than the model, `select`, `cache_length`, `pad_id` and `output_scores`
    may be tensors.

    Args:
        model: a decoder (module docstring).
        prompt_ids: int32 `(batch, P)`, LEFT-padded prompts.
        prompt_lengths: int32 `(batch,)`, real tokens per row (>= 1).
        max_new_tokens: int32 scalar, <= cache_length - P.
        select: `select(logits, step) -> (batch,)` token chooser.
        cache_length: Python int, cache slots (>= P + max_new_tokens).
        eos_id: int32 scalar; a row stops after emitting it (-1: never).
        pad_id: Python int, emitted by finished rows.
        context: the model's per-row context (seq2seq: `encode_context`).
        output_scores: also return the logits of every step.
        step: the step function (default `model.decode_step`).

    Returns:
        dict: `tokens` int32 `(batch, cache_length - P)` (new tokens, `pad_id`
        after EOS and beyond `max_new_tokens`), `lengths` int32 `(batch,)`
        (new tokens per row, EOS included), and `scores` float32
        `(batch, cache_length - P, vocab)` if `output_scores`.
    """
    step = model.decode_step if step is None else step
    eos_id = ops.cast(eos_id, "int32")
    max_new_tokens = ops.cast(max_new_tokens, "int32")

    def keep_going(s):
        return ops.logical_and(s["i"] < max_new_tokens, ops.logical_not(ops.all(s["done"])))

    masked_id = padding_token(model)  # the id a mask_zero model masks; `pad_id` fills finished rows
    if prompt_ids.shape[1] == 1:  # one start token (seq2seq): no prefill pass, see `decode_from_start`
        batch = ops.shape(prompt_ids)[0]
        state = decode_from_start(
            model,
            step,
            prompt_ids,
            start_state(batch, cache_length - 1, pad_id, model.vocabulary_size, output_scores),
            cache_length=cache_length,
            context=context,
            keep_going=keep_going,
            emit_token=lambda s: emit(s, select, eos_id, pad_id, output_scores),
        )
        return _outputs(state, output_scores)
    pre = prefill(model, step, prompt_ids, prompt_lengths, cache_length, context)
    p, pad = pre["prompt_length"], pre["pad"]
    batch = ops.shape(pre["logits"])[0]
    num_new = cache_length - (prompt_ids.shape[1] if prompt_ids.shape[1] is not None else p)
    state = dict(
        start_state(batch, num_new, pad_id, model.vocabulary_size, output_scores),
        logits=pre["logits"],
        caches=pre["caches"],
        valid=pre["valid"],
    )

    def body(s, size):
        new, token = emit(s, select, eos_id, pad_id, output_scores)
        slot = p + s["i"]
        new["valid"] = mark_slot(s["valid"], slot, token, masked_id)
        new["logits"], new["caches"] = step(
            token[:, None], (slot - pad)[:, None], s["caches"], slot, new["valid"][:, :size], context
        )
        return new

    return _outputs(run_segments(state, p, pre["sizes"], keep_going, body), output_scores)


def decode_from_start(model, step, start_ids, state, *, cache_length, context, keep_going, emit_token):
    """`decode` of one-token prompts (a seq2seq decoder's start token): step i feeds the token
    of slot i (the start token, then the token chosen at step i − 1) and chooses the next one.

    The same steps as prefill-then-loop, without the separate prefill pass: a traced call
    holds the decoder once (in the loop body) instead of twice, and runs max_new_tokens
    steps instead of max_new_tokens + 1.

    Args:
        start_ids: int32 `(batch, 1)`.
        state: `start_state(...)` of `cache_length - 1` new tokens.
        cache_length, context: `decode`'s.
        keep_going, emit_token: `decode`'s loop condition and `emit` with its options.

    Returns:
        The loop's final state.
    """
    batch = ops.shape(start_ids)[0]
    masked_id = padding_token(model)
    sizes = cache_lib.segment_sizes(1, cache_length)
    if len(sizes) > 1:
        share(step)
    state = dict(
        state,
        token=ops.cast(start_ids[:, 0], "int32"),
        caches=model.init_caches(batch, sizes[0]),
        valid=ops.ones((batch, cache_length), "bool"),
    )

    def body(s, size):
        slot = s["i"]
        valid = mark_slot(s["valid"], slot, s["token"], masked_id)
        positions = ops.zeros((batch, 1), "int32") + slot
        logits, caches = step(s["token"][:, None], positions, s["caches"], slot, valid[:, :size], context)
        new, token = emit_token(dict(s, logits=logits))
        del new["logits"]
        return dict(new, token=token, caches=caches, valid=valid)

    return run_segments(state, 0, sizes, keep_going, body, slot=lambda s: s["i"])


def _outputs(state, output_scores):
    """`decode`'s dict from the loop's final state."""
    out = {"tokens": state["tokens"], "lengths": state["lengths"]}
    if output_scores:
        out["scores"] = state["scores"]
    return out
