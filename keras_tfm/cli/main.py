"""The `keras-tfm` command line.

    keras-tfm train gpt --data input.txt --output runs/gpt --export shakespeare
    keras-tfm train bert --data sst2/ --output runs/bert
    keras-tfm train seq2seq --data spa-eng/spa.txt --output runs/mt
    keras-tfm export --model runs/mt --name translator        # tokenizers picked up beside the model
    keras-tfm generate --model saved_models/translator --prompt "I see."
    keras-tfm evaluate --model runs/gpt --data input.txt
    keras-tfm train gpt --help

Every subcommand is a module of this package with `register(subparsers)`, which adds its parser and
ends with `usage.set_handler(parser, handler)`; `SUBCOMMANDS` lists the modules. Bad values (an
`--output` parent that cannot be written, an `--output` that already holds a model, a `--model` folder without its tokenizer,
...) end with one line naming the flag on stderr and exit status 2 (`usage`); a Python warning is one
line too, `keras-tfm COMMAND: warning: ...`. TensorFlow's C++ log lines are hidden (`keras_tfm_console`;
`TF_CPP_MIN_LOG_LEVEL=0` shows them).
"""

import argparse
import sys
from collections.abc import Sequence

import keras_tfm_console as console
from keras_tfm import __version__
from keras_tfm.cli import embed, evaluate, export, finetune, generate, plot, train, usage

#: The subcommands, in the order of `keras-tfm --help`.
SUBCOMMANDS = (train, evaluate, export, generate, finetune, embed, plot)


def build_parser() -> argparse.ArgumentParser:
    """The `keras-tfm` argument parser with every subcommand of `SUBCOMMANDS`."""
    parser = usage.OneLineParser(
        prog="keras-tfm",
        description="Transformers for Keras 3 / TensorFlow: training recipes and tools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `keras-tfm ARGS` (default: `sys.argv[1:]`); returns the exit status.

    The console script is `keras_tfm_console.launcher:main`, which answers `--version` without importing
    TensorFlow and quiets TensorFlow's start-up before importing this package.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    console.set_log_levels()
    with console.quiet_native_logs():  # building the parser imports the recipes, and with them TensorFlow
        parser = build_parser()
    args = parser.parse_args(argv)
    console.quiet_tensorflow(start_devices=args._start_devices)
    return usage.run(args)
