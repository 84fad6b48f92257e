"""Generation benchmark: keras_tfm cached decoding vs full recompute vs KerasHub.

Model: tiny GPT-2 layout (4 layers, 4 heads, d_model 128, d_ff 512, vocab 65,
random weights). Workload: prompt 16 → 256 new tokens, greedy, batch 1 and 8.

Rows:
  keras_tfm cached   `Generator.generate` (KV cache, XLA while loop)
  recompute          the same model re-run on the whole (fixed-size) prefix
                     buffer at every step, inside one XLA while loop
  keras_hub GPT2     `keras_hub.models.GPT2CausalLM` of the same sizes
                     (`preprocessor=None`, greedy sampler, XLA)

Also: per-token decode time at context 64 / 256 / 1024 (marginal cost of 32
extra steps in the same compiled function), and first-call (trace + compile)
times. Before the first row a trivial XLA function is compiled and run, so the
process's one-time TensorFlow/XLA start-up is charged to no row (it used to
fall on whichever row ran first, keras_tfm's). `serving_hook` is where the SavedModel-served vs in-process line plugs
in (export work).

The decode-cost tables against memory traffic (issue 14 section 3) are
`bench/decode_cost.py` (`--decode-only` here runs it).

Usage:  python bench/generate.py [--reps 5] [--no-hub] [--decode-only] [--clock wall|process]
                                 [--output bench/results_generate.txt]
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
from _common import (  # noqa: E402
    D_FF,
    D_MODEL,
    HEADS,
    LAYERS,
    NEW,
    PROMPT,
    VOCAB,
    generation_gpt,
    keras_hub_gpt2_generate,
)

from keras_tfm.generation import Generator  # noqa: E402
from keras_tfm.generation import cache as cache_lib  # noqa: E402
from keras_tfm.generation import prompts as prompts_lib  # noqa: E402

#: Clock of every marginal timing (`--clock`): wall time, or this process's CPU time
#: (fairer on a shared machine when the process is pinned to one core).
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
clock = CLOCKS["wall"]


def header(emit, reps, clock_name):
    """The three `#` lines that open a results file: date, versions, model and clock."""
    emit(f"# keras_tfm generation benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    emit(
        f"# tensorflow {tf.__version__}, keras {keras.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, devices: {[d.device_type for d in tf.config.list_physical_devices()]}"
    )
    emit(
        f"# tiny GPT: {LAYERS} layers, {HEADS} heads, d_model {D_MODEL}, d_ff {D_FF}, vocab {VOCAB}; "
        f"prompt {PROMPT} -> {NEW} new tokens, greedy; median of {reps} runs after the first call; "
        f"clock: {clock_name}; load average {os.getloadavg()[0]:.2f}; CPU affinity {sorted(os.sched_getaffinity(0))}"
    )


def bench_parser(doc, results_file):
    """Options both generation benches take: --reps, --clock, --output (default `bench/<results_file>`)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time the marginal rows with wall time or this process's CPU time (shared machine, pinned)",
    )
    parser.add_argument(
        "--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), results_file)
    )
    return parser


def collector():
    """(emit, lines): `emit(line)` prints a line and keeps it in `lines`."""
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    return emit, lines


def save(path, lines):
    """Writes `lines` to `path` under a temporary name, then renames it (never half-written)."""
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)
    print(f"saved {path}")


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
    return keras_hub_gpt2_generate(prompts(batch, PROMPT), NEW)


def per_token_time(generator, context, batch=1, extra=prompts_lib.MIN_CACHE_LENGTH - 1, reps=5):
    """Marginal seconds per decode step at `context`: prompt of `context`
    tokens, (t(1 + extra) - t(1)) / extra, both in the same compiled bucket
    and, with the default `extra`, in one cache segment of `context + 64`
    slots. Both calls run the whole prefill, whose run-to-run noise is of the
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


def serving_hook(model, batch):
    """Hook for the export work: return a zero-argument callable running the
    same workload through a SavedModel (prompt 16 → 256 new tokens, greedy),
    or None. Its row is printed as "SavedModel served"."""
    del model, batch
    return None


# --------------------------------------------------------------------------- main
def main(argv=None):
    parser = bench_parser(__doc__, "results_generate.txt")
    parser.add_argument("--no-hub", action="store_true", help="skip KerasHub")
    parser.add_argument(
        "--decode-only",
        action="store_true",
        help="run bench/decode_cost.py instead (memory-traffic and per-token tables, to results_decode.txt)",
    )
    args = parser.parse_args(argv)
    if args.decode_only:
        import decode_cost  # bench/, beside this file

        return decode_cost.main(["--reps", str(args.reps), "--clock", args.clock])
    global clock
    clock = CLOCKS[args.clock]

    emit, lines = collector()
    header(emit, args.reps, args.clock)
    model = generation_gpt()
    tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True)(tf.ones((4,))).numpy()  # XLA start-up

    results = {}
    candidates = [("keras_tfm cached", None), ("recompute (no cache)", None)]
    if not args.no_hub:
        candidates.append(("keras_hub GPT2CausalLM", None))
    for batch in (1, 8):
        generator = Generator(model)
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
    emit(f"{'context':>8} {'cache length':>13} {'slots attended':>15} {'batch 1 ms':>11} {'batch 8 ms':>11}")
    generator = Generator(model)
    per_token = {}
    for context in (64, 256, 1024):
        t1 = per_token_time(generator, context, batch=1, reps=args.reps)
        t8 = per_token_time(generator, context, batch=8, reps=args.reps)
        per_token[context] = (t1, t8)
        length = prompts_lib.call_cache_length(context, prompts_lib.MIN_CACHE_LENGTH - 1)
        slots = cache_lib.segment_sizes(context, length)[0]
        emit(f"{context:>8} {length:>13} {slots:>15} {t1 * 1e3:>11.3f} {t8 * 1e3:>11.3f}")
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
    save(args.output, lines)


if __name__ == "__main__":
    sys.exit(main())
