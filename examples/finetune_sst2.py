"""Fine-tune a published checkpoint on SST-2 (the lecture's recipe), then serve it.

    python examples/finetune_sst2.py --checkpoint ../shared/data/all-MiniLM-L6-v2 \\
        --data ../shared/data/sst2_sentence_level
    python examples/finetune_sst2.py ... --steps 60          # a quick check that it learns

1. `keras_tfm.models.from_pretrained(CHECKPOINT, task="classifier", num_classes=2)` builds the
   encoder from config.json, loads model.safetensors and adds a freshly initialised classifier;
   `WordPieceTokenizer.from_pretrained` reads the checkpoint's vocabulary.
2. Fine-tuning: AdamW, learning rate 2e-5 with linear warmup (10 %) and linear decay to 0,
   3 epochs, batch 32, max length 64, sentences batched by length (dynamic padding), see
   `keras_tfm.recipes.finetune`.
3. SST-2 dev accuracy (and test accuracy when `stsa.binary.test` is there).
4. `export_for_serving` writes a SavedModel whose `classify` signature takes raw strings
   (tokenization inside the graph); one request is checked against the in-process model.
5. `--results PATH` writes the figures (recipe, steps, wall time, load time, accuracies) as JSON.
"""

import argparse
import json
import os
import sys
import time

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines


#: The recipe's options taken from the command line (`keras_tfm.recipes.FinetuneOptions`).
RECIPE = ("epochs", "batch_size", "max_length", "learning_rate", "warmup_fraction", "steps", "seed")


def read_split(data, name):
    from keras_tfm.data import load_label_sentence_lines

    path = os.path.join(data, f"stsa.binary.{name}")
    if not os.path.exists(path):
        return None, None
    texts, labels = [], []
    for sentence, label in load_label_sentence_lines(path).as_numpy_iterator():
        texts.append(sentence.decode("utf-8"))
        labels.append(int(label))
    return texts, labels


def parse_args(argv=None):
    from keras_tfm.cli.finetune import FINETUNE_FLAGS
    from keras_tfm.cli.options import add_options
    from keras_tfm.recipes import FinetuneOptions

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="HuggingFace-layout BERT checkpoint directory")
    p.add_argument("--data", required=True, help="folder with stsa.binary.train / .dev (/ .test)")
    # --pooling, --epochs, --batch-size, --max-length, --learning-rate, --warmup-fraction, --steps, --seed
    add_options(p, FinetuneOptions, FINETUNE_FLAGS, only=("pooling", *RECIPE))
    p.add_argument("--export-dir", default="saved_models/sst2_finetuned", help="'' to skip the export")
    p.add_argument("--results", default=None, help="write the figures to this JSON file")
    return p.parse_args(argv)


def write_json(path, record):
    """Writes `record` to `path` (a temporary name, then a rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    for flag, path in (("--checkpoint", args.checkpoint), ("--data", args.data)):
        if not os.path.isdir(path):
            print(f"error: {flag} {path!r} is not a directory", file=sys.stderr)
            return 2
    import numpy as np

    from keras_tfm.export import export_for_serving
    from keras_tfm.models import from_pretrained
    from keras_tfm.recipes import evaluate_classifier, finetune_classifier
    from keras_tfm.tokenizers import WordPieceTokenizer

    train_texts, train_labels = read_split(args.data, "train")
    dev_texts, dev_labels = read_split(args.data, "dev")
    if train_texts is None or dev_texts is None:
        print(
            f"error: --data {args.data!r} needs stsa.binary.train and stsa.binary.dev",
            file=sys.stderr,
        )
        return 2
    start = time.perf_counter()
    model = from_pretrained(args.checkpoint, task="classifier", num_classes=2, pooling=args.pooling)
    tokenizer = WordPieceTokenizer.from_pretrained(args.checkpoint)
    load_seconds = time.perf_counter() - start
    print(f"loaded {args.checkpoint} ({model.count_params():,} parameters) in {load_seconds:.1f} s")
    print(f"train {len(train_texts)} sentences, dev {len(dev_texts)}")

    _, timer = finetune_classifier(
        model,
        tokenizer,
        train_texts,
        train_labels,
        **{name: getattr(args, name) for name in RECIPE},
        verbose=2,
    )
    steps = int(model.optimizer.iterations.numpy())
    full = args.epochs * -(-len(train_texts) // args.batch_size)
    print(
        f"fine-tuning: {steps} steps in {timer.total_seconds:.0f} s (median step {timer.median_step_seconds:.2f} s; "
        f"the full recipe, {full} steps, ≈ {full * timer.median_step_seconds / 60:.0f} min at this speed)"
    )
    accuracy = evaluate_classifier(model, tokenizer, dev_texts, dev_labels, args.max_length)
    print(f"SST-2 dev accuracy: {accuracy:.4f}")
    record = {
        "checkpoint": os.path.abspath(args.checkpoint),
        "recipe": {
            k: getattr(args, k)
            for k in (
                "epochs",
                "batch_size",
                "max_length",
                "learning_rate",
                "warmup_fraction",
                "pooling",
                "seed",
            )
        },
        "steps": steps,
        "full_recipe_steps": full,
        "load_seconds": round(load_seconds, 2),
        "finetune_seconds": round(timer.total_seconds, 1),
        "median_step_seconds": round(timer.median_step_seconds, 4),
        "load_average": os.getloadavg()[0],
        "dev_accuracy": accuracy,
    }
    test_texts, test_labels = read_split(args.data, "test")
    if test_texts is not None:
        record["test_accuracy"] = evaluate_classifier(
            model, tokenizer, test_texts, test_labels, args.max_length
        )
        print(f"SST-2 test accuracy: {record['test_accuracy']:.4f}")
    if args.results:
        write_json(args.results, record)
        print(f"figures written to {args.results}")

    if args.export_dir:
        path = export_for_serving(
            model, args.export_dir, tokenizer=tokenizer, label_names=["negative", "positive"]
        )
        import tensorflow as tf

        served = tf.saved_model.load(path).signatures["classify"](inputs=tf.constant(dev_texts[:4]))
        probabilities = served["probabilities"].numpy()
        expected = tf.nn.softmax(
            model(
                {
                    "token_ids": tokenizer(dev_texts[:4]).to_tensor(),
                    "segment_ids": tf.zeros_like(tokenizer(dev_texts[:4]).to_tensor()),
                    "padding_mask": tf.ones_like(tokenizer(dev_texts[:4])).to_tensor(),
                },
                training=False,
            )
        ).numpy()
        print(
            f"exported {path}; classify({dev_texts[0]!r}) -> {served['labels'].numpy()[0].decode()} "
            f"{probabilities[0].round(3).tolist()}; max |served - in-process| = "
            f"{np.abs(probabilities - expected).max():.2e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
