"""The `keras-tfm` command line: `main(argv)` runs it and returns the exit status.

One module per subcommand (train, evaluate, export, generate, finetune, embed, plot), each with
`register(subparsers)`; `main.SUBCOMMANDS` lists them. `options` holds the flags the subcommands share
(read from the recipes' option dataclasses: the defaults live there), `usage` the one-line usage error.
The recipes (`keras_tfm.recipes`) import nothing from here.
"""

from keras_tfm.cli.main import SUBCOMMANDS, build_parser, main

__all__ = ["SUBCOMMANDS", "build_parser", "main"]
