"""Peak memory and time of one attention layer, forward + backward (issue 16).

Default table, at T = 2048, 4096, 8192 (batch 1, d_model 256, 4 heads), plus
`--long-lengths` (16384 32768) for the chunked rows only (their memory must grow
linearly):

  * keras_mha          `keras.layers.MultiHeadAttention(use_causal_mask=True)` (the peer)
  * tfm_default        keras_tfm `MultiHeadSelfAttention(causal=True)` with its default
                       `attention_impl="auto"`
  * tfm_standard       the same with `attention_impl="standard"` (full score matrix)
  * tfm_chunked        `attention_impl="chunked"`, a NON-causal layer (every block computed)
  * tfm_chunked_causal `attention_impl="chunked"`, causal (blocks above the diagonal skipped)

`--threshold` measures standard vs chunked (causal) at T = 256 … 2048 and prints the
smallest T from which chunked is both faster (process CPU time) and lighter: the
value of `keras_tfm.layers.attention.dot_product.AUTO_MIN_KEY_LENGTH`.

`--gpt` (issue 16 item 4) trains the lab GPT (4 layers, 4 heads, d 128, vocabulary 65,
dropout 0) at context `--gpt-context` (4096) and batch 1: keras_tfm `gpt(...)` with
`attention_impl="auto"` against the same pre-norm GPT built on
`keras.layers.MultiHeadAttention`; it reports the peak RSS of each child process and
the training-step time (`train_on_batch`, Adam, no XLA).

Each configuration runs in a fresh subprocess. The layer step is a `tf.function`
computing the layer output, a scalar loss and the gradients w.r.t. the input and
all layer weights (what training needs).

Memory method: TensorFlow's CPU allocator keeps byte-exact statistics
(`tf.config.experimental.get_memory_info("CPU:0")`, which works on CPU with TF
2.21). After one warm-up step (tracing), `reset_memory_stats` is called and a
second step is run; the reported "peak" is that step's allocator high-water
mark minus the bytes live before it (weights, input), i.e. the transient
working memory of forward + backward. As a cross-check the child also reports
the growth of the process's resident-set high-water mark (`ru_maxrss`) over the
first (cold) step, which includes allocator/arena overheads.

Usage:
    python bench/attention_memory.py                     # the table (T = 2048 4096 8192 + 16384 32768 chunked)
    python bench/attention_memory.py --lengths 1024 --long-lengths   # a quick look
    python bench/attention_memory.py --threshold
    python bench/attention_memory.py --gpt [--gpt-context 4096]
    python bench/attention_memory.py --core --lengths 8192 --long-lengths   # causal/non-causal, core and layer
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The allocator statistics exist only for TensorFlow's BFC allocator, which TensorFlow picks for
# the CPU on some machines only (on an AMD EPYC: "Cannot reset memory stats for device 'CPU:0'").
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

IMPLS = ("keras_mha", "tfm_default", "tfm_standard", "tfm_chunked", "tfm_chunked_causal")
LONG_IMPLS = ("tfm_default", "tfm_chunked", "tfm_chunked_causal")
LAB_GPT = dict(num_layers=4, num_heads=4, d_model=128, vocabulary_size=65)


def _chunk_options(query_chunk, key_chunk):
    """The chunked path's options: its defaults unless --query-chunk / --key-chunk are given."""
    options = {"query_chunk_size": query_chunk, "key_chunk_size": key_chunk}
    return {name: size for name, size in options.items() if size}


