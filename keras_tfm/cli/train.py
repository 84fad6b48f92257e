"""`keras-tfm train {gpt,bert,seq2seq}`: a recipe of `keras_tfm.recipes` from the command line.

Each recipe's flags are the fields of its options dataclass (`GPTOptions`, ...; the defaults live there),
spelled and explained by the shared `options.TRAINING_FLAGS` and the recipe's own table below.
`recipe_parser` and `main` give an example script the same command line (`examples/gpt_shakespeare.py`).
"""

import argparse
import sys

from keras_tfm import recipes
from keras_tfm.cli import usage
from keras_tfm.cli.options import (
    TFDS_FLAGS,
    TRAINING_FLAGS,
    Flag,
    add_options,
    non_negative_int,
    options_from,
    positive_int,
)
from keras_tfm.recipes import gpt as gpt_recipe
from keras_tfm.recipes import seq2seq as seq2seq_recipe


def _layout(help_text, default):
    return f"{help_text} (default: the preset's, else {default})"


GPT_FLAGS = {
    **TFDS_FLAGS,
    "data": Flag(
        "data",
        "Tiny Shakespeare input.txt (split 90/10 like nanoGPT's prepare.py); none: TFDS tiny_shakespeare",
        show_default=False,
    ),
    "max_length": Flag("model", "context length", positive_int),
    "preset": Flag(
        "model",
        "a model layout of `keras_tfm.models.gpt`: llama_tiny = pre-RMSNorm, SwiGLU, RoPE, 2 key/value heads, "
        "no biases, untied head, at the lab model's parameter count (default: nanoGPT's GPT-2 layout)",
        choices=gpt_recipe.LAB_PRESETS,
        show_default=False,
    ),
    "position": Flag(
        "model",
        _layout("position scheme (learned: GPT-2; rope: Llama)", gpt_recipe.NANOGPT_LAYOUT["position"]),
        choices=gpt_recipe.POSITIONS,
        show_default=False,
    ),
    "norm": Flag(
        "model",
        _layout("LayerNorm (GPT-2) or RMSNorm (Llama)", gpt_recipe.NANOGPT_LAYOUT["norm"]),
        choices=gpt_recipe.NORMS,
        show_default=False,
    ),
    "activation": Flag(
        "model",
        _layout(
            "feed-forward activation; swiglu/geglu are gated (three matrices, Llama: swiglu)",
            gpt_recipe.NANOGPT_LAYOUT["activation"],
        ),
        choices=gpt_recipe.ACTIVATIONS,
        show_default=False,
    ),
    "num_key_value_heads": Flag(
        "model",
        _layout(
            "key/value heads: grouped-query attention, 1 = multi-query (must divide --num-heads)",
            "--num-heads",
        ),
        positive_int,
        metavar="N",
        show_default=False,
    ),
    "schedule": Flag(
        "optimizer",
        "learning-rate decay after the warmup: 'wsd' holds the peak, then decays linearly to --min-lr over the "
        "last --decay-fraction of the run; 'cosine' is nanoGPT's cosine decay to --min-lr",
        choices=gpt_recipe.SCHEDULES,
    ),
    "decay_fraction": Flag("optimizer", "wsd: share of the run spent decaying, in (0, 1]", float),
    "min_lr": Flag("optimizer", "learning-rate floor", float),
    "warmup_steps": Flag("optimizer", "linear warmup", non_negative_int),
    "lr_decay_steps": Flag(
        "optimizer", "step at which the floor is reached (default: --steps)", positive_int, show_default=False
    ),
    "weight_decay": Flag("optimizer", "AdamW decay on weight matrices", float),
    "beta_2": Flag("optimizer", "AdamW's second-moment decay", float),
    "grad_clip": Flag("optimizer", "global norm clip, 0 = off", float),
    "eval_iters": Flag("evaluation", "val batches per evaluation, 0 = whole split", non_negative_int),
    "sample_tokens": Flag("evaluation", "characters sampled at the end", non_negative_int),
    "temperature": Flag("evaluation", "temperature of the sample", float),
    "top_k": Flag("evaluation", "top-k of the sample, 0 = all", non_negative_int),
}

BERT_FLAGS = {
    **TFDS_FLAGS,
    "data": Flag(
        "data",
        "folder with stsa.binary.{train,dev,test} ('<label> <sentence>' lines); none: TFDS glue/sst2",
        show_default=False,
    ),
    "vocabulary_size": Flag("data", "WordPiece vocabulary", positive_int),
    "max_length": Flag("model", "tokens per sentence (the model's context)", positive_int),
    "steps": Flag(
        "stages",
        "optimizer steps of the whole run: N // 2 masked-LM pretraining, the rest fine-tuning "
        "(default: --pretrain-steps + --finetune-epochs)",
        positive_int,
        show_default=False,
    ),
    "pretrain_steps": Flag("stages", "masked-LM steps", positive_int),
    "finetune_epochs": Flag("stages", "classifier epochs", positive_int),
    "finetune_batch_size": Flag("stages", "", positive_int),
    "finetune_learning_rate": Flag("stages", "", float),
    "mask_rate": Flag("stages", "masked-LM selection rate", float),
}

