"""Generation past the model's context: a sliding window over the key/value cache.

A decoder trained on `W = max_length` positions can keep generating after
prompt + new tokens pass `W` in one of two ways; `decode_sliding` picks the
one that is exact for the model's position scheme (`model.position`):

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

Both paths run in `keras.ops.while_loop`s with static shapes: an inner
loop of decoding steps (the segments of `keras_tfm.generation.cache`) inside
an outer loop over windows; the steps choose tokens with the global step
number, so seeded sampling is reproducible and independent of where windows
restart.

`slide` runs either path around any step rule: `decode_sliding` (greedy and
sampling) and beam search (`beam.beam_search_loop(sliding=True)`, one row per
beam). A beam step reorders the rows (each new beam continues its parent's
caches and window); the beams of one prompt hold the same number of tokens,
so they restart their windows together and share their padding. Beam search
past the context is therefore beam search whose every step runs the forward
pass over each beam's window (recompute path) or over each beam's whole
sequence with the width-`W` band (shift path).
"""

from keras import ops

from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import decoding

#: Position schemes whose cached keys hold absolute positions: windows are recomputed.
RECOMPUTE_POSITIONS = ("learned", "sinusoidal", "sinusoidal_halves", "rope")
#: Position schemes seen only as query-key distances (None: no positions): the cache is shifted.
SHIFT_POSITIONS = ("alibi", "relative", None)


def uses_shift(position):
    """Whether a model with this position scheme slides by shifting its cache."""
    return position in SHIFT_POSITIONS


def decode_sliding(
    model,
    prompt_ids,
    prompt_lengths,
    max_new_tokens,
    select,
    *,
    cache_length,
    eos_id=-1,
    pad_id=0,
    output_scores=False,
    step=None,
):
    """`decoding.decode` past the model's maximum length (traceable).

    Args:
        model: a decoder (`decoding`) with `max_length` (W) and `position`
            (its position scheme).
        prompt_ids: int32 `(batch, P)` LEFT-padded prompts of at most W real
            tokens each.
        prompt_lengths: int32 `(batch,)`.
        max_new_tokens: int32 scalar, <= `cache_length - P`.
        select: `select(logits, step) -> (batch,)` token chooser.
        cache_length: Python int; `cache_length - P` is the size of the
            token buffer (the caches themselves hold at most 2W slots).
        eos_id, pad_id, output_scores, step: as in `decoding.decode`.

    Returns:
        `decoding.decode`'s dict (tokens `(batch, cache_length - P)`).
    """
    eos_id = ops.cast(eos_id, "int32")
    max_new_tokens = ops.cast(max_new_tokens, "int32")
    state = decoding.start_state(
        ops.shape(prompt_ids)[0],
        cache_length - prompt_ids.shape[1],
        pad_id,
        model.vocabulary_size,
        output_scores,
    )

    def choose(s):
        new, token = decoding.emit(s, select, eos_id, pad_id, output_scores)
        return new, token, None

    def keep_going(s):
        return ops.logical_and(s["i"] < max_new_tokens, ops.logical_not(ops.all(s["done"])))

    state = slide(
        model,
        model.decode_step if step is None else step,
        state,
        ops.cast(prompt_ids, "int32"),
        ops.cast(prompt_lengths, "int32"),
        step=choose,
        done=lambda s: s["done"],
        keep_going=keep_going,
        pad_id=pad_id,
    )
    out = {"tokens": state["tokens"], "lengths": state["lengths"]}
    if output_scores:
        out["scores"] = state["scores"]
    return out


def slide(model, model_step, outputs, prompt_ids, prompt_lengths, *, step, done, keep_going, pad_id=0):
    """Runs a decoding loop past the model's maximum length W (traceable).

    Args:
        model: a decoder (`decoding`) with `max_length` and `position`.
        model_step: its step function (`model.decode_step` or a shared one).
        outputs: dict of the loop's outputs before the first step (its step
            counter `"i"` included); carried from window to window.
        prompt_ids: int32 `(rows, P)` LEFT-padded prompts (static P), at most
            W real tokens each.
        prompt_lengths: int32 `(rows,)`.
        step: `step(state) -> (new state, token (rows,), parent)`: chooses
            the next token of every row from `state["logits"]` and records
            it in the outputs; `parent` (int32 `(rows,)`, or None for "row
            itself") names the row whose caches and window each new row
            continues (beam search; a row and its parent share their padding).
        done: `done(state) -> bool (rows,)`, rows that stopped (their
            logits are no longer read).
        keep_going: `keep_going(state) -> bool scalar`.
        pad_id: left-padding id of the recomputed windows.

    Returns:
        The outputs after the last step.
    """
    window = int(model.max_length)
    p = prompt_ids.shape[1]
    if p > window:  # only left padding lies beyond the last W columns
        prompt_ids = prompt_ids[:, p - window :]
    run = _shift if uses_shift(model.position) else _recompute
    state = run(
        model, model_step, outputs, prompt_ids, prompt_lengths, window, step, done, keep_going, pad_id
    )
    return {k: state[k] for k in outputs}