def _layer(impl, heads, d_model, query_chunk, key_chunk):
    import keras

    import keras_tfm.layers as L

    if impl == "keras_mha":
        layer = keras.layers.MultiHeadAttention(heads, d_model // heads)
        return layer, lambda x: layer(x, x, use_causal_mask=True)
    chunks = _chunk_options(query_chunk, key_chunk)
    kwargs = {
        "tfm_default": dict(causal=True),
        "tfm_standard": dict(causal=True, attention_impl="standard"),
        "tfm_chunked": dict(causal=False, attention_impl="chunked", attention_options=chunks),
        "tfm_chunked_causal": dict(causal=True, attention_impl="chunked", attention_options=chunks),
    }[impl]
    layer = L.MultiHeadSelfAttention(heads, **kwargs)
    return layer, layer


def child(impl, length, repeats, d_model, heads, query_chunk, key_chunk):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import resource

    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    layer, apply = _layer(impl, heads, d_model, query_chunk, key_chunk)
    x = tf.random.normal((1, length, d_model))
    apply(x[:, :8])  # build the weights

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = apply(x)
            loss = tf.reduce_sum(tf.square(y))
        grads = tape.gradient(loss, [x] + layer.trainable_weights)
        return loss, grads

    step.get_concrete_function(x)  # trace outside the measured region
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    out = step(x)
    _ = [g.numpy() for g in out[1]]
    cold = time.perf_counter() - start
    rss_delta = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024

    del out
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = step(x)
        _ = [g.numpy() for g in out[1]]
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        del out
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    return {
        "impl": impl,
        "T": length,
        "peak": peak,
        "rss": rss_delta,
        "time": min(times),
        "cpu": min(cpu),
        "cold": cold,
    }


def core_child(length, repeats, d_model, heads, query_chunk, key_chunk):
    """Causal vs non-causal `chunked` attention, forward + backward, interleaved in one process:
    the attention core alone (per-head q, k, v in, gradients w.r.t. them) and the whole layer
    (`MultiHeadSelfAttention`, gradients w.r.t. its input and weights, as `child` times it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    import keras_tfm.layers as L
    from keras_tfm.layers import attention

    keras.utils.set_random_seed(0)
    shape = (1, length, heads, d_model // heads)
    q, k, v = (tf.random.normal(shape) for _ in range(3))
    x = tf.random.normal((1, length, d_model))
    options = _chunk_options(query_chunk, key_chunk)

    def core_step(causal):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                out, _ = attention.dot_product_attention(
                    q, k, v, causal=causal, attention_impl="chunked", attention_options=options
                )
                loss = tf.reduce_sum(tf.square(out))
            return tape.gradient(loss, [q, k, v])

        return step

    def layer_step(causal):
        layer = L.MultiHeadSelfAttention(
            heads, causal=causal, attention_impl="chunked", attention_options=options
        )
        layer(x[:, :8])  # build

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.square(layer(x)))
            return tape.gradient(loss, [x] + layer.trainable_weights)

        return step

    steps = {
        ("core", "full"): core_step(False),
        ("core", "causal"): core_step(True),
        ("layer", "full"): layer_step(False),
        ("layer", "causal"): layer_step(True),
    }
    for step in steps.values():
        step()  # trace and warm up
    cpu = {name: [] for name in steps}
    wall = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            _ = [g.numpy() for g in step()]
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    result = {"T": length}
    for part, kind in steps:
        result[f"{part}_{kind}"] = min(cpu[(part, kind)])
        result[f"{part}_{kind}_wall"] = min(wall[(part, kind)])
    return result


def core(args):
    print(
        "Causal vs non-causal chunked attention, forward + backward, batch 1, "
        f"d_model {args.d_model}, {args.heads} heads: the attention core alone (no projections) and the "
        f"whole MultiHeadSelfAttention layer; process CPU time and wall time, each the fastest of "
        f"{args.repeats} interleaved steps in one process; chunk sizes: the defaults unless given.\n"
    )
    for length in args.lengths + args.long_lengths:
        r = _run_child(args, "core", "chunked", length)
        if r:
            for part in ("core", "layer"):
                full, causal = r[f"{part}_full"], r[f"{part}_causal"]
                full_wall, causal_wall = r[f"{part}_full_wall"], r[f"{part}_causal_wall"]
                print(
                    f"T={length:>6} {part:<5}: CPU non-causal {full * 1e3:9.1f} ms  causal {causal * 1e3:9.1f} ms"
                    f"  ratio {causal / full:.3f} | wall {full_wall * 1e3:9.1f} ms  {causal_wall * 1e3:9.1f} ms"
                    f"  ratio {causal_wall / full_wall:.3f}",
                    flush=True,
                )


def _keras_mha_gpt(c, context):
    """The lab GPT's architecture on keras.layers.MultiHeadAttention (pre-norm, GELU, tied-free head)."""
    import keras

    d = c["d_model"]
    ids = keras.Input((context,), dtype="int32")
    x = keras.layers.Embedding(c["vocabulary_size"], d)(ids)
    x = x + keras.layers.Embedding(context, d)(keras.ops.arange(context)[None, :])
    for _ in range(c["num_layers"]):
        h = keras.layers.LayerNormalization()(x)
        x = x + keras.layers.MultiHeadAttention(c["num_heads"], d // c["num_heads"])(
            h, h, use_causal_mask=True
        )
        h = keras.layers.LayerNormalization()(x)
        x = x + keras.layers.Dense(d)(keras.layers.Dense(4 * d, activation="gelu")(h))
    x = keras.layers.LayerNormalization()(x)
    return keras.Model(ids, keras.layers.Dense(c["vocabulary_size"])(x))


def gpt_child(impl, context, repeats):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import resource

    import keras
    import numpy as np

    import keras_tfm

    keras.utils.set_random_seed(0)
    if impl == "keras_mha":
        model = _keras_mha_gpt(LAB_GPT, context)
    else:
        model = keras_tfm.models.gpt(max_length=context, dropout=0.0, attention_impl=impl, **LAB_GPT)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    tokens = (
        np.random.default_rng(0).integers(0, LAB_GPT["vocabulary_size"], (1, context + 1)).astype("int32")
    )
    x, y = tokens[:, :-1], tokens[:, 1:]
    loss0 = float(model.train_on_batch(x, y))  # trace + first step
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        loss = float(model.train_on_batch(x, y))
        times.append(time.perf_counter() - start)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"impl": impl, "T": context, "rss": rss, "time": min(times), "loss0": loss0, "loss": loss}


