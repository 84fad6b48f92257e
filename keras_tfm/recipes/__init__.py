"""Ready-made training recipes shared by `examples/*.py` and `keras-tfm train`.

    gpt      character-level GPT on Tiny Shakespeare (nanoGPT's `train_shakespeare_char` CPU run)   recipes/gpt.py
    bert     BERT: MLM pretraining on the SST-2 training sentences, then SST-2 classification       recipes/bert.py
    seq2seq  Transformer English→Spanish translation on the Anki/Tatoeba pairs                       recipes/seq2seq.py

Each recipe is `add_<name>_arguments(parser)` (its command-line options, from
the shared groups of `_options`, with small, fast defaults where the full run
is long), `run_<name>(args)` (runs it, returns a dict of results; with
`--output DIR` it also writes the model, its tokenizers and training.json, see
`output`) and `evaluate_<name>(trained, args)` (`keras-tfm evaluate`). `TASKS`
maps the names to `Task`s; `keras_tfm.cli` builds `keras-tfm train <name>`
from it and every example script calls `main_for`. Importing this package
does not import TensorFlow.
"""

import argparse
import collections
import sys

from keras_tfm.recipes import bert, gpt, seq2seq
from keras_tfm.recipes._options import UsageError, add_training_arguments  # noqa: F401
from keras_tfm.recipes.bert import add_bert_arguments, evaluate_bert, load_sst2, run_bert  # noqa: F401
from keras_tfm.recipes.gpt import (  # noqa: F401
    add_gpt_arguments,
    evaluate_gpt,
    load_shakespeare_text,
    nanogpt_init,
    run_gpt,
    sample_text,
)
from keras_tfm.recipes.seq2seq import add_seq2seq_arguments, evaluate_seq2seq, run_seq2seq  # noqa: F401

Task = collections.namedtuple("Task", ["add_arguments", "run", "help", "evaluate", "metric_help"])

TASKS = {
    "gpt": Task(add_gpt_arguments, run_gpt, gpt.HELP, evaluate_gpt, "a text file: loss, perplexity"),
    "bert": Task(
        add_bert_arguments,
        run_bert,
        bert.HELP,
        evaluate_bert,
        "a '<label> <sentence>' file: accuracy",
    ),
    "seq2seq": Task(
        add_seq2seq_arguments,
        run_seq2seq,
        seq2seq.HELP,
        evaluate_seq2seq,
        "a tab-separated pairs file: token accuracy, BLEU-4",
    ),
}


def report_usage_error(prog, error):
    """Prints a UsageError as one line; returns the exit status 2."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


def main_for(task, argv=None, description=None):
    """Entry point of an example script: parse `argv` with the task's options and run it."""
    import keras_tfm_console as console

    recipe = TASKS[task]
    parser = argparse.ArgumentParser(
        description=description or recipe.help, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    recipe.add_arguments(parser)
    args = parser.parse_args(argv)
    console.quiet_tensorflow()
    try:
        results = recipe.run(args)
    except UsageError as error:
        return report_usage_error(parser.prog, error)
    return 0 if results is not None else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_for(sys.argv[1]))
