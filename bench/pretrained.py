"""Pretrained-checkpoint benchmark: load time, sentence-embedding throughput, fine-tuning speed.

Checkpoint: all-MiniLM-L6-v2 (BERT, 6 layers, 12 heads, d 384, 22.7M parameters), from
../shared/data (nothing is downloaded). Workload: the 872 SST-2 dev sentences.

Rows:
  load            `keras_tfm.models.sentence_encoder(path)` after TensorFlow, Keras and keras_tfm
                  are imported (first call, then the median of the repeats; wall and CPU seconds,
                  CPU being steadier on a shared machine); the tokenizer
                  (`WordPieceTokenizer.from_pretrained`) separately. Target: <= 3 s.
                  Then where one load's CPU time goes (cProfile): reading model.safetensors,
                  building the Keras model (of which: layers' symbolic calls traced for their
                  output shapes, variable creation with random initial values), assigning the
                  checkpoint's weights.
  embedding       sentences/s of the forward pass + pooling, same token batches for every row:
                    keras_tfm SentenceEncoder       ids padded to the batch's longest, length-sorted
                    keras_hub BertBackbone          the same sizes (random weights: speed does not
                                                    depend on them) + the same mean pooling
                    keras_tfm embed_texts           end to end: tokenization + dynamic padding +
                                                    Keras predict_on_batch
  fine-tuning     `keras_tfm.recipes.finetune_classifier` for --finetune-steps steps of the
                  SST-2 recipe (batch 32, max length 64, length-bucketed): median step time
                  and the projected wall time of the full recipe (3 epochs = 651 steps).
  tokenizer       throughput comes from engineer D's tokenizer bench
                  (bench/pretrained_tokenizers.py when present; run it for those rows).

Usage:  python bench/pretrained.py [--checkpoint DIR] [--data DIR] [--reps 3]
                                  [--finetune-steps 20] [--no-hub] [--load-only]
                                  [--output bench/results_pretrained.txt]
"""

import argparse
import cProfile
import os
import platform
import pstats
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_tfm  # noqa: E402,F401
from keras_tfm.data import LengthBucketedBatches, embed_texts, encode_texts, load_label_sentence_lines  # noqa: E402
from keras_tfm.models import sentence_encoder  # noqa: E402
from keras_tfm.tokenizers import WordPieceTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")


def read_sst2(data_dir, split):
    rows = load_label_sentence_lines(os.path.join(data_dir, f"stsa.binary.{split}")).as_numpy_iterator()
    texts, labels = [], []
    for sentence, label in rows:
        texts.append(sentence.decode("utf-8"))
        labels.append(int(label))
    return texts, labels


def timed(fn, reps, clock=time.perf_counter):
    """(first call seconds, median of `reps` further calls), measured with `clock`."""
    start = clock()
    fn()
    first = clock() - start
    times = []
    for _ in range(reps):
        start = clock()
        fn()
        times.append(clock() - start)
    return first, float(np.median(times))


def timed_wall_and_cpu(fn, reps):
    """(first wall s, median wall s, first CPU s, median CPU s); CPU time is the process's."""
    marks = []

    def run():
        marks.append((time.perf_counter(), time.process_time()))
        fn()
        marks.append((time.perf_counter(), time.process_time()))

    for _ in range(reps + 1):
        run()
    wall = [marks[i + 1][0] - marks[i][0] for i in range(0, len(marks), 2)]
    cpu = [marks[i + 1][1] - marks[i][1] for i in range(0, len(marks), 2)]
    return wall[0], float(np.median(wall[1:])), cpu[0], float(np.median(cpu[1:]))


def bench_load(checkpoint, reps):
    return [
        ("sentence_encoder(path)", *timed_wall_and_cpu(lambda: sentence_encoder(checkpoint), reps)),
        (
            "WordPieceTokenizer.from_pretrained",
            *timed_wall_and_cpu(lambda: WordPieceTokenizer.from_pretrained(checkpoint), reps),
        ),
    ]


# (label, file suffix, function name) of the profile rows; indented rows are part of the row above.
LOAD_PHASES = (
    ("total: sentence_encoder(path)", "keras_tfm/models/sentence_encoder.py", "sentence_encoder"),
    ("  read model.safetensors", "keras_tfm/checkpoints/files.py", "read_weights"),
    ("  build the Keras model", "keras_tfm/models/base.py", "_from_checkpoint"),
    (
        "    symbolic calls traced for output shapes",
        "keras/src/backend/tensorflow/core.py",
        "compute_output_spec",
    ),
    ("    variables created + random initial values", "keras/src/backend/tensorflow/core.py", "_initialize"),
    ("  assign the checkpoint weights", "keras_tfm/checkpoints/weight_mapping.py", "assign"),
)


def load_profile(checkpoint):
    """[(label, CPU seconds)] of one `sentence_encoder` call, from cProfile with a CPU clock."""
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    sentence_encoder(checkpoint)
    profile.disable()
    stats = pstats.Stats(profile).stats
    rows = []
    for label, suffix, function in LOAD_PHASES:
        seconds = sum(
            cumulative
            for (path, _, name), (_, _, _, cumulative, _) in stats.items()
            if name == function and path.replace(os.sep, "/").endswith(suffix)
        )
        rows.append((label, seconds))
    return rows


def keras_hub_backbone(config):
    import keras_hub

    keras.utils.set_random_seed(0)
    return keras_hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        dropout=0.0,
        max_sequence_length=config["max_position_embeddings"],
        num_segments=config["type_vocab_size"],
    )


