"""Training-step speed: keras_tfm vs KerasHub vs a keras.layers.MultiHeadAttention stack (vs PyTorch).

For each configuration (small = nanoGPT's CPU settings, medium = a 6-layer d=384 GPT) this builds
GPT-style decoder-only models of identical sizes (pre-norm, GELU, biases, learned positions):

  * keras_tfm      `keras_tfm.models.gpt` (the builder users get, default options)
  * keras_hub      a stack of `keras_hub.layers.TransformerDecoder` (pre-norm, GELU) with
                   `TokenAndPositionEmbedding` and a Dense head
  * keras_mha      a hand-written pre-norm block on `keras.layers.MultiHeadAttention`
  * torch          (only if PyTorch is importable) the same GPT in PyTorch eager mode, laid out
                   like nanoGPT's `model.py` (fused c_attn, `scaled_dot_product_attention`), written
                   for this bench; `pip install torch==2.13.0` gives the CPU build on this machine

Every Keras model is compiled alike (AdamW(1e-3, wd 0.1, β2 0.99, clipnorm 1), sparse categorical
cross-entropy from logits, no metrics), with and without XLA (`jit_compile`), and trained with
`model.fit` on the same random token batches, `steps_per_execution` steps per compiled call (no Python
work per step). One extra row, "keras_tfm compile_for_lm", uses `keras_tfm.training.compile_for_lm` with
its defaults (masked loss, accuracy metric, XLA). The variants run in interleaved rounds (so machine-load
drift hits all alike); the table gives the median step time, tokens/s and MFU against a float32
matmul peak measured in the same run (the faster of XLA and TensorFlow's oneDNN kernel).

FLOPs per step use the standard count 6·N·tokens + 12·L·T·d·tokens (N = non-embedding parameters
plus the output projection; the second term is attention's QKᵀ and AV), forward + backward.

Usage:
    python bench/train_speed.py                     # small + medium, all peers
    python bench/train_speed.py --configs small --rounds 7 --steps 50
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
from _common import adamw, compile_lm, keras_tfm_gpt, step_flops, torch_gpt_trainer  # noqa: E402

CONFIGS = {
    "small": dict(num_layers=4, num_heads=4, d_model=128, seq_len=64, batch=12, vocab=65),
    "medium": dict(num_layers=6, num_heads=6, d_model=384, seq_len=256, batch=8, vocab=65),
}


def matmul_peak(n=2048, dtype=tf.float32, repeats=10):
    """Measured matmul throughput (GFLOP/s) of an n×n·n×n product: the faster of XLA and oneDNN."""
    a = tf.random.normal((n, n), dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(tf.transpose(a), dtype)
    best = float("inf")
    for jit in (True, False):
        mm = tf.function(lambda x, y: tf.matmul(x, y), jit_compile=jit)
        mm(a, b).numpy()
        for _ in range(repeats):
            t = time.perf_counter()
            mm(a, b).numpy()
            best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


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


PEERS = {"keras_tfm": keras_tfm_gpt, "keras_hub": build_keras_hub, "keras_mha": build_keras_mha}


def make_keras_runner(model, jit, data, steps_per_execution, helper=False):
    if helper:
        from keras_tfm.training import compile_for_lm

        compile_for_lm(model, adamw(), ignore_index=None, steps_per_execution=steps_per_execution)
    else:
        compile_lm(model, jit_compile=jit, steps_per_execution=steps_per_execution)
    x, y = data
    # The same in-memory batches for every peer. tf.data autotuning is off: on 2 cores its thread
    # competes with the step, and deleting the iterator at the end of each `fit` waits for it
    # (seconds, at random), which would swamp the differences measured here.
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().prefetch(8).with_options(options)
    model.fit(
        dataset, steps_per_epoch=2 * steps_per_execution, epochs=1, verbose=0, shuffle=False
    )  # compile / warm up

    def run(steps):
        t = time.perf_counter()
        model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
        return (time.perf_counter() - t) / steps

    return run


def make_torch_runner(c, data):
    """The same GPT in PyTorch eager mode (nanoGPT's layout), AdamW + global-norm clipping."""
    import torch

    step, _ = torch_gpt_trainer(c, data)
    for i in range(5):
        step(i)

    def run(steps):
        t = time.perf_counter()
        for i in range(steps):
            loss = step(i)
        float(loss.detach())
        return (time.perf_counter() - t) / steps

    return run, f"torch {torch.__version__} eager, {torch.get_num_threads()} threads"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", default=["small", "medium"], choices=sorted(CONFIGS))
    p.add_argument("--peers", nargs="+", default=list(PEERS) + ["torch"], choices=list(PEERS) + ["torch"])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=50, help="steps per round per model")
    p.add_argument("--steps-per-execution", type=int, default=25, help="steps per compiled call (Keras rows)")
    p.add_argument(
        "--policy", default=None, help="also run keras_tfm under this dtype policy, e.g. mixed_bfloat16"
    )
    args = p.parse_args(argv)

    peak = matmul_peak()
    print(f"matmul peak (float32, 2048^3, best of XLA and oneDNN): {peak:.1f} GFLOP/s", flush=True)

    for name in args.configs:
        c = CONFIGS[name]
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, c["vocab"], (8, c["batch"], c["seq_len"] + 1)).astype("int32")
        data = (tokens[:, :, :-1], tokens[:, :, 1:])
        spe = min(args.steps_per_execution, args.steps)
        runners = {}
        variants = [
            (peer, jit, None, False) for peer in args.peers if peer != "torch" for jit in (True, False)
        ]
        if "keras_tfm" in args.peers:
            variants.append(("keras_tfm", True, None, True))
        if args.policy:
            variants += [("keras_tfm", jit, args.policy, False) for jit in (True, False)]
        for peer, jit, policy, helper in variants:
            label = f"{peer}{'+xla' if jit else ''}{'/' + policy if policy else ''}{' compile_for_lm' if helper else ''}"
            try:
                keras.mixed_precision.set_global_policy(policy or "float32")
                keras.utils.set_random_seed(0)
                t = time.perf_counter()
                runners[label] = make_keras_runner(PEERS[peer](c), jit, data, spe, helper=helper)
                print(f"  built+compiled {label:34s} in {time.perf_counter() - t:6.1f} s", flush=True)
            except ImportError as e:
                print(f"  {label}: unavailable ({e}); install the bench extra")
            finally:
                keras.mixed_precision.set_global_policy("float32")
        if "torch" in args.peers:
            try:
                t = time.perf_counter()
                runners["torch (nanoGPT layout)"], info = make_torch_runner(c, data)
                print(
                    f"  built torch (nanoGPT layout) in {time.perf_counter() - t:.1f} s: {info}", flush=True
                )
            except ImportError:
                print("  torch: unavailable (PyTorch not installed); not measured")
        times = {k: [] for k in runners}
        for _ in range(args.rounds):
            for label, run in runners.items():
                times[label].append(run(args.steps))
        flops = step_flops(c)
        tok = c["batch"] * c["seq_len"]
        med = {k: statistics.median(v) for k, v in times.items()}
        peers = [v for k, v in med.items() if not k.startswith("keras_tfm")]
        fastest_peer = min(peers) if peers else None
        print(
            f"\n[{name}] {c}  step FLOPs {flops / 1e9:.2f} G; median of {args.rounds} interleaved rounds of "
            f"{args.steps} steps (Keras: steps_per_execution={spe})"
        )
        print(
            f"{'model':36s} {'ms/step':>9s} {'min':>7s} {'tokens/s':>10s} {'MFU':>6s} {'vs fastest peer':>16s}"
        )
        for label, t in sorted(med.items(), key=lambda kv: kv[1]):
            ratio = f"{t / fastest_peer:.2f}x" if fastest_peer else "-"
            print(
                f"{label:36s} {t * 1e3:9.1f} {min(times[label]) * 1e3:7.1f} {tok / t:10.0f} "
                f"{flops / t / 1e9 / peak:6.1%} {ratio:>16s}"
            )
        print(flush=True)


if __name__ == "__main__":
    main()
