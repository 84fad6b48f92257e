"""Seq2seq generation benchmark: keras_tfm cached decoding of a T5 vs KerasHub's `T5Seq2SeqLM`.

Model: T5-small v1.0 sizes (d_model 512, 6 encoder + 6 decoder layers, 8 heads, d_kv 64,
d_ff 2048, ReLU FFN, vocab 32128, tied embeddings with the d_model^-0.5 output scale,
bucketed relative positions), random weights, no dropout, float32. Both models are built
from the same sizes (no download): ours by `keras_tfm.checkpoints.t5.builder_options` of a
T5-small config.json, KerasHub's `T5Backbone(use_gated_activation=False, activation="relu")`.

Workload: source of `--source` (32) random ids (no padding) → `--new` (64) new tokens, greedy,
batch 1 and 8, decoding started from id 0 (T5's decoder start). Neither side stops early:
no stop id is given (keras_tfm `eos_id=None`, KerasHub `stop_token_ids=None`), and the script
checks that every row of both outputs holds exactly `--new` new tokens.

Rows:
  keras_tfm cached      `Generator(model).generate(source_ids, new, eos_id=None)`: encoder once,
                        cross-attention keys/values once, KV-cached decoder steps in one XLA loop
  keras_hub T5Seq2SeqLM `T5Seq2SeqLM(preprocessor=None)` with the greedy sampler, `generate`
                        (KerasHub's cached loop, XLA) on the preprocessed dict

Timing: the first call (trace + XLA compile + one run) of each row, then `--reps` (3) rounds in
which the rows alternate (one call each per round); the median of the rounds is the row's run
time, tokens/s = batch × new / median. Before the first row a trivial XLA function is compiled
and run (TensorFlow's one-time XLA start-up is charged to no row).

Usage:  python bench/seq2seq_generate.py [--reps 3] [--source 32] [--new 64] [--batches 1 8]
                                         [--output bench/results_seq2seq_generate.txt]
"""

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from generate import collector, save  # noqa: E402  (bench/, beside this file)

from keras_tfm.checkpoints import t5  # noqa: E402
from keras_tfm.checkpoints.files import ConfigReader  # noqa: E402
from keras_tfm.generation import Generator  # noqa: E402
from keras_tfm.models import Seq2Seq  # noqa: E402

#: T5-small (v1.0) as its config.json states it; dropout off for inference.
T5_SMALL = {
    "model_type": "t5",
    "vocab_size": 32128,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_decoder_layers": 6,
    "num_heads": 8,
    "feed_forward_proj": "relu",
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.0,
    "layer_norm_epsilon": 1e-6,
    "tie_word_embeddings": True,
    "n_positions": 512,
}
DECODER_START = 0  # T5's decoder_start_token_id (= pad id)
OURS, HUB = "keras_tfm cached", "keras_hub T5Seq2SeqLM"


def build_ours():
    """keras_tfm's `Seq2Seq` of T5-small's sizes (as `from_pretrained` builds a T5 checkpoint)."""
    keras.utils.set_random_seed(0)
    options = t5.builder_options(T5_SMALL, ConfigReader(T5_SMALL, "t5-small/config.json"))
    options.update(pad_id=0, generation_config={"decoder_start_id": DECODER_START})
    return Seq2Seq(**options)


def build_hub():
    """KerasHub's `T5Seq2SeqLM` of T5-small's sizes, greedy, without a preprocessor."""
    import keras_hub

    keras.utils.set_random_seed(0)
    c = T5_SMALL
    backbone = keras_hub.models.T5Backbone(
        vocabulary_size=c["vocab_size"],
        num_layers=c["num_layers"],
        num_heads=c["num_heads"],
        hidden_dim=c["d_model"],
        intermediate_dim=c["d_ff"],
        key_value_dim=c["d_kv"],
        dropout=0.0,
        activation="relu",
        use_gated_activation=False,
        layer_norm_epsilon=c["layer_norm_epsilon"],
        tie_embedding_weights=True,
    )
    lm = keras_hub.models.T5Seq2SeqLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy")
    return lm


def sources(batch, length, seed=0):
    """Random source ids in [2, vocab) (no pad 0, no EOS 1), int32 (batch, length)."""
    rng = np.random.default_rng(seed)
    return rng.integers(2, T5_SMALL["vocab_size"], size=(batch, length)).astype(np.int32)