def bench_embedding(checkpoint, texts, reps, hub):
    import json

    model = sentence_encoder(checkpoint)
    tokenizer = WordPieceTokenizer.from_pretrained(checkpoint)
    rows = encode_texts(tokenizer, texts, 256)
    batches = LengthBucketedBatches(rows, None, 64, shuffle=False, pad_id=tokenizer.pad_id)
    inputs = [batches[i] for i in range(len(batches))]

    ours = tf.function(lambda x: model(x, training=False), reduce_retracing=True)
    results = []

    def run(fn):
        for x in inputs:
            np.asarray(fn(x))

    first, median = timed(lambda: run(ours), reps)
    results.append(("keras_tfm SentenceEncoder", first, median, len(texts) / median))
    if hub:
        with open(os.path.join(checkpoint, "config.json")) as f:
            backbone = keras_hub_backbone(json.load(f))

        def hub_embed(x):
            h = backbone(x, training=False)["sequence_output"]
            m = tf.cast(x["padding_mask"], h.dtype)[:, :, None]
            pooled = tf.reduce_sum(h * m, 1) / tf.maximum(tf.reduce_sum(m, 1), 1.0)
            return tf.math.l2_normalize(pooled, axis=-1)

        hub_fn = tf.function(hub_embed, reduce_retracing=True)
        first, median = timed(lambda: run(hub_fn), reps)
        results.append(("keras_hub BertBackbone (same size)", first, median, len(texts) / median))
    first, median = timed(lambda: embed_texts(model, tokenizer, texts, 256), reps)
    results.append(("keras_tfm embed_texts (end to end)", first, median, len(texts) / median))
    return results


def bench_finetune(checkpoint, data_dir, steps):
    import warnings

    from keras_tfm.models import from_pretrained
    from keras_tfm.recipes import finetune_classifier

    texts, labels = read_sst2(data_dir, "train")
    tokenizer = WordPieceTokenizer.from_pretrained(checkpoint)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = from_pretrained(checkpoint, task="classifier", num_classes=2, pooling="mean")
    _, timer = finetune_classifier(model, tokenizer, texts, labels, steps=steps, verbose=0)
    full = 3 * -(-len(texts) // 32)
    return timer, full


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=os.path.join(DATA, "all-MiniLM-L6-v2"))
    p.add_argument("--data", default=os.path.join(DATA, "sst2_sentence_level"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--finetune-steps", type=int, default=20, help="0 skips the fine-tuning rows")
    p.add_argument("--no-hub", dest="hub", action="store_false", help="skip the KerasHub row")
    p.add_argument("--load-only", action="store_true", help="only the load rows and their profile")
    p.add_argument("--output", default=os.path.join(HERE, "results_pretrained.txt"))
    args = p.parse_args(argv)
    for flag, path in (("--checkpoint", args.checkpoint), ("--data", args.data)):
        if not os.path.isdir(path):
            print(f"skipped: {flag} {path!r} not found (the benchmark reads ../shared/data)", file=sys.stderr)
            return 2

    lines = [
        f"# keras_tfm pretrained-checkpoint benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        f"# tensorflow {tf.__version__}, keras {keras.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}",
        f"# checkpoint {os.path.basename(os.path.normpath(args.checkpoint))}; median of {args.reps} repeats",
        "",
        f"{'load (after importing TF, Keras, keras_tfm)':44s} {'first s':>8s} {'median s':>9s} "
        f"{'first CPU s':>12s} {'median CPU s':>13s}",
    ]
    for name, first, median, first_cpu, median_cpu in bench_load(args.checkpoint, args.reps):
        lines.append(f"{name:44s} {first:8.2f} {median:9.2f} {first_cpu:12.2f} {median_cpu:13.2f}")
    lines += ["", f"{'where one load goes (cProfile, CPU clock)':50s} {'CPU s':>6s}"]
    lines += [f"{label:50s} {seconds:6.2f}" for label, seconds in load_profile(args.checkpoint)]
    print("\n".join(lines), flush=True)
    if args.load_only:
        return _write(args.output, lines)

    texts, _ = read_sst2(args.data, "dev")
    lines.append("")
    lines.append(
        f"{'sentence embedding, ' + str(len(texts)) + ' SST-2 dev sentences, batch 64':44s} "
        f"{'first s':>8s} {'median s':>9s} {'sent/s':>8s}"
    )
    for name, first, median, rate in bench_embedding(args.checkpoint, texts, args.reps, args.hub):
        lines.append(f"{name:44s} {first:8.2f} {median:9.2f} {rate:8.0f}")
        print(lines[-1], flush=True)

    if args.finetune_steps:
        timer, full = bench_finetune(args.checkpoint, args.data, args.finetune_steps)
        lines += [
            "",
            f"fine-tuning (batch 32, max length 64, length-bucketed): {timer.seen} steps in "
            f"{timer.total_seconds:.1f} s (first step includes tracing)",
            f"median step {timer.median_step_seconds:.3f} s -> full recipe ({full} steps) projected "
            f"{full * timer.median_step_seconds / 60:.1f} min",
        ]
        print("\n".join(lines[-3:]), flush=True)
    lines.append("")
    lines.append("tokenizer throughput: see bench/pretrained_tokenizers.py (engineer D's bench)")
    return _write(args.output, lines)


def _write(path, lines):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
