"""`keras-tfm finetune` and `keras-tfm embed`: published checkpoints from the command line.

    keras-tfm finetune --checkpoint ../shared/data/all-MiniLM-L6-v2 --task classifier \\
        --data ../shared/data/sst2_sentence_level --output runs/sst2 --export sst2
    keras-tfm embed --checkpoint ../shared/data/all-MiniLM-L6-v2 "a sentence" "another one"

`finetune` reads `<label> <sentence>` lines (a file, or a folder holding SST-2's
`stsa.binary.train` and `stsa.binary.dev`), fine-tunes with the lecture's
recipe (`keras_tfm.finetuning`), prints the dev accuracy, and optionally
writes the model as a checkpoint (`--output`, `save_pretrained` layout) and a
TF Serving SavedModel with the `classify` signature (`--export`).
`embed` prints one JSON line per text: {"text": ..., "embedding": [...]}.

Registered by `keras_tfm.cli` (module listed in `SUBCOMMAND_MODULES`). Bad
values raise `keras_tfm.recipes.UsageError`: one line naming the flag, exit
status 2.
"""

import json
import os
import sys

from keras_tfm.checks import positive_int_arg
from keras_tfm.finetuning import add_recipe_arguments

FINETUNE_TASKS = ("classifier",)


def _usage(flag, message):
    from keras_tfm.recipes import UsageError

    return UsageError(flag, message)


def _checkpoint(args):
    if not os.path.isdir(args.checkpoint):
        raise _usage("--checkpoint", f"{args.checkpoint!r} is not a checkpoint directory")
    return args.checkpoint


def _tokenizer(path):
    from keras_tfm.tokenizers import WordPieceTokenizer

    try:
        return WordPieceTokenizer.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise _usage("--checkpoint", f"cannot read the tokenizer: {error}") from None


def _read_labelled(path, flag):
    from keras_tfm.data import load_label_sentence_lines

    try:
        rows = list(load_label_sentence_lines(path).as_numpy_iterator())
    except (OSError, ValueError) as error:
        raise _usage(flag, str(error)) from None
    if not rows:
        raise _usage(flag, f"{path!r} holds no '<label> <sentence>' lines")
    return [s.decode("utf-8") for s, _ in rows], [int(label) for _, label in rows]


def _splits(args):
    """(train, dev) `(texts, labels)` from --data (file or SST-2 folder) and --dev."""
    data, dev = args.data, args.dev
    if os.path.isdir(data):
        train_file = os.path.join(data, "stsa.binary.train")
        if not os.path.isfile(train_file):
            raise _usage("--data", f"folder {data!r} has no stsa.binary.train")
        if dev is None and os.path.isfile(os.path.join(data, "stsa.binary.dev")):
            dev = os.path.join(data, "stsa.binary.dev")
        data = train_file
    elif not os.path.isfile(data):
        raise _usage("--data", f"{data!r} does not exist")
    if dev is not None and not os.path.isfile(dev):
        raise _usage("--dev", f"{dev!r} does not exist")
    train = _read_labelled(data, "--data")
    return train, (_read_labelled(dev, "--dev") if dev else None)


