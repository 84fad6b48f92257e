"""Generation past the model's context: a sliding window over the key/value cache.

A decoder trained on `W = max_length` positions can keep generating after
prompt + new tokens pass `W` in one of two ways; `decode_sliding` picks the
one that is exact for the model's position scheme (`adapter.position`):

* **Recompute** (`"learned"`, `"sinusoidal"`, `"rope"`): every row sees the
  tokens since its window start, at positions 0, 1, ...; when appending a
  token would take a row past `W` tokens, its window restarts from its last
  `W // 2` tokens, and the caches of the batch are recomputed from the rows'
  windows in one prefill (a row whose window did not restart is recomputed
  from the same tokens at the same positions: unchanged). This is exactly

      context = prompt
      repeat:  token = choose(model(context)[-1]);  context += [token]
               if len(context) > W:  context = context[-(W // 2):]

  i.e. a full forward pass over the window at every step, at the cost of one
  prefill per `W // 2` tokens. Cached keys carry their absolute position
  (added to the embedding, or the RoPE rotation of the slot they were
  written at), so dropping the oldest slots and keeping the rest would give
  the kept keys the wrong positions: they must be recomputed.

* **Shift** (`"alibi"`, `"relative"`, no positions): the attention logits
  depend on positions only through the distance `i - j` between query and
  key (ALiBi's `-m·(i - j)`, T5's bucket of `i - j`), and nothing else in
  the model sees a position. Each new token attends to itself and the
  `W - 1` tokens before it (a causal band of width `W`, the distances the
  model was trained on); when the cache (`W + W // 2` slots) is full, the
  oldest `W // 2` slots, which no later query can see, are dropped by
  shifting every cache left. Query and keys move together, so every
  distance, hence every logit, is unchanged: no recomputation. This is
  exactly the full forward pass of the whole sequence with the band mask
  `j <= i < j + W` in every layer (sliding-window attention, as Mistral's).
  It differs from the recompute path for models of two or more layers: a
  kept key of layer 2 was computed when its token attended to the `W`
  tokens before it, some of which the current window no longer holds.

Both paths run in `tf.while_loop`s under XLA with static shapes: an inner
loop of decoding steps (the segments of `keras_tfm.generation.cache`) inside
an outer loop over windows; the steps choose tokens with the global step
number, so seeded sampling is reproducible and independent of where windows
restart.
"""

from keras import ops

from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import decoding

#: Position schemes whose cached keys hold absolute positions: windows are recomputed.
RECOMPUTE_POSITIONS = ("learned", "sinusoidal", "rope")
#: Position schemes seen only as query-key distances (None: no positions): the cache is shifted.
SHIFT_POSITIONS = ("alibi", "relative", None)


def uses_shift(position):
    """Whether a model with this position scheme slides by shifting its cache."""
    return position in SHIFT_POSITIONS


def decode_sliding(
    adapter,
    prompt_ids,
    prompt_lengths,
    max_new_tokens,
    select,
    *,
    cache_length,
    eos_id=-1,
    pad_id=0,
    output_scores=False,
):
    """`decoding.decode` past the model's maximum length (traceable).

    Args:
        adapter: a `decoding.DecoderAdapter` with `max_length` (W) and
            `position` (the model's position scheme).
        prompt_ids: int32 `(batch, P)` LEFT-padded prompts of at most W real
            tokens each.
        prompt_lengths: int32 `(batch,)`.
        max_new_tokens: int32 scalar, <= `cache_length - P`.
        select: `select(logits, step) -> (batch,)` token chooser.
        cache_length: Python int; `cache_length - P` is the size of the
            token buffer (the caches themselves hold at most 2W slots).
        eos_id, pad_id, output_scores: as in `decoding.decode`.

    Returns:
        `decoding.decode`'s dict (tokens `(batch, cache_length - P)`).
    """
    window = int(adapter.max_length)
    p = prompt_ids.shape[1]
    num_new = cache_length - p
    if p > window:  # only left padding lies beyond the last W columns
        prompt_ids = prompt_ids[:, p - window :]
    state = decoding.start_state(
        ops.shape(prompt_ids)[0], num_new, pad_id, adapter.vocabulary_size, output_scores
    )
    run = _shift if uses_shift(adapter.position) else _recompute
    state = run(
        adapter,
        state,
        ops.cast(prompt_ids, "int32"),
        ops.cast(prompt_lengths, "int32"),
        window,
        ops.cast(max_new_tokens, "int32"),
        select,
        ops.cast(eos_id, "int32"),
        pad_id,
        output_scores,
    )
    out = {"tokens": state["tokens"], "lengths": state["lengths"]}
    if output_scores:
        out["scores"] = state["scores"]
    return out


def _keep_going(max_new_tokens):
    def keep_going(s):
        return ops.logical_and(s["i"] < max_new_tokens, ops.logical_not(ops.all(s["done"])))

    return keep_going


