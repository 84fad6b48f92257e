"""Time of the attention-core variants vs sequence length T.

full (attention_impl="standard") vs chunked vs local vs linear, on projected
heads (the core `dot_product_attention` only, no projections): batch 1,
4 heads, head dim 64, float32, `tf.function` (no XLA). Forward = the
output; forward+backward = the gradients of sum(output²) w.r.t. q, k and v.
Every variant is causal through the `causal=True` flag, as the layers pass it
(no T × T mask), except "chunked" (non-causal: every block, the reference for
the block skipping of "chunked+c").

Times are the fastest of `--repeats` calls after a warm-up call, as wall-clock
and as process CPU time (all threads; less sensitive to other load on the
machine).

Usage: python bench/attention_variants.py [--lengths 512 1024 2048 4096 8192]
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # one tf.function per variant and T: retracing is intended

from keras_tfm.layers import attention  # noqa: E402  (importing it registers the implementations)


def make_step(impl, options, causal, backward):
    @tf.function
    def step(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out, _ = attention.dot_product_attention(
                q, k, v, causal=causal, attention_impl=impl, attention_options=options
            )
            loss = tf.reduce_sum(tf.square(out))
        if backward:
            return tape.gradient(loss, [q, k, v])
        return [out]

    return step


def measure(step, args, repeats):
    [t.numpy() for t in step(*args)]  # trace + warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        [t.numpy() for t in step(*args)]
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=128)
    args = parser.parse_args()

    variants = [
        ("full", "standard", {}, True),
        ("chunked", "chunked", {"query_chunk_size": 512, "key_chunk_size": 1024}, False),
        ("chunked+c", "chunked", {"query_chunk_size": 512, "key_chunk_size": 1024}, True),
        (f"local w={args.window}", "local", {"window": args.window}, True),
        ("linear", "linear", {}, True),
    ]
    print(
        f"Attention core only, causal, batch 1, {args.heads} heads, head dim {args.head_dim}, float32, "
        f"tf.function (no XLA); fastest of {args.repeats} calls; ms.\n"
        "chunked: query_chunk_size=512, key_chunk_size=1024, non-causal; chunked+c: same with causal=True (skips "
        "the blocks above the diagonal); linear: elu+1 features, chunk_size=64.\n",
        flush=True,
    )
    header = f"{'T':>6} {'variant':<12} {'fwd wall':>9} {'fwd cpu':>9} {'f+b wall':>9} {'f+b cpu':>9} {'f+b cpu vs full':>16}"
    print(header)
    print("-" * len(header), flush=True)
    total = time.perf_counter()
    rng = np.random.default_rng(0)
    for length in args.lengths:
        shape = (1, length, args.heads, args.head_dim)
        q, k, v = (tf.constant(rng.normal(size=shape), tf.float32) for _ in range(3))
        full_cpu = None
        for name, impl, options, causal in variants:
            fwd = measure(make_step(impl, options, causal, False), (q, k, v), args.repeats)
            both = measure(make_step(impl, options, causal, True), (q, k, v), args.repeats)
            if full_cpu is None:
                full_cpu = both[1]
            print(
                f"{length:>6} {name:<12} {fwd[0] * 1e3:>9.1f} {fwd[1] * 1e3:>9.1f} {both[0] * 1e3:>9.1f} "
                f"{both[1] * 1e3:>9.1f} {both[1] / full_cpu:>15.2f}x",
                flush=True,
            )
    print(f"\ntotal bench time {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
