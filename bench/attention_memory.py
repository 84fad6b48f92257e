"""Peak memory and time of one attention layer, forward + backward.

Compares, at T = 1024 … 8192 (batch 1, d_model 256, 4 heads, causal):

  * keras_tfm `MultiHeadSelfAttention(attention_impl="chunked")`, and the same
    with `attention_options={"causal": True}` (skips blocks above the diagonal)
  * keras_tfm `MultiHeadSelfAttention(attention_impl="standard")`
  * `keras.layers.MultiHeadAttention(use_causal_mask=True)`

Each configuration runs in a fresh subprocess. The step is a `tf.function`
computing the layer output, a scalar loss and the gradients w.r.t. the input
and all layer weights (what training needs).

Memory method: TensorFlow's CPU allocator keeps byte-exact statistics
(`tf.config.experimental.get_memory_info("CPU:0")`, which works on CPU with TF
2.21). After one warm-up step (tracing), `reset_memory_stats` is called and a
second step is run; the reported "peak" is that step's allocator high-water
mark minus the bytes live before it (weights, input), i.e. the transient
working memory of forward + backward. As a cross-check the child also reports
the growth of the process's resident-set high-water mark (`ru_maxrss`) over the
first (cold) step, which includes allocator/arena overheads.

Usage: python bench/attention_memory.py [--lengths 1024 2048 4096 8192] [--repeats 3]
"""

import argparse
import json
import os
import subprocess
import sys
import time

IMPLS = ("keras_mha", "tfm_standard", "tfm_chunked", "tfm_chunked_causal")


def child(impl, length, repeats, d_model, heads, query_chunk, key_chunk):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import resource

    import keras
    import tensorflow as tf

    import keras_tfm.layers as L

    keras.utils.set_random_seed(0)
    if impl == "keras_mha":
        layer = keras.layers.MultiHeadAttention(heads, d_model // heads)

        def apply(x):
            return layer(x, x, use_causal_mask=True)

    else:
        options = {}
        if impl.startswith("tfm_chunked"):
            options = {"query_chunk_size": query_chunk, "key_chunk_size": key_chunk}
            if impl.endswith("_causal"):
                options["causal"] = True  # skip the key blocks above the diagonal
        layer = L.MultiHeadSelfAttention(
            heads, causal=True, attention_impl=impl.split("_")[1], attention_options=options
        )

        def apply(x):
            return layer(x)

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
    print(
        json.dumps(
            {
                "impl": impl,
                "T": length,
                "peak": peak,
                "rss": rss_delta,
                "time": min(times),
                "cpu": min(cpu),
                "cold": cold,
            }
        )
    )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--query-chunk", type=int, default=512)
    parser.add_argument("--key-chunk", type=int, default=1024)
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(
            args.child[0],
            int(args.child[1]),
            args.repeats,
            args.d_model,
            args.heads,
            args.query_chunk,
            args.key_chunk,
        )
        return

    print(
        f"One causal self-attention layer, forward + backward (grads w.r.t. input and weights); "
        f"batch 1, d_model {args.d_model}, {args.heads} heads, float32, tf.function (no XLA); "
        f"chunked: query_chunk_size={args.query_chunk}, key_chunk_size={args.key_chunk}.\n"
        "peak = TF CPU allocator high-water mark of one step minus memory live before it; "
        "rss = growth of process max RSS over the first step (cross-check); "
        f"wall / cpu = fastest of {args.repeats} steps, wall-clock and process CPU time (all threads; "
        "robust to other load on the machine). Each row: fresh subprocess.\n",
        flush=True,
    )
    header = f"{'T':>6} {'implementation':<18} {'peak MiB':>10} {'vs MHA':>7} {'rss MiB':>9} {'wall ms':>9} {'cpu ms':>9} {'cpu vs MHA':>10}"
    print(header)
    print("-" * len(header), flush=True)
    total = time.perf_counter()
    for length in args.lengths:
        results = {}
        for impl in args.impls:
            cmd = [
                sys.executable, __file__, "--child", impl, str(length), "--repeats", str(args.repeats),
                "--d-model", str(args.d_model), "--heads", str(args.heads),
                "--query-chunk", str(args.query_chunk), "--key-chunk", str(args.key_chunk),
            ]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode or not lines:
                print(
                    f"{length:>6} {impl:<18} FAILED (rc={proc.returncode}): {proc.stderr.strip()[-300:]}",
                    flush=True,
                )
                continue
            results[impl] = json.loads(lines[-1])
        base = results.get("keras_mha")
        for impl, r in results.items():
            mem_ratio = f"{r['peak'] / base['peak']:.1%}" if base else "-"
            time_ratio = f"{r['cpu'] / base['cpu']:.2f}x" if base else "-"
            print(
                f"{length:>6} {impl:<18} {r['peak'] / 2**20:>10.1f} {mem_ratio:>7} {r['rss'] / 2**20:>9.1f} "
                f"{r['time'] * 1e3:>9.1f} {r['cpu'] * 1e3:>9.1f} {time_ratio:>10}",
                flush=True,
            )
    print(f"\ntotal bench time {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
