"""Decode cost against memory traffic (issue 14 section 3), on the tiny GPT of
`bench/generate.py` (4 layers, 4 heads, d_model 128, d_ff 512, vocab 65):

* the machine's read bandwidth at every buffer size the tables read (the
  size of one layer's cache, which a step re-reads, so it sits in the same
  level of the memory hierarchy) and from DRAM (1 GiB): NumPy's float32
  `dot(a, a)` (BLAS sdot, one vectorised pass; it reads as fast as a
  hand-written AVX-512 loop of four accumulators on this machine), and, for
  reference, an XLA `reduce_sum` per while-loop step, which on CPU is limited by
  its own arithmetic (about a third of the DRAM rate), not by memory;
* the attention-over-cache part of a decode step: one `MultiHeadSelfAttention`
  layer (4 query heads, head size 32) decoding one token against `context`
  cached positions in an XLA while loop (marginal seconds per step), with the
  bytes of keys and values it must read, so read GB/s and % of the read
  bandwidth at that size, per step and marginal (context 1024 -> 4096: the
  read rate without the step's fixed cost); kv heads 4 / 2 / 1, float32 and
  bfloat16 caches;
* per-token time of the whole model (`decode_step_time`: the body of
  `generate`'s loop over caches already holding `context` positions, no
  prefill) at context 64 / 256 / 1024 / 4096, batch
  1 / 8, kv heads 4 / 2 / 1 (`gpt(num_key_value_heads=...)`), float32 and
  bfloat16 caches (`model.cache_dtype`), the bfloat16 cache's largest logit
  difference against float32, the share of the 4 layers' attention steps in
  a token at context 1024 batch 8, and the kv 4 / kv 1 ratio there.
Every timing is a marginal one (t(1 + n) - t(1)) / n inside one compiled
function, the two lengths interleaved; `--clock process` times them in this
process's CPU seconds (run pinned to one core on a shared machine:
`taskset -c 0 python bench/decode_cost.py --clock process`).

Usage:  python bench/decode_cost.py [--reps 5] [--clock wall|process] [--output bench/results_decode.txt]
        (`python bench/generate.py --decode-only` runs the same)
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if len(os.sched_getaffinity(0)) == 1:  # pinned to one core: one TensorFlow thread (two would take turns)
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import D_MODEL, HEADS, LAYERS, VOCAB, generation_gpt  # noqa: E402
from generate import (  # noqa: E402
    CLOCKS,
    bench_parser,
    collector,
    header,
    prompts,
    save,
)

from keras_tfm.generation import Generator, decoding, samplers  # noqa: E402
from keras_tfm.generation import prompts as prompts_lib  # noqa: E402
from keras_tfm.layers import MultiHeadSelfAttention  # noqa: E402

CONTEXTS = (64, 256, 1024, 4096)
KV_HEADS = (4, 2, 1)
CACHE_DTYPES = ("float32", "bfloat16")

#: Clock of every marginal timing (`--clock`, `generate.CLOCKS`).
clock = CLOCKS["wall"]


def marginal_seconds(fn, n, reps):
    """Median seconds per unit of `n`: (t(1 + n) - t(1)) / n, both calls of one
    compiled function `fn(count)` (tracing and call overhead cancel), the two
    lengths interleaved."""
    fn(tf.constant(1 + n)), fn(tf.constant(1))
    short, long = [], []
    for _ in range(reps):
        t0 = clock()
        fn(tf.constant(1)).numpy()
        short.append(clock() - t0)
        t0 = clock()
        fn(tf.constant(1 + n)).numpy()
        long.append(clock() - t0)
    return max(float(np.median(long) - np.median(short)), 1e-12) / n


def stream_bandwidth(mib=256, reps=5):
    """XLA's read rate in bytes/s: a `reduce_sum` over `mib` MiB of float32 per
    iteration of a while loop, timed like the decoding steps
    (`marginal_seconds`). The sum reads the loop's accumulator too, so XLA
    cannot hoist it out of the loop (it would, for a loop-invariant sum). On
    CPU this is bound by the reduction's own arithmetic, not by memory; the
    bandwidth the tables compare with is `read_bandwidth`."""
    buffer = tf.random.uniform((mib * 2**20 // 4,))

    @tf.function(jit_compile=True)
    def run(count):
        return tf.while_loop(
            lambda i, acc: i < count,
            lambda i, acc: (i + 1, acc + tf.reduce_sum(buffer + acc * 1e-30)),
            (0, 0.0),
        )[1]

    return mib * 2**20 / marginal_seconds(run, 4, reps)


def read_bandwidth(nbytes, reps=5):
    """Read bandwidth in bytes/s over a float32 buffer of `nbytes` read again
    and again (so it sits in the level of the memory hierarchy its size
    selects, like a decoding step's cache): NumPy's `dot(a, a)` (BLAS sdot, a
    vectorised single pass; both operands are the same memory). Fastest of
    `reps` timings of enough passes to take ~20 ms, on this bench's clock."""
    a = np.ones(max(int(nbytes) // 4, 1024), np.float32)
    np.dot(a, a)
    t0 = clock()
    np.dot(a, a)
    passes = max(1, int(0.02 / max(clock() - t0, 1e-6)))
    best = float("inf")
    for _ in range(reps):
        t0 = clock()
        for _ in range(passes):
            np.dot(a, a)
        best = min(best, (clock() - t0) / passes)
    return a.nbytes / max(best, 1e-12)


def random_like(zeros):
    """A cache tensor of `zeros`' shape and dtype holding random normal numbers (as bfloat16 bits
    for a uint16 cache): the layout `init_cache` makes, with contents a step really reads."""
    values = tf.random.normal(zeros.shape)
    if zeros.dtype == "uint16":
        values = tf.bitcast(tf.cast(values, tf.bfloat16), tf.uint16)
    return tf.cast(values, zeros.dtype)


def cache_read_bytes(batch, context, kv_heads, dtype):
    """Bytes of keys and values one decoding step of one layer reads."""
    return batch * 2 * context * kv_heads * (D_MODEL // HEADS) * np.dtype(dtype).itemsize


def attention_over_cache(batch, context, kv_heads, dtype, steps=32, reps=5):
    """Seconds per decoding step of one self-attention layer over `context` cached
    positions (one token's projections, the cache write, attention over the
    cache, the output projection), in an XLA while loop like `generate`'s."""
    keras.utils.set_random_seed(0)
    layer = MultiHeadSelfAttention(HEADS, num_key_value_heads=kv_heads, causal=True)
    layer.build((batch, 1, D_MODEL))
    cache = tuple(random_like(zeros) for zeros in layer.init_cache(batch, context, dtype=dtype))
    x = tf.random.normal((batch, 1, D_MODEL))

    @tf.function(jit_compile=True)
    def run(count):
        def body(i, cache, acc):
            y, cache = layer(x + acc, cache=cache, cache_index=context - 1)
            return i + 1, tuple(cache), acc + 1e-6 * y[:1, :1, :1]

        return tf.while_loop(lambda i, c, a: i < count, body, (0, cache, tf.zeros((1, 1, 1))))[2]

    return marginal_seconds(run, steps, reps)


def bfloat16_cache_error(model, batch=2, context=256, new=32):
    """Largest |logit difference| of greedy decoding with a bfloat16 vs float32
    cache (same tokens fed: scores of the float32 run's steps), and the logit scale."""
    ids = prompts(batch, context, seed=2)
    model.cache_dtype = None
    tokens, ref = Generator(model).generate(ids, new, output_scores=True)
    model.cache_dtype = "bfloat16"
    tokens_bf16, scores = Generator(model).generate(ids, new, output_scores=True)
    model.cache_dtype = None
    # Steps up to the first differing token (later ones see different inputs).
    same = int(np.cumprod(np.all(tokens == tokens_bf16, axis=0)).sum())
    steps = max(same, 1)
    return float(np.abs(scores[:, :steps] - ref[:, :steps]).max()), float(np.abs(ref).max())


def decode_step_time(model, context, batch=1, steps=32, reps=5):
    """Seconds per decoding step of the whole model at `context`: the body of
    `generate`'s loop (greedy choice, token record, `model.decode_step` of
    one token, slot mask) run `1 + steps` and `1` times in one XLA while loop
    over caches of `context + 64` slots holding random keys and values from
    slot `context` on, marginal time per step (`marginal_seconds`). No prefill:
    its run-to-run noise (±15 ms for 8 x 1024 prompt tokens) would swamp the
    difference of a few dozen steps."""
    slots = context + prompts_lib.MIN_CACHE_LENGTH
    caches = [random_like(zeros) for zeros in model.init_caches(batch, slots)]
    select = samplers.make_selector("greedy", 0, 1.0, 0, 1.0)
    state = dict(
        decoding.start_state(batch, steps + 1, 0, VOCAB),
        logits=tf.random.normal((batch, VOCAB)),
        caches=caches,
        valid=tf.ones((batch, slots), bool),
    )
    eos, pad = tf.constant(-1), tf.zeros((batch,), tf.int32)

    @tf.function(jit_compile=True)
    def run(count):
        def body(s):
            new, token = decoding.emit(s, select, eos, 0)
            slot = context + s["i"]
            new["logits"], new["caches"] = model.decode_step(
                token[:, None], (slot - pad)[:, None], s["caches"], slot, s["valid"]
            )
            return (new,)

        (out,) = tf.while_loop(lambda s: s["i"] < count, body, (state,))
        return out["logits"]

    return marginal_seconds(run, steps, reps)


def decode_cost_tables(emit, reps, contexts=CONTEXTS):
    """Bandwidth, attention-over-cache and whole-model per-token tables."""
    dram = read_bandwidth(2**30, reps=3)
    xla = stream_bandwidth(reps=reps)
    emit(
        f"read bandwidth from DRAM (1 GiB float32): {dram / 1e9:.1f} GB/s NumPy dot(a, a) (BLAS sdot); "
        f"{xla / 1e9:.1f} GB/s XLA reduce_sum over 256 MiB per while-loop step (bound by its arithmetic). "
        "Each row below is compared with the NumPy rate over a buffer of the same size as the cache it "
        "reads (same level of the memory hierarchy)."
    )
    emit()
    emit(
        f"attention over the cache, one layer, one decoding step ({HEADS} query heads, head size "
        f"{D_MODEL // HEADS}; projections, cache write, attention, output projection):"
    )
    emit(
        "  GB/s = key/value bytes read / step time; bw = read bandwidth over a buffer of that size; "
        "marginal = (bytes(4096) - bytes(1024)) / (time(4096) - time(1024)), the cache-read rate without "
        "the step's fixed cost (vs the 4096 row's bw)"
    )
    emit(
        f"{'context':>8} {'batch':>5} {'kv heads':>8} {'cache':>8} {'MiB read':>9} {'ms/step':>8} "
        f"{'GB/s':>6} {'bw GB/s':>8} {'% of bw':>8} {'marginal GB/s':>14} {'% of bw':>8}"
    )
    bandwidth_at = {}
    step = {}
    for batch in (1, 8):
        for kv in KV_HEADS:
            for dtype in CACHE_DTYPES:
                for context in (1024, 4096):
                    seconds = attention_over_cache(batch, context, kv, dtype, reps=reps)
                    step[(context, batch, kv, dtype)] = seconds
                    nbytes = cache_read_bytes(batch, context, kv, dtype)
                    if nbytes not in bandwidth_at:
                        bandwidth_at[nbytes] = read_bandwidth(nbytes, reps=reps)
                    bandwidth = bandwidth_at[nbytes]
                    rate = nbytes / seconds
                    marginal = ""
                    if context == 4096:
                        extra = nbytes - cache_read_bytes(batch, 1024, kv, dtype)
                        delta = seconds - step[(1024, batch, kv, dtype)]
                        m = extra / delta if delta > 0 else float("inf")
                        marginal = f"{m / 1e9:>14.1f} {100 * m / bandwidth:>7.0f}%"
                    emit(
                        f"{context:>8} {batch:>5} {kv:>8} {dtype:>8} {nbytes / 2**20:>9.2f} "
                        f"{seconds * 1e3:>8.3f} {rate / 1e9:>6.1f} {bandwidth / 1e9:>8.1f} "
                        f"{100 * rate / bandwidth:>7.0f}% {marginal}"
                    )
    emit()
    emit(
        f"per-token decode time, whole model ({LAYERS} layers; ms per step of generate's loop body at "
        "`context` cached positions, marginal over 32 steps, no prefill: decode_step_time):"
    )
    emit(f"{'kv heads':>8} {'cache':>8} " + " ".join(f"{f'{c} b{b}':>10}" for c in contexts for b in (1, 8)))
    per_token = {}
    for kv in KV_HEADS:
        model = generation_gpt(
            max_length=2 * max(contexts) + 64, num_key_value_heads=None if kv == HEADS else kv
        )
        for dtype in CACHE_DTYPES:
            model.cache_dtype = dtype
            row = []
            for context in contexts:
                for batch in (1, 8):
                    t = decode_step_time(model, context, batch=batch, reps=reps)
                    per_token[(kv, dtype, context, batch)] = t
                    row.append(f"{t * 1e3:>10.3f}")
            emit(f"{kv:>8} {dtype:>8} " + " ".join(row))
        if kv == KV_HEADS[0]:
            err, scale = bfloat16_cache_error(model)
            emit(
                f"# bfloat16 cache vs float32: max |logit diff| {err:.2e} (logits up to {scale:.2f}), context 256"
            )
    emit()
    if 1024 in contexts:
        for kv in KV_HEADS:
            for dtype in CACHE_DTYPES:
                total = per_token[(kv, dtype, 1024, 8)]
                attention = LAYERS * step[(1024, 8, kv, dtype)]
                # The step attends over P + 64 slots (a call of up to 64 new tokens, `prompts.call_cache_length`).
                nbytes = LAYERS * cache_read_bytes(8, 1024 + prompts_lib.MIN_CACHE_LENGTH, kv, dtype)
                rate, bandwidth = nbytes / total, read_bandwidth(nbytes, reps=reps)
                emit(
                    f"context 1024 batch 8, kv heads {kv}, {dtype} cache: {total * 1e3:.3f} ms/token = "
                    f"{LAYERS} x attention step {attention * 1e3:.3f} ms ({100 * attention / total:.0f}%) + "
                    f"{(total - attention) * 1e3:.3f} ms rest (FFN, norms, logits, sampling, loop); "
                    f"{nbytes / 2**20:.1f} MiB of cache per token = {rate / 1e9:.1f} GB/s over the whole "
                    f"token ({100 * rate / bandwidth:.0f}% of {bandwidth / 1e9:.1f} GB/s at that size)"
                )
        for kv in KV_HEADS[1:]:
            for dtype in CACHE_DTYPES:
                ratio = per_token[(KV_HEADS[0], dtype, 1024, 8)] / per_token[(kv, dtype, 1024, 8)]
                emit(
                    f"kv heads {KV_HEADS[0]} / {kv} per-token time, context 1024 batch 8, {dtype} cache: "
                    f"{ratio:.2f}x (target >= 2.5x for 1)"
                )
    emit()


def main(argv=None):
    args = bench_parser(__doc__, "results_decode.txt").parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    emit, lines = collector()
    header(emit, args.reps, args.clock)
    decode_cost_tables(emit, args.reps)
    save(args.output, lines)


if __name__ == "__main__":
    sys.exit(main())
