"""`keras-tfm finetune`: a published checkpoint fine-tuned with `keras_tfm.recipes.finetune_checkpoint`.

    keras-tfm finetune --checkpoint ../shared/data/all-MiniLM-L6-v2 --task classifier \\
        --data ../shared/data/sst2_sentence_level --output runs/sst2 --export sst2

writes the checkpoint to runs/sst2 and the SavedModel to runs/sst2/saved_models/sst2/1, the rule of
`keras-tfm train` (`keras_tfm.recipes.output.export_base`).
"""

from keras_tfm import recipes
from keras_tfm.cli import usage
from keras_tfm.cli.options import (
    TRAINING_FLAGS,
    Flag,
    add_options,
    comma_list,
    options_from,
    positive_float,
    positive_int,
    rate,
    seed,
)
from keras_tfm.recipes.finetune import POOLINGS, TASKS

#: The flags of `keras_tfm.recipes.FinetuneOptions`.
FINETUNE_FLAGS = {
    "checkpoint": Flag("model", "checkpoint directory (config.json, model.safetensors, vocabulary)"),
    "data": Flag("data", "'<label> <sentence>' file, or a folder with stsa.binary.train"),
    "dev": Flag("data", "dev file (default: stsa.binary.dev of a --data folder)", show_default=False),
    "task": Flag("model", "what to fine-tune", choices=TASKS),
    "num_classes": Flag(
        "model", "classes (default: the largest label + 1)", positive_int, show_default=False
    ),
    "pooling": Flag(
        "model",
        "sentence vector of the classifier (mean: how MiniLM was trained; cls: BERT's pooler)",
        choices=POOLINGS,
    ),
    "epochs": Flag("training", "", positive_int),
    "batch_size": Flag("training", "", positive_int),
    "max_length": Flag(
        "training",
        "tokens per sentence, longer ones are truncated (default: 64, or the checkpoint's positions when "
        "fewer; at most the checkpoint's positions)",
        positive_int,
        show_default=False,
    ),
    "learning_rate": Flag("training", "peak learning rate", positive_float),
    "warmup_fraction": Flag("training", "share of the steps warming up", rate),
    "steps": Flag(
        "training",
        "stop after N optimizer steps (a quick run; default: the whole epochs)",
        positive_int,
        show_default=False,
    ),
    "seed": Flag("training", "shuffling and dropout seed, 0 to 2**31 - 1", seed),
    "verbose": Flag(
        "training",
        "Keras fit verbosity (default: 1 on a terminal, else 2)",
        int,
        choices=(0, 1, 2),
        show_default=False,
    ),
    "output": Flag("output", "write the fine-tuned checkpoint here (save_pretrained)", show_default=False),
    "overwrite": Flag("output", "replace an --output that is not empty", action="store_true"),
    "export": Flag(
        "output",
        "also export a TF Serving SavedModel with the classify signature: EXPORT_DIR/NAME/VERSION",
        metavar="NAME",
        show_default=False,
    ),
    "export_dir": TRAINING_FLAGS["export_dir"],
    "label_names": Flag(
        "output", "class names for --export, comma-separated", comma_list, show_default=False
    ),
}


def run_finetune(args):
    """Runs `keras_tfm.recipes.finetune_checkpoint` with the parsed flags."""
    recipes.finetune_checkpoint(**options_from(args, recipes.FinetuneOptions))
    return 0


def register(subparsers):
    """`keras-tfm finetune`."""
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a published checkpoint (e.g. a BERT classifier on SST-2)",
        description="Fine-tunes a HuggingFace-layout checkpoint with the lecture's recipe (AdamW 2e-5, linear "
        "warmup and decay, 3 epochs, batch 32, max length 64, length-bucketed batches).",
    )
    add_options(parser, recipes.FinetuneOptions, FINETUNE_FLAGS)
    return usage.set_handler(parser, run_finetune)