def _reorder(s, parent, keys):
    """`s` with the rows of `keys` (tensors or lists of tensors) taken from the `parent` rows."""
    if parent is None:
        return s
    s = dict(s)
    for key in keys:
        value = s[key]
        if isinstance(value, (list, tuple)):
            s[key] = [cache_lib.gather_beams(v, parent) for v in value]
        else:
            s[key] = cache_lib.gather_beams(value, parent)
    return s


# --------------------------------------------------------------------------- recompute
def _recompute(
    model, model_step, outputs, prompt_ids, prompt_lengths, window, step, done, keep_going, pad_id
):
    """Windows restarted from their last W // 2 tokens, caches recomputed by a prefill."""
    keep = max(window // 2, 1)
    p = prompt_ids.shape[1]
    # Every row's context, right-aligned: context[:, -1] is its latest token.
    context = ops.concatenate(
        [ops.full((ops.shape(prompt_ids)[0], window - p), pad_id, "int32"), prompt_ids], axis=1
    )
    carried = list(outputs) + ["context", "context_length"]

    def run_window(outer, ids, lengths):
        """Prefill the windows, then step until done or some row overflows W."""
        width = ids.shape[1]
        pre = decoding.prefill(model, model_step, ids, lengths, width + window)
        s = dict(
            outer,
            logits=pre["logits"],
            caches=pre["caches"],
            valid=pre["valid"],
            slot=ops.cast(width, "int32"),
            overflow=ops.zeros((), "bool"),
        )

        def body(s, size):
            new, token, parent = step(s)
            s = _reorder(s, parent, ("caches", "valid", "context", "context_length"))
            new["context"] = ops.concatenate([s["context"][:, 1:], token[:, None]], axis=1)
            new["context_length"] = s["context_length"] + 1
            full = ops.logical_and(new["context_length"] > window, ops.logical_not(done(new)))
            new["overflow"] = ops.logical_and(ops.any(full), keep_going(new))
            slot = s["slot"]
            # A row past W is fed at position W - 1 here; the result is discarded
            # (the loop stops on `overflow`) and the next window recomputes it.
            positions = ops.minimum(slot - pre["pad"], window - 1)
            new["valid"] = s["valid"]
            new["logits"], new["caches"] = model_step(
                token[:, None], positions[:, None], s["caches"], slot, s["valid"][:, :size]
            )
            new["slot"] = slot + 1
            return new

        def going(s):
            return ops.logical_and(keep_going(s), ops.logical_not(s["overflow"]))

        s = decoding.run_segments(s, width, pre["sizes"], going, body, slot=lambda s: s["slot"])
        return {k: s[k] for k in carried}

    def next_window(outer):
        lengths = ops.where(outer["context_length"] > window, keep, outer["context_length"])
        real = ops.arange(window, dtype="int32")[None, :] >= (window - lengths)[:, None]
        ids = ops.where(real, outer["context"], pad_id)
        return (run_window(dict(outer, context_length=lengths), ids, lengths),)

    # The first window is the prompt itself (its context is at most W tokens): one loop body
    # (one prefill and one step to trace and compile) serves every window.
    state = dict(outputs, context=context, context_length=prompt_lengths)
    (state,) = _while(keep_going, next_window, state)
    return state


# --------------------------------------------------------------------------- shift
def _shift(model, model_step, outputs, prompt_ids, prompt_lengths, window, step, done, keep_going, pad_id):
    """A causal band of W tokens; the cache drops its oldest W // 2 slots when full."""
    shift = max(window // 2, 1)
    capacity = window + shift
    p = prompt_ids.shape[1]
    pre = decoding.prefill(model, model_step, prompt_ids, prompt_lengths, capacity)
    state = dict(
        outputs,
        logits=pre["logits"],
        caches=cache_lib.grow_caches(pre["caches"], capacity),
        valid=pre["valid"],
        slot=ops.cast(p, "int32"),
    )
    slots = ops.arange(capacity, dtype="int32")[None, :]

    def body(s, size):
        new, token, parent = step(s)
        s = _reorder(s, parent, ("caches", "valid"))
        slot = s["slot"]
        band = ops.logical_and(s["valid"], slots > slot - window)
        new["valid"] = s["valid"]
        new["logits"], new["caches"] = model_step(
            token[:, None], ops.zeros_like(token)[:, None], s["caches"], slot, band
        )
        new["slot"] = slot + 1
        return new

    def shifted(s):
        """Drops the oldest `shift` slots of every cache and of the slot mask."""
        caches = cache_lib.shift_caches(s["caches"], shift)
        valid = ops.concatenate([s["valid"][:, shift:], ops.ones_like(s["valid"][:, :shift])], axis=1)
        return dict(s, caches=caches, valid=valid, slot=s["slot"] - shift)

    def steps(s):
        """Steps until the cache is full, shifted first when it is (one loop body to compile)."""
        s = ops.cond(s["slot"] >= capacity, lambda: shifted(s), lambda: dict(s))
        return (decoding.run_segments(s, p, (capacity,), keep_going, body, slot=lambda s: s["slot"]),)

    (state,) = _while(keep_going, steps, state)
    return state


def _while(cond, body, state):
    """`keras.ops.while_loop` over a dict state."""
    return ops.while_loop(cond, body, (state,))
