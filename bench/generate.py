"""Generation benchmark: keras_tfm cached decoding vs full recompute vs KerasHub.

Model: tiny GPT-2 layout (4 layers, 4 heads, d_model 128, d_ff 512, vocab 65,
random weights). Workload: prompt 16 → 256 new tokens, greedy, batch 1 and 8.

Rows:
  keras_tfm cached   `CausalLMGenerator.generate` (KV cache, XLA while loop)
  recompute          the same model re-run on the whole (fixed-size) prefix
                     buffer at every step, inside one XLA while loop
  keras_hub GPT2     `keras_hub.models.GPT2CausalLM` of the same sizes
                     (`preprocessor=None`, greedy sampler, XLA)

Also: per-token decode time at context 64 / 256 / 1024 (marginal cost of 32
extra steps in the same compiled function), and first-call (trace + compile)
times. `serving_hook` is where the SavedModel-served vs in-process line plugs
in (export work).

Decode cost against memory traffic (issue 14 section 3):
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
  `taskset -c 0 nice -n 5 python bench/generate.py --decode-only --clock process`).

Usage:  python bench/generate.py [--reps 5] [--no-hub] [--decode-only] [--clock wall|process]
                                 [--out bench/results_generate.txt]
"""

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if len(os.sched_getaffinity(0)) == 1:  # pinned to one core: one TensorFlow thread (two would take turns)
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_tfm.generation import (  # noqa: E402
    CausalLMAdapter,
    CausalLMGenerator,
    decoding,  # noqa: E402
)
from keras_tfm.generation import cache as cache_lib  # noqa: E402
from keras_tfm.layers import MultiHeadSelfAttention  # noqa: E402
from keras_tfm.models import gpt  # noqa: E402

VOCAB, LAYERS, HEADS, D_MODEL, D_FF = 65, 4, 4, 128, 512
PROMPT, NEW = 16, 256
MAX_LENGTH = 2048
CONTEXTS = (64, 256, 1024, 4096)
KV_HEADS = (4, 2, 1)
CACHE_DTYPES = ("float32", "bfloat16")


def build_model(max_length=MAX_LENGTH, num_key_value_heads=None):
    keras.utils.set_random_seed(0)
    kv = {} if num_key_value_heads is None else {"num_key_value_heads": num_key_value_heads}
    return gpt(
        vocabulary_size=VOCAB,
        max_length=max_length,
        num_layers=LAYERS,
        num_heads=HEADS,
        d_model=D_MODEL,
        d_ff=D_FF,
        dropout=0.0,
        **kv,
    )


# --------------------------------------------------------------------------- memory traffic
#: Clock of every marginal timing (`--clock`): wall time, or this process's CPU time
#: (fairer on a shared machine when the process is pinned to one core).
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
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
    tokens, ref = CausalLMGenerator(model).generate(ids, new, output_scores=True)
    model.cache_dtype = "bfloat16"
    tokens_bf16, scores = CausalLMGenerator(model).generate(ids, new, output_scores=True)
    model.cache_dtype = None
    # Steps up to the first differing token (later ones see different inputs).
    same = int(np.cumprod(np.all(tokens == tokens_bf16, axis=0)).sum())
    steps = max(same, 1)
    return float(np.abs(scores[:, :steps] - ref[:, :steps]).max()), float(np.abs(ref).max())


def prompts(batch, length, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, VOCAB, size=(batch, length)).astype(np.int32)