SEQ2SEQ_FLAGS = {
    "data": Flag(
        "data",
        "tab-separated pairs, e.g. spa-eng/spa.txt (English<TAB>Spanish), or a folder of line-aligned "
        "files SPLIT.LANG[.gz] (Multi30k: train.en.gz, train.de.gz, test_2016_flickr.en.gz, ...)",
    ),
    "reverse": Flag("data", "translate the second language into the first", action="store_true"),
    "languages": Flag("data", "a folder's SOURCE,TARGET file suffixes"),
    "test_split": Flag("data", "a folder's held-out split (all of it is translated and scored)"),
    "max_pairs": Flag("data", "use only the first N pairs after shuffling, 0 = all", non_negative_int),
    "max_words": Flag(
        "data", "drop training pairs with a side longer than this many words", non_negative_int
    ),
    "test_pairs": Flag(
        "data", "held-out pairs of a tab-separated file (at most a tenth of it)", non_negative_int
    ),
    "tokenizer": Flag(
        "data",
        "bpe: one cased byte-level BPE vocabulary learned from both languages (no unknown token); "
        "word: a lower-cased word vocabulary per language",
        choices=tuple(seq2seq_recipe.DEFAULT_VOCABULARY),
    ),
    "vocabulary_size": Flag(
        "data",
        "vocabulary size (default: 8000 shared for bpe, 6000 per language for word)",
        positive_int,
        show_default=False,
    ),
    "num_layers": Flag("model", "encoder and decoder layers", positive_int),
    "warmup_steps": Flag("optimizer", "Transformer schedule warmup", non_negative_int),
    "lr_scale": Flag("optimizer", "multiplier on the schedule", float),
    "label_smoothing": Flag("optimizer", "", float),
    "bleu_pairs": Flag("evaluation", "held-out pairs translated and scored (0 = all)", non_negative_int),
    "num_beams": Flag("evaluation", "beam width, 1 = greedy", positive_int),
    "length_penalty": Flag("evaluation", "GNMT length penalty alpha", float),
    "show": Flag("evaluation", "translations printed", non_negative_int),
}

#: Each recipe's own flags (beside `TRAINING_FLAGS`).
RECIPE_FLAGS = {"gpt": GPT_FLAGS, "bert": BERT_FLAGS, "seq2seq": SEQ2SEQ_FLAGS}


def add_recipe_options(parser, name):
    """The flags of recipe `name` (`keras_tfm.recipes.RECIPES`) on `parser`."""
    return add_options(parser, recipes.RECIPES[name].options, {**TRAINING_FLAGS, **RECIPE_FLAGS[name]})


def run_recipe(name, args):
    """Runs recipe `name` with the options in the parsed `args`; returns the exit status (0)."""
    recipe = recipes.RECIPES[name]
    recipe.train(**options_from(args, recipe.options))
    return 0


def recipe_parser(name, prog=None, description=None):
    """A parser of recipe `name`'s flags for a script (`examples/gpt_shakespeare.py`); `usage.run(args)`
    runs the recipe with one-line usage errors."""
    parser = usage.OneLineParser(
        prog=prog,
        description=description or recipes.RECIPES[name].help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_recipe_options(parser, name)
    return usage.set_handler(parser, lambda args: run_recipe(name, args), start_devices=False)


def main(name, argv=None, description=None):
    """An example script's entry point: parses `argv` with recipe `name`'s flags and runs it."""
    import keras_tfm_console as console

    args = recipe_parser(name, description=description).parse_args(sys.argv[1:] if argv is None else argv)
    console.quiet_tensorflow()
    return usage.run(args)


def register(subparsers):
    """`keras-tfm train {gpt,bert,seq2seq}`."""
    parser = subparsers.add_parser(
        "train",
        help="train a model with a ready-made recipe",
        description="Train a model with one of the recipes of keras_tfm.recipes (the examples run the same code). "
        "With --output DIR the model, its tokenizer(s) and training.json are saved; --export NAME also writes a "
        "TF Serving SavedModel.",
    )
    names = parser.add_subparsers(dest="recipe", metavar="{" + ",".join(recipes.RECIPES) + "}", required=True)
    for name, recipe in recipes.RECIPES.items():
        task = names.add_parser(name, help=recipe.help, description=recipe.help)
        add_recipe_options(task, name)
        # Logical CPU devices (--cpu-devices) are configured by the recipe, before the devices start.
        usage.set_handler(task, lambda args, name=name: run_recipe(name, args), start_devices=False)
    return parser
