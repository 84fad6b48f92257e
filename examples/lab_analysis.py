"""Lecture lab: train (or load) a 4-layer character GPT on Tiny Shakespeare and
look inside it.

    python examples/lab_analysis.py --data input.txt --steps 500 --output lab/
    python examples/lab_analysis.py --data input.txt --model lab/char_gpt.keras --output lab2/

Writes into `--output`:
    attention_<block>.png      every head of every layer on a probe text
    positional_encoding.png    the sinusoidal PE table
    position_similarity.png    PE·PEᵀ (normalised)
    lr_schedule.png            the learning-rate schedule used for training
    training_curves.png        loss, gradient norm, attention entropy per step
    history.json               the per-step curves
    char_gpt.keras             the trained model (when trained here)
    head_stats.json            per-head statistics
and prints, per head: mean attention distance, entropy, and the fraction of
attention on the previous token / first token, with a one-word reading.

The character vocabulary is the sorted set of characters of `--data` (as in
nanoGPT), so a loaded model must be used with the text it was trained on.
"""

import argparse
import json
import os
import sys
import time

import numpy as np


def build_vocabulary(text):
    chars = sorted(set(text))
    return chars, {c: i for i, c in enumerate(chars)}


def batches(ids, batch_size, length, rng):
    """Random windows (x, y = x shifted by one), forever."""
    high = len(ids) - length - 1
    if high <= 0:
        raise ValueError(f"`--data` is too short ({len(ids)} characters) for --max-length {length}.")
    while True:
        start = rng.integers(0, high, batch_size)
        x = np.stack([ids[s : s + length] for s in start])
        y = np.stack([ids[s + 1 : s + length + 1] for s in start])
        yield x.astype("int32"), y.astype("int32")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="Tiny Shakespeare input.txt (any text file).")
    parser.add_argument("--output", required=True, help="Output folder.")
    parser.add_argument("--model", default=None, help="Load this .keras model instead of training.")
    parser.add_argument("--steps", type=int, default=300, help="Training steps (default 300).")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64, help="Context length (default 64).")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument(
        "--probe", default=None, help="Probe text for the pictures (default: a slice of --data)."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eager",
        action="store_true",
        help="Run training eagerly (no graph tracing: quicker for a few steps).",
    )
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "max_length", "d_model", "num_heads", "num_layers"):
        if getattr(args, name) <= 0:
            raise ValueError(
                f"`--{name.replace('_', '-')}` must be a positive int; received {getattr(args, name)}."
            )
    if not os.path.isfile(args.data):
        raise FileNotFoundError(f"`--data` {args.data!r} does not exist.")

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    from keras_tfm.analysis import plotting
    from keras_tfm.analysis.inspection import attention_maps, describe_head, head_statistics
    from keras_tfm.callbacks import AttentionEntropyMonitor, GradientNormMonitor, LossSpikeDetector
    from keras_tfm.models import gpt
    from keras_tfm.schedules import nanogpt_schedule

    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output, exist_ok=True)
    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    chars, index = build_vocabulary(text)
    ids = np.array([index[c] for c in text], dtype=np.int32)
    split = int(0.9 * len(ids))
    rng = np.random.default_rng(args.seed)
    schedule = nanogpt_schedule(
        args.learning_rate, args.steps, warmup_steps=min(100, args.steps // 10), min_ratio=0.1
    )
    curves = {}
    if args.model:
        if not os.path.isfile(args.model):
            raise FileNotFoundError(f"`--model` {args.model!r} does not exist.")
        import keras_tfm.models  # noqa: F401  (registers the layers)

        model = keras.saving.load_model(args.model, compile=False)
        vocab = model.get_layer("embedding").vocabulary_size
        if vocab != len(chars):
            raise ValueError(
                f"`--model` has a vocabulary of {vocab} but `--data` has {len(chars)} characters."
            )
        length = min(args.max_length, model.get_layer("embedding").max_length or args.max_length)
        print(f"loaded {args.model} ({model.count_params():,} parameters)")
        saved_curves = os.path.join(os.path.dirname(os.path.abspath(args.model)), "history.json")
        if os.path.isfile(saved_curves):  # the curves of the run that trained it
            with open(saved_curves) as f:
                curves = json.load(f)
    else:
        length = args.max_length
        model = gpt(
            vocabulary_size=len(chars),
            max_length=length,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            d_model=args.d_model,
            dropout=0.0,
        )
        model.compile(
            optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.1, clipnorm=1.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=False,
            run_eagerly=args.eager,
        )
        train = batches(ids[:split], args.batch_size, length, rng)
        probe_x, probe_y = next(batches(ids[split:], 8, length, np.random.default_rng(1)))
        every = max(1, args.steps // 20)
        monitors = [
            GradientNormMonitor((probe_x, probe_y), every_n_steps=every, use_tf_function=not args.eager),
            AttentionEntropyMonitor(probe_x, every_n_steps=every),
            LossSpikeDetector(factor=3.0, warmup=10, warn=True),
        ]
        print(
            f"training a {args.num_layers}-layer character GPT ({model.count_params():,} parameters, "
            f"vocabulary {len(chars)}) for {args.steps} steps"
        )
        start = time.time()
        history = model.fit(
            train, steps_per_epoch=args.steps, epochs=1, verbose=2, shuffle=False, callbacks=monitors
        )
        print(f"trained in {time.time() - start:.0f} s; final running loss {history.history['loss'][-1]:.3f}")
        val_x, val_y = next(batches(ids[split:], 64, length, np.random.default_rng(2)))
        val_loss = model.evaluate(val_x, val_y, verbose=0)
        print(f"validation loss (64 windows): {float(np.ravel(val_loss)[0]):.3f}")
        # per-step curves; the sparse ones (every `every` steps) from the monitors' records
        curves["loss"] = {
            "step": [s for s, _ in monitors[2].losses],
            "value": [v for _, v in monitors[2].losses],
        }
        for name, monitor in (("grad_norm", monitors[0]), ("attention_entropy/mean", monitors[1])):
            records = [(step, values[name]) for step, values in monitor.records if name in values]
            curves[name] = {"step": [s for s, _ in records], "value": [v for _, v in records]}
        model.save(os.path.join(args.output, "char_gpt.keras"))

    # ---- pictures
    probe = args.probe if args.probe else text[split : split + length]
    probe = "".join(c for c in probe if c in index)[:length]
    if not probe:
        raise ValueError("`--probe` has no character of the vocabulary.")
    x = np.array([[index[c] for c in probe]], dtype=np.int32)
    maps = attention_maps(model, x)
    written = []
    for name in maps:
        written.append(
            plotting.plot_attention_heads(
                model, x, name, tokens=list(probe), path=os.path.join(args.output, f"attention_{name}.png")
            )
        )
    d_model = model.get_layer("embedding").d_model
    written.append(
        plotting.plot_positional_encoding(
            max(length, 64), d_model, os.path.join(args.output, "positional_encoding.png")
        )
    )
    written.append(
        plotting.plot_position_similarity(
            max(length, 64), d_model, os.path.join(args.output, "position_similarity.png")
        )
    )
    written.append(
        plotting.plot_lr_schedule(schedule, args.steps, os.path.join(args.output, "lr_schedule.png"))
    )
    if curves:
        with open(os.path.join(args.output, "history.json"), "w") as f:
            json.dump(curves, f)
        written.append(
            plotting.plot_training_curves(
                curves, os.path.join(args.output, "training_curves.png"), xlabel="step"
            )
        )

    # ---- what the heads attend to (statistics over a batch of windows)
    stats_x, _ = next(
        batches(ids[split:] if len(ids) - split > length + 1 else ids, 16, length, np.random.default_rng(3))
    )
    stats_maps = attention_maps(model, stats_x)
    report = {}
    print(
        f"\n{'layer':<17}{'head':>4}{'distance':>10}{'entropy':>9}{'prev':>7}{'first':>7}{'self':>7}  reading"
    )
    for name, w in stats_maps.items():
        stats = head_statistics(w, causal=True)
        report[name] = {k: [float(v) for v in vals] for k, vals in stats.items()}
        for h in range(w.shape[1]):
            print(
                f"{name:<17}{h:>4}{stats['mean_distance'][h]:>10.2f}{stats['entropy'][h]:>9.2f}"
                f"{stats['previous_token'][h]:>7.2f}{stats['first_token'][h]:>7.2f}{stats['self'][h]:>7.2f}"
                f"  {describe_head(stats, h)}"
            )
    with open(os.path.join(args.output, "head_stats.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nmax entropy of a causal row of length {length}: log({length}) = {np.log(length):.2f}")
    print("wrote:\n  " + "\n  ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