def _run_child(args, kind, impl, length):
    cmd = [sys.executable, __file__, "--child", kind, impl, str(length), "--repeats", str(args.repeats),
           "--d-model", str(args.d_model), "--heads", str(args.heads),
           "--query-chunk", str(args.query_chunk or 0), "--key-chunk", str(args.key_chunk or 0)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        print(
            f"{length:>6} {impl:<18} FAILED (rc={proc.returncode}): {proc.stderr.strip()[-400:]}", flush=True
        )
        return None
    return json.loads(lines[-1])


def table(args):
    print(
        f"One self-attention layer, forward + backward (grads w.r.t. input and weights); batch 1, "
        f"d_model {args.d_model}, {args.heads} heads, float32, tf.function (no XLA); chunked: "
        f"query_chunk_size={args.query_chunk or 'default'}, key_chunk_size={args.key_chunk or 'default'} "
        "(default: 512, and 1024: 2 query blocks wide); tfm_chunked is a non-causal "
        "layer, every other row causal.\n"
        "peak = TF CPU allocator high-water mark of one step minus memory live before it; "
        "rss = growth of process max RSS over the first step (cross-check); "
        f"wall / cpu = fastest of {args.repeats} steps, wall-clock and process CPU time (all threads; "
        "less sensitive to other load on the machine). Each row: fresh subprocess.\n",
        flush=True,
    )
    header = (
        f"{'T':>6} {'implementation':<18} {'peak MiB':>10} {'vs MHA':>7} {'rss MiB':>9} {'wall ms':>9} "
        f"{'cpu ms':>9} {'cpu vs MHA':>10} {'vs chunked':>10}"
    )
    print(header)
    print("-" * len(header), flush=True)
    runs = [(t, args.impls) for t in args.lengths] + [(t, LONG_IMPLS) for t in args.long_lengths]
    for length, impls in runs:
        results = {}
        for impl in impls:
            r = _run_child(args, "layer", impl, length)
            if r:
                results[impl] = r
        base, chunked = results.get("keras_mha"), results.get("tfm_chunked")
        for impl, r in results.items():
            mem_ratio = f"{r['peak'] / base['peak']:.1%}" if base else "-"
            time_ratio = f"{r['cpu'] / base['cpu']:.2f}x" if base else "-"
            vs_chunked = f"{r['cpu'] / chunked['cpu']:.2f}x" if chunked else "-"
            print(
                f"{length:>6} {impl:<18} {r['peak'] / 2**20:>10.1f} {mem_ratio:>7} {r['rss'] / 2**20:>9.1f} "
                f"{r['time'] * 1e3:>9.1f} {r['cpu'] * 1e3:>9.1f} {time_ratio:>10} {vs_chunked:>10}",
                flush=True,
            )


def threshold(args):
    print("auto threshold: standard vs chunked (causal layer), forward + backward; cpu ms / peak MiB\n")
    chosen = None
    for length in args.threshold_lengths:
        std = _run_child(args, "layer", "tfm_standard", length)
        chk = _run_child(args, "layer", "tfm_chunked_causal", length)
        if not (std and chk):
            continue
        ok = chk["cpu"] <= std["cpu"] and chk["peak"] <= std["peak"]
        print(
            f"T={length:>6}: standard {std['cpu'] * 1e3:8.1f} ms {std['peak'] / 2**20:8.1f} MiB | chunked "
            f"{chk['cpu'] * 1e3:8.1f} ms {chk['peak'] / 2**20:8.1f} MiB -> {'chunked' if ok else 'standard'}",
            flush=True,
        )
        if ok and chosen is None:
            chosen = length
        elif not ok:
            chosen = None  # must hold from the threshold on
    print(f"\nsmallest T from which chunked is faster and lighter: {chosen} (AUTO_MIN_KEY_LENGTH)")


def gpt(args):
    print(
        f"Lab GPT {LAB_GPT} (dropout 0) at context {args.gpt_context}, batch 1: train_on_batch (Adam, no XLA), "
        f"fastest of {args.repeats} steps after one warm-up; peak = process max RSS (fresh subprocess).\n"
    )
    results = {}
    for impl in ("keras_mha", "auto"):
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "gpt",
            impl,
            str(args.gpt_context),
            "--repeats",
            str(args.repeats),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(f"{impl:<10} FAILED (rc={proc.returncode}): {proc.stderr.strip()[-400:]}", flush=True)
            continue
        results[impl] = r = json.loads(lines[-1])
        print(
            f"{impl:<10} peak RSS {r['rss'] / 2**20:8.0f} MiB   step {r['time'] * 1e3:8.0f} ms   "
            f"loss {r['loss0']:.3f} -> {r['loss']:.3f}",
            flush=True,
        )
    if len(results) == 2:
        a, m = results["auto"], results["keras_mha"]
        print(f"\nauto vs keras MHA: RSS {a['rss'] / m['rss']:.2f}x, step time {a['time'] / m['time']:.2f}x")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="*", default=[2048, 4096, 8192])
    parser.add_argument("--long-lengths", type=int, nargs="*", default=[16384, 32768])
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--query-chunk", type=int, default=None, help="default: the layer's")
    parser.add_argument("--key-chunk", type=int, default=None, help="default: the layer's")
    parser.add_argument(
        "--core", action="store_true", help="causal vs non-causal chunked attention (core and layer) instead"
    )
    parser.add_argument("--threshold", action="store_true", help="measure the auto threshold instead")
    parser.add_argument("--threshold-lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--gpt", action="store_true", help="train the lab GPT at a long context instead")
    parser.add_argument("--gpt-context", type=int, default=4096)
    parser.add_argument("--child", nargs=3, metavar=("KIND", "IMPL", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, impl, length = args.child[0], args.child[1], int(args.child[2])
        if kind == "gpt":
            result = gpt_child(impl, length, args.repeats)
        elif kind == "core":
            result = core_child(
                length, args.repeats, args.d_model, args.heads, args.query_chunk, args.key_chunk
            )
        else:
            result = child(
                impl, length, args.repeats, args.d_model, args.heads, args.query_chunk, args.key_chunk
            )
        print(json.dumps(result))
        return
    total = time.perf_counter()
    if args.threshold:
        threshold(args)
    elif args.gpt:
        gpt(args)
    elif args.core:
        core(args)
    else:
        table(args)
    print(f"\ntotal bench time {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