def ours_call(generator, source, new):
    """`() -> new-token counts per row` of keras_tfm's cached greedy decoding (no stop id)."""

    def run():
        tokens, lengths = generator.generate(source, new, eos_id=None, return_lengths=True)
        return np.minimum(np.asarray(lengths), tokens.shape[1])

    return run


def hub_call(lm, source, new):
    """`() -> new-token counts per row` of KerasHub's `generate` (decoder buffer: start id, then
    `new` free slots; no stop ids, so every slot is generated)."""
    batch = source.shape[0]
    decoder_ids = np.zeros((batch, new + 1), np.int32)
    decoder_ids[:, 0] = DECODER_START
    decoder_mask = np.zeros((batch, new + 1), bool)
    decoder_mask[:, 0] = True
    inputs = {
        "encoder_token_ids": source,
        "encoder_padding_mask": np.ones_like(source, bool),
        "decoder_token_ids": decoder_ids,
        "decoder_padding_mask": decoder_mask,
    }

    def run():
        out = lm.generate(inputs, stop_token_ids=None)
        return np.asarray(out["decoder_padding_mask"]).sum(axis=1) - 1  # minus the start token

    return run


def time_rows(calls, reps, new):
    """{name: (first-call s, median s)}: each call's first call, then `reps` alternating rounds.
    Every call must return `new` new tokens in every row (a ValueError otherwise)."""
    firsts, runs = {}, {name: [] for name in calls}
    for name, call in calls.items():
        t0 = time.perf_counter()
        counts = call()
        firsts[name] = time.perf_counter() - t0
        if not np.all(np.asarray(counts) == new):
            raise ValueError(f"{name} generated {list(counts)} new tokens per row; expected {new} in each.")
        print(f"  .. {name}: first call {firsts[name]:.2f}s", flush=True)
    for _ in range(reps):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            runs[name].append(time.perf_counter() - t0)
    return {name: (firsts[name], float(np.median(runs[name]))) for name in calls}


def header(emit, args):
    emit(f"# keras_tfm seq2seq generation benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    emit(
        f"# tensorflow {tf.__version__}, keras {keras.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, devices: {[d.device_type for d in tf.config.list_physical_devices()]}"
    )
    c = T5_SMALL
    emit(
        f"# T5-small sizes (random weights): d_model {c['d_model']}, {c['num_layers']}+{c['num_decoder_layers']} "
        f"layers, {c['num_heads']} heads, d_ff {c['d_ff']}, vocab {c['vocab_size']}; source {args.source} -> "
        f"{args.new} new tokens, greedy, no stop id; median of {args.reps} alternating rounds after the first "
        f"call; load average {os.getloadavg()[0]:.2f} (start)"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="timed rounds after the first call")
    parser.add_argument("--source", type=int, default=32, help="source length")
    parser.add_argument("--new", type=int, default=64, help="new tokens per row")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--output",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_seq2seq_generate.txt"),
    )
    args = parser.parse_args(argv)

    emit, lines = collector()
    header(emit, args)
    tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True)(tf.ones((4,))).numpy()  # XLA start-up
    model = build_ours()
    results = {}
    for batch in args.batches:
        source = sources(batch, args.source)
        calls = {
            OURS: ours_call(Generator(model), source, args.new),
            HUB: hub_call(build_hub(), source, args.new),
        }
        for name, (first, median) in time_rows(calls, args.reps, args.new).items():
            results[(name, batch)] = (first, median, batch * args.new / median)

    emit()
    emit(
        f"{'implementation':<24} {'batch':>5} {'first call s':>13} {'run s':>8} {'tokens/s':>10} {'vs keras_hub':>13}"
    )
    for batch in args.batches:
        hub = results[(HUB, batch)]
        for name in (OURS, HUB):
            first, median, tps = results[(name, batch)]
            emit(f"{name:<24} {batch:>5} {first:>13.2f} {median:>8.3f} {tps:>10.0f} {tps / hub[2]:>12.2f}x")
    for batch in args.batches:
        ours, hub = results[(OURS, batch)], results[(HUB, batch)]
        emit(
            f"batch {batch}: tokens/s {ours[2] / hub[2]:.2f}x KerasHub's (target >= 5x); first call "
            f"{ours[0]:.2f}s vs {hub[0]:.2f}s (target <= KerasHub's)"
        )
    emit(f"# load average {os.getloadavg()[0]:.2f} (end)")
    save(args.output, lines)


if __name__ == "__main__":
    sys.exit(main())
