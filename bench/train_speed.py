"""Training-step speed: keras_tfm vs KerasHub vs a keras.layers.MultiHeadAttention stack.

For each configuration (small = nanoGPT's CPU settings, medium = a 6-layer d=384 GPT) this builds
three GPT-style decoder-only models of identical sizes:

  * keras_tfm      `keras_tfm.models.gpt` (the builder users get, default options)
  * keras_hub      a stack of `keras_hub.layers.TransformerDecoder` (pre-norm, GELU) with
                   `TokenAndPositionEmbedding` and a Dense head
  * keras_mha      a hand-written pre-norm block on `keras.layers.MultiHeadAttention`

each compiled with and without XLA (`jit_compile`), trains them on the same random token batches in
interleaved rounds (so machine-load drift hits all alike) and prints the median step time,
tokens/s and MFU against a float32 matmul peak measured in the same run.

FLOPs per step use the standard count 6·N·tokens + 12·L·T·d·tokens (N = non-embedding parameters
plus the output projection; the second term is attention's QKᵀ and AV), forward + backward.

Usage:
    python bench/train_speed.py                     # small + medium, all peers
    python bench/train_speed.py --configs small --rounds 5 --steps 20
    python bench/train_speed.py --policy mixed_bfloat16   # keras_tfm under a dtype policy too

keras-hub is a bench-only extra: `pip install -e ".[bench]"`. Missing peers are reported, not faked.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

CONFIGS = {
    "small": dict(num_layers=4, num_heads=4, d_model=128, seq_len=64, batch=12, vocab=65),
    "medium": dict(num_layers=6, num_heads=6, d_model=384, seq_len=256, batch=8, vocab=65),
}


def matmul_peak(n=2048, dtype=tf.float32, repeats=10):
    """Measured matmul throughput (GFLOP/s) of an n×n·n×n product under XLA."""
    a = tf.random.normal((n, n), dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(tf.transpose(a), dtype)
    mm = tf.function(lambda x, y: tf.matmul(x, y), jit_compile=True)
    mm(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        mm(a, b).numpy()
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def build_keras_tfm(c):
    from keras_tfm.models import gpt

    return gpt(
        vocabulary_size=c["vocab"],
        max_length=c["seq_len"],
        num_layers=c["num_layers"],
        num_heads=c["num_heads"],
        d_model=c["d_model"],
        dropout=0.0,
    )


def build_keras_hub(c):
    import keras_hub

    ids = keras.Input((c["seq_len"],), dtype="int32")
    x = keras_hub.layers.TokenAndPositionEmbedding(c["vocab"], c["seq_len"], c["d_model"])(ids)
    for _ in range(c["num_layers"]):
        x = keras_hub.layers.TransformerDecoder(
            intermediate_dim=4 * c["d_model"],
            num_heads=c["num_heads"],
            dropout=0.0,
            activation="gelu",
            normalize_first=True,
        )(x)
    x = keras.layers.LayerNormalization()(x)
    return keras.Model(ids, keras.layers.Dense(c["vocab"])(x))


def build_keras_mha(c):
    d = c["d_model"]
    ids = keras.Input((c["seq_len"],), dtype="int32")
    tok = keras.layers.Embedding(c["vocab"], d)(ids)
    pos = keras.layers.Embedding(c["seq_len"], d)(keras.ops.arange(c["seq_len"])[None, :])
    x = tok + pos
    for _ in range(c["num_layers"]):
        h = keras.layers.LayerNormalization()(x)
        h = keras.layers.MultiHeadAttention(c["num_heads"], d // c["num_heads"])(h, h, use_causal_mask=True)
        x = x + h
        h = keras.layers.LayerNormalization()(x)
        h = keras.layers.Dense(4 * d, activation="gelu")(h)
        x = x + keras.layers.Dense(d)(h)
    x = keras.layers.LayerNormalization()(x)
    return keras.Model(ids, keras.layers.Dense(c["vocab"])(x))


PEERS = {"keras_tfm": build_keras_tfm, "keras_hub": build_keras_hub, "keras_mha": build_keras_mha}


def step_flops(c):
    d, L, T, B, V = c["d_model"], c["num_layers"], c["seq_len"], c["batch"], c["vocab"]
    n = 12 * L * d * d + d * V
    tokens = B * T
    return 6 * n * tokens + 12 * L * T * d * tokens


def make_runner(model, jit, c, data):
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3, weight_decay=0.1, beta_2=0.99, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )
    x, y = data
    model.train_on_batch(x[0], y[0])  # compile / warm up

    def run(steps):
        t = time.perf_counter()
        for i in range(steps):
            loss = model.train_on_batch(x[i % len(x)], y[i % len(y)])
        float(np.asarray(loss))
        return (time.perf_counter() - t) / steps

    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", default=["small", "medium"], choices=sorted(CONFIGS))
    p.add_argument("--peers", nargs="+", default=list(PEERS), choices=list(PEERS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per round per model")
    p.add_argument("--policy", default=None, help="also run keras_tfm under this dtype policy, e.g. mixed_bfloat16")
    args = p.parse_args(argv)

    peak = matmul_peak()
    print(f"matmul peak (float32, 2048^3, XLA): {peak:.1f} GFLOP/s")
    try:
        print(f"matmul peak (bfloat16, 2048^3, XLA): {matmul_peak(dtype=tf.bfloat16):.1f} GFLOP/s")
    except Exception as e:  # pragma: no cover - depends on the CPU
        print(f"bfloat16 matmul unavailable: {e}")

    for name in args.configs:
        c = CONFIGS[name]
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, c["vocab"], (8, c["batch"], c["seq_len"] + 1)).astype("int32")
        data = (tokens[:, :, :-1], tokens[:, :, 1:])
        runners = {}
        variants = [(peer, jit, None) for peer in args.peers for jit in (True, False)]
        if args.policy:
            variants += [("keras_tfm", jit, args.policy) for jit in (True, False)]
        for peer, jit, policy in variants:
            label = f"{peer}{'+xla' if jit else ''}{'/' + policy if policy else ''}"
            try:
                keras.mixed_precision.set_global_policy(policy or "float32")
                keras.utils.set_random_seed(0)
                t = time.perf_counter()
                runners[label] = make_runner(PEERS[peer](c), jit, c, data)
                print(f"  built+compiled {label:32s} in {time.perf_counter() - t:6.1f} s", flush=True)
            except ImportError as e:
                print(f"  {label}: unavailable ({e}); install the bench extra")
            finally:
                keras.mixed_precision.set_global_policy("float32")
        times = {k: [] for k in runners}
        for _ in range(args.rounds):
            for label, run in runners.items():
                times[label].append(run(args.steps))
        flops = step_flops(c)
        tok = c["batch"] * c["seq_len"]
        med = {k: statistics.median(v) for k, v in times.items()}
        peers = [v for k, v in med.items() if not k.startswith("keras_tfm")]
        fastest_peer = min(peers) if peers else None
        print(f"\n[{name}] {c}  step FLOPs {flops / 1e9:.2f} G")
        print(f"{'model':34s} {'ms/step':>9s} {'tokens/s':>10s} {'MFU':>6s} {'vs fastest peer':>16s}")
        for label, t in sorted(med.items(), key=lambda kv: kv[1]):
            ratio = f"{t / fastest_peer:.2f}x" if fastest_peer else "-"
            print(f"{label:34s} {t * 1e3:9.1f} {tok / t:10.0f} {flops / t / 1e9 / peak:6.1%} {ratio:>16s}")
        print()


if __name__ == "__main__":
    main()