def add_finetune_subcommand(subparsers):
    p = subparsers.add_parser(
        "finetune",
        help="fine-tune a published checkpoint (e.g. a BERT classifier on SST-2)",
        description="Fine-tunes a HuggingFace-layout checkpoint with the lecture's recipe (AdamW 2e-5, linear "
        "warmup and decay, 3 epochs, batch 32, max length 64, length-bucketed batches).",
    )
    p.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (config.json, model.safetensors)"
    )
    p.add_argument("--task", dest="finetune_task", choices=FINETUNE_TASKS, default="classifier")
    p.add_argument(
        "--data", required=True, help="'<label> <sentence>' file, or a folder with stsa.binary.train"
    )
    p.add_argument("--dev", default=None, help="dev file (default: stsa.binary.dev of a --data folder)")
    p.add_argument(
        "--num-classes", type=positive_int_arg, default=None, help="default: the labels' maximum + 1"
    )
    p.add_argument("--pooling", choices=["cls", "mean", "max"], default="mean")
    add_recipe_arguments(p)
    p.add_argument("--output", default=None, help="write the fine-tuned checkpoint here (save_pretrained)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    p.add_argument("--export", default=None, metavar="NAME", help="also write saved_models/NAME/VERSION")
    p.add_argument("--dir", default="saved_models", help="base directory of --export")
    p.add_argument("--labels", default=None, help="class names for --export, comma-separated")
    p.set_defaults(func=run_finetune)
    return p


def run_finetune(args):
    checkpoint = _checkpoint(args)
    if args.output and os.path.exists(args.output) and os.listdir(args.output) and not args.overwrite:
        raise _usage("--output", f"{args.output!r} already exists and is not empty (use --overwrite)")
    if args.output and not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise _usage("--output", f"the parent folder of {args.output!r} does not exist")
    (texts, labels), dev = _splits(args)
    num_classes = args.num_classes or max(labels) + 1
    if min(labels) < 0 or max(labels) >= num_classes:
        raise _usage("--data", f"labels must be in [0, {num_classes}); found {min(labels)}..{max(labels)}")
    label_names = args.labels.split(",") if args.labels else None
    if label_names is not None and len(label_names) != num_classes:
        raise _usage("--labels", f"expected {num_classes} names; received {len(label_names)}")

    from keras_tfm.checkpoints import from_pretrained, save_pretrained
    from keras_tfm.finetuning import evaluate_classifier, finetune_classifier, recipe_options

    tokenizer = _tokenizer(checkpoint)
    try:
        model = from_pretrained(checkpoint, task="classifier", num_classes=num_classes, pooling=args.pooling)
    except ValueError as error:
        raise _usage("--checkpoint", str(error)) from None
    _, timer = finetune_classifier(model, tokenizer, texts, labels, **recipe_options(args), verbose=2)
    print(f"fine-tuned {timer.seen} steps in {timer.total_seconds:.0f} s")
    if dev is not None:
        print(f"dev accuracy: {evaluate_classifier(model, tokenizer, dev[0], dev[1], args.max_length):.4f}")
    if args.output:
        save_pretrained(model, args.output, tokenizer=tokenizer, overwrite=args.overwrite)
        print(f"checkpoint: {args.output}")
    if args.export:
        from keras_tfm.export import export_for_serving

        path = export_for_serving(
            model, os.path.join(args.dir, args.export), tokenizer=tokenizer, label_names=label_names
        )
        print(f"exported: {path}")
    return 0


def add_embed_subcommand(subparsers):
    p = subparsers.add_parser(
        "embed",
        help="sentence embeddings from a published checkpoint",
        description="Prints one JSON line per text: the text and its sentence embedding (pooling and "
        "normalisation as the checkpoint's 1_Pooling/config.json and modules.json say).",
    )
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (e.g. all-MiniLM-L6-v2)")
    p.add_argument("texts", nargs="*", help="texts to embed (default: one per line on stdin)")
    p.add_argument("--max-length", type=positive_int_arg, default=256)
    p.add_argument("--precision", type=int, default=6, help="decimals printed")
    p.set_defaults(func=run_embed)
    return p


def run_embed(args):
    checkpoint = _checkpoint(args)
    texts = list(args.texts) or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise _usage("texts", "give at least one text (arguments or lines on stdin)")
    from keras_tfm.checkpoints import sentence_encoder
    from keras_tfm.data.text_batches import embed_texts

    tokenizer = _tokenizer(checkpoint)
    try:
        model = sentence_encoder(checkpoint)
    except ValueError as error:
        raise _usage("--checkpoint", str(error)) from None
    vectors = embed_texts(model, tokenizer, texts, args.max_length)
    for text, vector in zip(texts, vectors):
        values = [round(float(v), args.precision) for v in vector]
        print(json.dumps({"text": text, "embedding": values}, ensure_ascii=False))
    return 0