def timed(fn, reps):
    """(first-call seconds, median seconds of `reps` later calls)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return first, float(np.median(times))


# --------------------------------------------------------------------------- candidates
def keras_tfm_cached(generator, batch):
    ids = prompts(batch, PROMPT)
    return lambda: generator.generate(ids, NEW)


def recompute(model, batch):
    """Greedy without a cache: each step runs the model on the whole buffer."""
    total = PROMPT + NEW

    @tf.function(jit_compile=True)
    def run(ids):
        buffer = tf.concat([ids, tf.zeros((tf.shape(ids)[0], NEW), tf.int32)], axis=1)

        def body(t, buffer):
            logits = model(buffer, training=False)  # (B, total, V), causal
            next_token = tf.cast(tf.argmax(logits[:, t - 1], axis=-1), tf.int32)
            onehot = tf.one_hot(t, total, dtype=tf.int32)[None, :]
            buffer = buffer * (1 - onehot) + next_token[:, None] * onehot
            return t + 1, buffer

        _, buffer = tf.while_loop(lambda t, b: t < total, body, (tf.constant(PROMPT), buffer))
        return buffer[:, PROMPT:]

    ids = tf.constant(prompts(batch, PROMPT))
    return lambda: run(ids).numpy()


def keras_hub_gpt2(batch):
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB,
        num_layers=LAYERS,
        num_heads=HEADS,
        hidden_dim=D_MODEL,
        intermediate_dim=D_FF,
        dropout=0.0,
        max_sequence_length=MAX_LENGTH,
    )
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy")
    total = PROMPT + NEW
    token_ids = np.zeros((batch, total), np.int32)
    token_ids[:, :PROMPT] = prompts(batch, PROMPT)
    mask = np.zeros((batch, total), bool)
    mask[:, :PROMPT] = True
    inputs = {"token_ids": token_ids, "padding_mask": mask}
    return lambda: lm.generate(inputs, stop_token_ids=None)


def per_token_time(generator, context, batch=1, extra=cache_lib.MIN_CACHE_LENGTH - 1, reps=5):
    """Marginal seconds per decode step at `context`: prompt of `context`
    tokens, (t(1 + extra) - t(1)) / extra, both in the same compiled bucket
    and, with the default `extra`, in the first cache segment (`context + 64`
    slots). Both calls run the whole prefill, whose run-to-run noise is of the
    order of the difference at long contexts: the fastest of `reps` calls of
    each (noise only adds time)."""
    ids = prompts(batch, context, seed=1)
    generator.generate(ids, 1 + extra)  # compile this bucket
    short, long = [], []
    for _ in range(reps):
        t0 = clock()
        generator.generate(ids, 1)
        short.append(clock() - t0)
        t0 = clock()
        generator.generate(ids, 1 + extra)
        long.append(clock() - t0)
    return max(min(long) - min(short), 0.0) / extra


def decode_step_time(model, context, batch=1, steps=32, reps=5):
    """Seconds per decoding step of the whole model at `context`: the body of
    `generate`'s loop (greedy choice, token record, `model.call_with_cache` of
    one token, slot mask) run `1 + steps` and `1` times in one XLA while loop
    over caches of `context + 64` slots holding random keys and values from
    slot `context` on, marginal time per step (`marginal_seconds`). No prefill:
    its run-to-run noise (±15 ms for 8 x 1024 prompt tokens) would swamp the
    difference of a few dozen steps."""
    adapter = CausalLMAdapter(model)
    slots = context + cache_lib.MIN_CACHE_LENGTH
    caches = [random_like(zeros) for zeros in model.init_caches(batch, slots)]
    select = decoding.make_selector("greedy", 0, 1.0, 0, 1.0)
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
            new["logits"], new["caches"] = adapter.forward(
                token[:, None], (slot - pad)[:, None], s["caches"], slot, s["valid"]
            )
            return (new,)

        (out,) = tf.while_loop(lambda s: s["i"] < count, body, (state,))
        return out["logits"]

    return marginal_seconds(run, steps, reps)


def serving_hook(model, batch):
    """Hook for the export work: return a zero-argument callable running the
    same workload through a SavedModel (prompt 16 → 256 new tokens, greedy),
    or None. Its row is printed as "SavedModel served"."""
    del model, batch
    return None


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
        model = build_model(
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
                # The step attends over the first segment's slots (P + 64, `cache.segment_sizes`).
                nbytes = LAYERS * cache_read_bytes(8, 1024 + cache_lib.MIN_CACHE_LENGTH, kv, dtype)
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


# --------------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-hub", action="store_true", help="skip KerasHub")
    parser.add_argument(
        "--decode-only", action="store_true", help="only the memory-traffic and per-token tables"
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time the marginal rows with wall time or this process's CPU time (shared machine, pinned)",
    )
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_generate.txt")
    )
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    emit(f"# keras_tfm generation benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    emit(
        f"# tensorflow {tf.__version__}, keras {keras.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, devices: {[d.device_type for d in tf.config.list_physical_devices()]}"
    )
    emit(
        f"# tiny GPT: {LAYERS} layers, {HEADS} heads, d_model {D_MODEL}, d_ff {D_FF}, vocab {VOCAB}; "
        f"prompt {PROMPT} -> {NEW} new tokens, greedy; median of {args.reps} runs after the first call; "
        f"clock: {args.clock}; load average {os.getloadavg()[0]:.2f}; CPU affinity {sorted(os.sched_getaffinity(0))}"
    )
    decode_cost_tables(emit, args.reps)
    if args.decode_only:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"saved {args.out}")
        return
    model = build_model()

    results = {}
    candidates = [("keras_tfm cached", None), ("recompute (no cache)", None)]
    if not args.no_hub:
        candidates.append(("keras_hub GPT2CausalLM", None))
    for batch in (1, 8):
        generator = CausalLMGenerator(model)
        runs = {
            "keras_tfm cached": lambda: keras_tfm_cached(generator, batch),
            "recompute (no cache)": lambda: recompute(model, batch),
        }
        if not args.no_hub:
            runs["keras_hub GPT2CausalLM"] = lambda: keras_hub_gpt2(batch)
        hook = serving_hook(model, batch)
        if hook is not None:
            runs["SavedModel served"] = lambda: hook
        for name, make in runs.items():
            try:
                fn = make()
                # The no-cache baseline is slow; fewer repetitions suffice.
                first, median = timed(fn, min(args.reps, 2) if name.startswith("recompute") else args.reps)
                results[(name, batch)] = (first, median, batch * NEW / median)
                print(f"  .. {name} batch {batch}: first {first:.2f}s, run {median:.3f}s", flush=True)
            except Exception as e:  # noqa: BLE001 - report and continue
                results[(name, batch)] = None
                emit(f"# {name} batch {batch} failed: {type(e).__name__}: {e}")

    emit()
    emit(
        f"{'implementation':<24} {'batch':>5} {'first call s':>13} {'run s':>8} {'tokens/s':>10} {'vs keras_hub':>13}"
    )
    for batch in (1, 8):
        hub = results.get(("keras_hub GPT2CausalLM", batch))
        for name in (
            "keras_tfm cached",
            "recompute (no cache)",
            "keras_hub GPT2CausalLM",
            "SavedModel served",
        ):
            r = results.get((name, batch))
            if r is None:
                continue
            first, median, tps = r
            ratio = f"{tps / hub[2]:.2f}x" if hub else "-"
            emit(f"{name:<24} {batch:>5} {first:>13.2f} {median:>8.3f} {tps:>10.0f} {ratio:>13}")

    emit()
    emit("per-token decode time (keras_tfm cached, marginal over 63 steps, prompt = context):")
    emit(f"{'context':>8} {'cache bucket':>13} {'slots attended':>15} {'batch 1 ms':>11} {'batch 8 ms':>11}")
    generator = CausalLMGenerator(model)
    per_token = {}
    for context in (64, 256, 1024):
        t1 = per_token_time(generator, context, batch=1, reps=args.reps)
        t8 = per_token_time(generator, context, batch=8, reps=args.reps)
        per_token[context] = (t1, t8)
        bucket = cache_lib.cache_bucket(context + cache_lib.MIN_CACHE_LENGTH)
        slots = cache_lib.segment_sizes(context, bucket)[0]
        emit(f"{context:>8} {bucket:>13} {slots:>15} {t1 * 1e3:>11.3f} {t8 * 1e3:>11.3f}")
    for i, b in enumerate((1, 8)):
        ratio = per_token[1024][i] / max(per_token[64][i], 1e-9)
        emit(f"per-token time ratio context 1024 / 64, batch {b}: {ratio:.2f}x (target <= 1.5x)")

    hub1 = results.get(("keras_hub GPT2CausalLM", 1))
    ours1 = results.get(("keras_tfm cached", 1))
    hub8 = results.get(("keras_hub GPT2CausalLM", 8))
    ours8 = results.get(("keras_tfm cached", 8))
    if hub1 and ours1 and hub8 and ours8:
        emit(
            f"speed-up vs KerasHub: batch 1 {ours1[2] / hub1[2]:.2f}x, batch 8 {ours8[2] / hub8[2]:.2f}x (target >= 3x)"
        )
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    sys.exit(main())