def _outputs(state, output_scores):
    keys = ["i", "tokens", "lengths", "done"] + (["scores"] if output_scores else [])
    return {k: state[k] for k in keys}


# --------------------------------------------------------------------------- recompute
def _recompute(
    adapter, state, prompt_ids, prompt_lengths, window, max_new_tokens, select, eos_id, pad_id, scores
):
    """Windows restarted from their last W // 2 tokens, caches recomputed by a prefill."""
    keep = max(window // 2, 1)
    keep_going = _keep_going(max_new_tokens)
    p = prompt_ids.shape[1]
    # Every row's context, right-aligned: context[:, -1] is its latest token.
    context = ops.concatenate(
        [ops.full((ops.shape(prompt_ids)[0], window - p), pad_id, "int32"), prompt_ids], axis=1
    )

    def run_window(outer, ids, lengths):
        """Prefill the windows, then step until done or some row overflows W."""
        width = ids.shape[1]
        pre = decoding.prefill(adapter, ids, lengths, width + window)
        s = dict(
            outer,
            logits=pre["logits"],
            caches=pre["caches"],
            valid=pre["valid"],
            slot=ops.cast(width, "int32"),
            overflow=ops.zeros((), "bool"),
        )

        def body(s, size):
            new, token = decoding.emit(s, select, eos_id, pad_id, scores)
            new["context"] = ops.concatenate([s["context"][:, 1:], token[:, None]], axis=1)
            new["context_length"] = s["context_length"] + 1
            full = ops.logical_and(new["context_length"] > window, ops.logical_not(new["done"]))
            new["overflow"] = ops.logical_and(ops.any(full), new["i"] < max_new_tokens)
            slot = s["slot"]
            # A row past W is fed at position W - 1 here; the result is discarded
            # (the loop stops on `overflow`) and the next window recomputes it.
            positions = ops.minimum(slot - pre["pad"], window - 1)
            new["logits"], new["caches"] = adapter.forward(
                token[:, None], positions[:, None], s["caches"], slot, s["valid"][:, :size]
            )
            new["slot"] = slot + 1
            return new

        def going(s):
            return ops.logical_and(keep_going(s), ops.logical_not(s["overflow"]))

        s = decoding.run_segments(s, width, pre["sizes"], going, body, slot=lambda s: s["slot"])
        return _outputs(s, scores) | {"context": s["context"], "context_length": s["context_length"]}

    state = run_window(
        dict(state, context=context, context_length=prompt_lengths), prompt_ids, prompt_lengths
    )

    def next_window(outer):
        lengths = ops.where(outer["context_length"] > window, keep, outer["context_length"])
        real = ops.arange(window, dtype="int32")[None, :] >= (window - lengths)[:, None]
        ids = ops.where(real, outer["context"], pad_id)
        return (run_window(dict(outer, context_length=lengths), ids, lengths),)

    (state,) = _while(keep_going, next_window, state)
    return state


# --------------------------------------------------------------------------- shift
def _shift(
    adapter, state, prompt_ids, prompt_lengths, window, max_new_tokens, select, eos_id, pad_id, scores
):
    """A causal band of W tokens; the cache drops its oldest W // 2 slots when full."""
    shift = max(window // 2, 1)
    capacity = window + shift
    keep_going = _keep_going(max_new_tokens)
    p = prompt_ids.shape[1]
    pre = decoding.prefill(adapter, prompt_ids, prompt_lengths, capacity)
    state = dict(
        state,
        logits=pre["logits"],
        caches=cache_lib.grow_caches(pre["caches"], capacity),
        valid=pre["valid"],
        slot=ops.cast(p, "int32"),
    )
    slots = ops.arange(capacity, dtype="int32")[None, :]

    def body(s, size):
        new, token = decoding.emit(s, select, eos_id, pad_id, scores)
        slot = s["slot"]
        band = ops.logical_and(s["valid"], slots > slot - window)
        new["logits"], new["caches"] = adapter.forward(
            token[:, None], ops.zeros_like(token)[:, None], s["caches"], slot, band
        )
        new["slot"] = slot + 1
        return new

    def steps(s):
        return decoding.run_segments(s, p, (capacity,), keep_going, body, slot=lambda s: s["slot"])

    def shifted(s):
        """Drops the oldest `shift` slots of every cache and of the slot mask."""
        caches = [
            ops.pad(c[:, :, shift:], [[0, 0], [0, 0], [0, shift]] + [[0, 0]] * (len(c.shape) - 3))
            for c in s["caches"]
        ]
        valid = ops.concatenate([s["valid"][:, shift:], ops.ones_like(s["valid"][:, :shift])], axis=1)
        return (steps(dict(s, caches=caches, valid=valid, slot=s["slot"] - shift)),)

    (state,) = _while(keep_going, shifted, steps(state))
    return state


def _while(cond, body, state):
    """`tf.while_loop` over a dict state (TensorFlow: the generation backend)."""
    import tensorflow as tf

    return tf.while_loop(cond, body, (state,))
