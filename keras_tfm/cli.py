"""The `keras-tfm` command line.

    keras-tfm train gpt --data input.txt            # character GPT on Tiny Shakespeare
    keras-tfm train bert --data-dir sst2/           # BERT MLM + SST-2 classifier
    keras-tfm train seq2seq --data spa-eng/spa.txt  # Transformer translation
    keras-tfm train gpt --help

Adding a subcommand: write a function that takes the `subparsers` object,
adds its parser and sets `func` (called with the parsed args; its return
value is the exit status), and decorate it with `@subcommand`:

    @subcommand
    def _export(subparsers):
        p = subparsers.add_parser("export", help="...")
        p.add_argument(...)
        p.set_defaults(func=run_export)

Subcommands in other modules register the same way, or define functions
named `add_<name>_subcommand(subparsers)`: every such function of a module
listed in `SUBCOMMAND_MODULES` is registered when the parser is built
(`keras_tfm.export.cli`: export, generate; `keras_tfm.plotting`: plot).
"""

import argparse
import importlib
import os
import sys

# A command-line tool should not open with TensorFlow's start-up chatter.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_REGISTRY = []

#: Modules imported by `build_parser`: their `@subcommand` functions and their
#: `add_*_subcommand(subparsers)` functions are registered (missing modules are skipped).
SUBCOMMAND_MODULES = ("keras_tfm.export.cli", "keras_tfm.plotting")


def subcommand(register):
    """Decorator: `register(subparsers)` adds one subcommand (see the module docstring)."""
    if register not in _REGISTRY:
        _REGISTRY.append(register)
    return register


@subcommand
def _train(subparsers):
    from keras_tfm import recipes

    parser = subparsers.add_parser(
        "train",
        help="train a model with a ready-made recipe",
        description="Train a model with one of the recipes of keras_tfm.recipes (the examples run the same code).",
    )
    tasks = parser.add_subparsers(dest="task", metavar="{" + ",".join(recipes.TASKS) + "}", required=True)
    for name, (add_arguments, run, help_text) in recipes.TASKS.items():
        task = tasks.add_parser(name, help=help_text, description=help_text)
        add_arguments(task)
        task.set_defaults(func=lambda args, run=run: 0 if run(args) is not None else 1)


def _import_subcommand_modules():
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if not name.startswith(str(e.name)):
                raise
            continue
        for attr in sorted(vars(module)):
            if attr.startswith("add_") and attr.endswith("_subcommand") and callable(getattr(module, attr)):
                subcommand(getattr(module, attr))


def build_parser():
    """The `keras-tfm` argument parser with every registered subcommand."""
    _import_subcommand_modules()
    parser = argparse.ArgumentParser(
        prog="keras-tfm",
        description="Transformers for Keras 3 / TensorFlow: training recipes and tools.",
    )
    from keras_tfm import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in _REGISTRY:
        register(subparsers)
    return parser


def main(argv=None):
    """Console-script entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    status = args.func(args)
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
