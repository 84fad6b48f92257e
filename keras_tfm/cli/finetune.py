"""`keras-tfm finetune`: a published checkpoint fine-tuned with the lecture's recipe.

    keras-tfm finetune --checkpoint ../shared/data/all-MiniLM-L6-v2 --task classifier \\
        --data ../shared/data/sst2_sentence_level --output runs/sst2 --export sst2
    keras-tfm finetune --checkpoint opus-mt-en-es --data spa-eng/spa.txt --output runs/opus-anki

`--task` (default: from the checkpoint's config.json) picks the recipe: "classifier" for a BERT
checkpoint (`keras_tfm.recipes.finetune_checkpoint`, '<label> <sentence>' lines), "seq2seq" for a T5,
BART or Marian one (`keras_tfm.recipes.finetune_seq2seq_checkpoint`, SOURCE<TAB>TARGET lines). Each
task's own flags are refused with the other. `--output` is a checkpoint folder in HuggingFace's layout
(`save_pretrained`, with the tokenizer files), and the SavedModel of `--export` goes to
OUTPUT/saved_models/NAME/1, the rule of `keras-tfm train` (`keras_tfm.recipes.output.export_base`).
"""

import argparse
import dataclasses

from keras_tfm import recipes
from keras_tfm.cli import usage
from keras_tfm.cli.options import (
    TRAINING_FLAGS,
    Flag,
    add_options,
    comma_list,
    non_negative_int,
    positive_float,
    positive_int,
    rate,
    seed,
)
from keras_tfm.cli.usage import flag
from keras_tfm.recipes.finetune import POOLINGS, TASKS
from keras_tfm.recipes.finetune_seq2seq import (
    SEQ2SEQ_MODEL_TYPES,
    Seq2SeqFinetuneOptions,
    checkpoint_model_type,
)

#: The flags of `keras_tfm.recipes.FinetuneOptions`.
FINETUNE_FLAGS = {
    "checkpoint": Flag("model", "checkpoint directory (config.json, model.safetensors, vocabulary)"),
    "data": Flag(
        "data",
        "classifier: '<label> <sentence>' file, or a folder with stsa.binary.train; seq2seq: "
        "SOURCE<TAB>TARGET lines (Anki's spa.txt)",
    ),
    "dev": Flag(
        "data",
        "held-out file (default: stsa.binary.dev of a --data folder; seq2seq: --test-pairs of --data)",
        show_default=False,
    ),
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
        "also export a TF Serving SavedModel (classifier: classify; seq2seq: translate): "
        "EXPORT_DIR/NAME/VERSION",
        metavar="NAME",
        show_default=False,
    ),
    "export_dir": TRAINING_FLAGS["export_dir"],
    "label_names": Flag(
        "output", "class names for --export, comma-separated", comma_list, show_default=False
    ),
}


#: The flags of `Seq2SeqFinetuneOptions` that the classifier recipe has not.
SEQ2SEQ_FLAGS = {
    "reverse": Flag("seq2seq", "translate the second column into the first", action="store_true"),
    "source_prefix": Flag("seq2seq", "text put before every source (T5: 'translate English to German: ')"),
    "max_pairs": Flag(
        "seq2seq", "use only this many pairs of --data after shuffling, 0 = all", non_negative_int
    ),
    "test_pairs": Flag(
        "seq2seq", "pairs of --data held out without --dev (at most a tenth)", non_negative_int
    ),
    "bleu_pairs": Flag(
        "seq2seq", "held-out pairs translated for sacreBLEU / chrF, 0 = all", non_negative_int
    ),
    "num_beams": Flag("seq2seq", "beam width of those translations, 1 = greedy", positive_int),
    "length_penalty": Flag("seq2seq", "their length penalty alpha (default: the checkpoint's)", float),
    "show": Flag("seq2seq", "held-out translations printed", non_negative_int),
    "results": Flag("seq2seq", "write the figures as JSON here"),
}
#: The flags of each task that the other does not take.
TASK_FLAGS = {
    "classifier": ("num_classes", "pooling", "label_names"),
    "seq2seq": tuple(SEQ2SEQ_FLAGS),
}
#: The flags both recipes take.
SHARED = tuple(f.name for f in dataclasses.fields(Seq2SeqFinetuneOptions) if f.name in FINETUNE_FLAGS)
#: `--task` of the command line: either recipe, by default the checkpoint's.
CLI_FLAGS = {
    "task": Flag(
        "model",
        "what to fine-tune (default: seq2seq for a t5 / bart / marian checkpoint, else classifier)",
        choices=(*TASKS, "seq2seq"),
        show_default=False,
    )
}


def checkpoint_task(checkpoint):
    """The task of `--task` left out: "seq2seq" for a T5, BART or Marian checkpoint, else "classifier"
    (which names any other model type in its error)."""
    return "seq2seq" if checkpoint_model_type(checkpoint) in SEQ2SEQ_MODEL_TYPES else "classifier"


def run_finetune(args):
    """Runs the recipe of `--task` (`finetune_checkpoint` or `finetune_seq2seq_checkpoint`)."""
    task = args.task or checkpoint_task(args.checkpoint)
    for other, names in TASK_FLAGS.items():
        given = [name for name in names if hasattr(args, name)]
        if other != task and given:
            raise usage.UsageError(
                flag(given[0]), f"is a flag of --task {other}; {args.checkpoint!r} is fine-tuned as {task}"
            )
    options = {name: getattr(args, name) for name in SHARED}
    options.update({name: getattr(args, name) for name in TASK_FLAGS[task] if hasattr(args, name)})
    if task == "seq2seq":
        recipes.finetune_seq2seq_checkpoint(**options)
    else:
        recipes.finetune_checkpoint(task=task, **options)
    return 0


def _add_task_flags(parser, task, options_class, flags):
    """`--task`'s own flags, in a section of their own; left out, a flag is absent from the parsed
    arguments (argparse.SUPPRESS), so that one given for the other task is refused by name."""
    group = parser.add_argument_group(f"{task} (--task {task})")
    defaults = {f.name: f.default for f in dataclasses.fields(options_class)}
    for name in TASK_FLAGS[task]:
        spec, default = flags[name], defaults[name]
        help_text = spec.help + (
            f" (default: {default})"
            if spec.show_default and not spec.action and default not in (None, "")
            else ""
        )
        kwargs = {"action": spec.action} if spec.action else {"type": spec.type, "choices": spec.choices}
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        group.add_argument(flag(name), default=argparse.SUPPRESS, help=help_text, **kwargs)


def register(subparsers):
    """`keras-tfm finetune`."""
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a published checkpoint (a BERT classifier on SST-2, a T5/BART/Marian translator "
        "on sentence pairs)",
        description="Fine-tunes a HuggingFace-layout checkpoint with the lecture's recipe (AdamW 2e-5, linear "
        "warmup and decay, 3 epochs, batch 32, max length 64, length-bucketed batches): a BERT classifier on "
        "'<label> <sentence>' lines, or a T5, BART or Marian checkpoint on SOURCE<TAB>TARGET pairs (teacher "
        "forcing with its own tokenizer; held-out loss, sacreBLEU and chrF).",
    )
    add_options(parser, recipes.FinetuneOptions, {**FINETUNE_FLAGS, **CLI_FLAGS}, only=(*SHARED, "task"))
    _add_task_flags(parser, "classifier", recipes.FinetuneOptions, FINETUNE_FLAGS)
    _add_task_flags(parser, "seq2seq", Seq2SeqFinetuneOptions, SEQ2SEQ_FLAGS)
    parser.set_defaults(task=None)
    return usage.set_handler(parser, run_finetune)
