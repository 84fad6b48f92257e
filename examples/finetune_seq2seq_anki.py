"""Fine-tune a seq2seq checkpoint on the Anki English→Spanish pairs with `keras-tfm finetune`, then
report sacreBLEU on held-out pairs.

    python examples/finetune_seq2seq_anki.py --checkpoint opus-mt-en-es \\
        --data ../shared/data/spa_eng_anki/spa-eng/spa.txt
    python examples/finetune_seq2seq_anki.py --checkpoint tests/fixtures/pretrained/tiny_marian \\
        --data ../shared/data/spa_eng_anki/spa-eng/spa.txt --learning-rate 1e-3

`--checkpoint` is a T5, BART or Marian checkpoint folder in HuggingFace's layout: a downloaded
Helsinki-NLP/opus-mt-en-es (the English→Spanish OPUS-MT translator), t5-small or facebook/bart-base
(T5 needs `--source-prefix "translate English to Spanish: "`, and the original T5 vocabulary has no
"¿", "¡" or accented capitals). `--data` is a SOURCE<TAB>TARGET file (Anki's spa.txt: English, Spanish,
attribution).

1. The pairs are shuffled (`--seed`); `--test-pairs` of them go to WORKDIR/test.tsv, the next
   `--train-pairs` to WORKDIR/train.tsv.
2. `keras-tfm finetune --checkpoint C --data train.tsv --dev test.tsv --output WORKDIR/model ...` runs
   in this process (`keras_tfm.cli.main`; the same command in a shell does the same): teacher forcing
   with the checkpoint's own tokenizer and special ids, AdamW with linear warmup and decay
   (`keras_tfm.recipes.finetune_seq2seq`), then the held-out loss, token accuracy and cased sacreBLEU /
   chrF of the translations (beam search, `--num-beams`).
3. The figures are printed (and written to `--results`), with the command that translates with the
   fine-tuned checkpoint: `keras-tfm generate --model WORKDIR/model --prompt "I see."`.

What to expect. No pretrained seq2seq checkpoint is stored beside this repository (the machines that
test it are offline), so only the random-init fixtures of tests/fixtures/pretrained were run. The
second command above (tiny_marian: d_model 32, 2 + 2 layers, 160-piece vocabularies per side; 2,000
pairs, one epoch of 63 steps, learning rate 1e-3, 100 held-out pairs, beam 4) used 3 minutes of CPU
time (176 s user; 9 minutes of wall time on a shared 2-core machine at load 7) and ended at held-out
token accuracy 0.13, sacreBLEU 0.00 and chrF 0.00: the best beam of a model that small, briefly
trained from random weights, is the empty sentence. The run shows the workflow, not a translator.
A real checkpoint starts where its training left it: OPUS-MT en→es reports 54.9 BLEU on Tatoeba (its
model card), the corpus Anki's pairs come from, so fine-tuning it at the recipe's 2e-5 adapts it to
Anki's short sentences rather than teaching it Spanish; that run was not measured here.
"""

import argparse
import json
import os
import random
import shlex
import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="T5, BART or Marian checkpoint folder")
    p.add_argument("--data", required=True, help="SOURCE<TAB>TARGET pairs, e.g. spa-eng/spa.txt")
    p.add_argument("--workdir", default="runs/finetune_seq2seq_anki", help="train.tsv, test.tsv, model/")
    p.add_argument("--train-pairs", type=int, default=2000, help="training pairs (default: 2000)")
    p.add_argument("--test-pairs", type=int, default=100, help="held-out pairs scored (default: 100)")
    p.add_argument("--epochs", type=int, default=1, help="(default: 1)")
    p.add_argument("--steps", type=int, default=None, help="stop after N optimizer steps")
    p.add_argument("--batch-size", type=int, default=32, help="(default: 32)")
    p.add_argument("--learning-rate", type=float, default=2e-5, help="peak learning rate (default: 2e-5)")
    p.add_argument("--max-length", type=int, default=None, help="tokens per sentence (default: the recipe's)")
    p.add_argument("--num-beams", type=int, default=4, help="beam width of the held-out translations")
    p.add_argument("--source-prefix", default="", help="T5's task prefix")
    p.add_argument("--seed", type=int, default=0, help="shuffling seed (default: 0)")
    p.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2), help="Keras fit verbosity")
    p.add_argument("--results", default=None, help="write the figures to this JSON file")
    return p.parse_args(argv)


def read_pairs(path):
    """[(source, target)] of the first two columns of a tab-separated file (plain Python: Anki's
    118,964 lines in a second; `keras-tfm finetune` checks the files it is given again)."""
    if not os.path.isfile(path):
        raise ValueError(f"`data`: {path!r} is not a file.")
    pairs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            columns = line.rstrip("\n").split("\t")
            if len(columns) < 2 and line.strip():
                raise ValueError(f"`data` {path}:{number}: expected SOURCE<TAB>TARGET; received {line!r}.")
            if line.strip():
                pairs.append((columns[0], columns[1]))
    return pairs


def split_files(args):
    """Writes WORKDIR/train.tsv and WORKDIR/test.tsv from `--data`; returns their paths."""
    pairs = read_pairs(args.data)
    random.Random(args.seed).shuffle(pairs)
    if len(pairs) < args.test_pairs + 1:
        raise ValueError(
            f"`data` has {len(pairs)} pairs; --test-pairs {args.test_pairs} leaves none to train."
        )
    test, train = pairs[: args.test_pairs], pairs[args.test_pairs : args.test_pairs + args.train_pairs]
    os.makedirs(args.workdir, exist_ok=True)
    paths = {}
    for name, rows in (("train", train), ("test", test)):
        paths[name] = os.path.join(args.workdir, f"{name}.tsv")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.writelines(f"{s}\t{t}\n" for s, t in rows)
    return paths


def finetune_argv(args, paths, results):
    """The `keras-tfm finetune` arguments of the run."""
    argv = ["finetune", "--checkpoint", args.checkpoint, "--data", paths["train"], "--dev", paths["test"]]
    argv += ["--output", os.path.join(args.workdir, "model"), "--overwrite", "--results", results]
    options = {
        "epochs": args.epochs,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "max_length": args.max_length,
        "num_beams": args.num_beams,
        "bleu_pairs": 0,
        "seed": args.seed,
        "verbose": args.verbose,
    }
    for name, value in options.items():
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    if args.source_prefix:
        argv += ["--source-prefix", args.source_prefix]
    return argv


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.checkpoint):
        print(f"error: --checkpoint {args.checkpoint!r} is not a directory", file=sys.stderr)
        return 2
    try:
        paths = split_files(args)
    except ValueError as error:
        print(f"error: {str(error).replace('`data`', '--data')}", file=sys.stderr)
        return 2
    from keras_tfm import cli

    results_path = args.results or os.path.join(args.workdir, "results.json")
    command = finetune_argv(args, paths, results_path)
    print("$ keras-tfm " + shlex.join(command), flush=True)
    status = cli.main(command)
    if status != 0:
        return status
    with open(results_path, encoding="utf-8") as f:
        results = json.load(f)
    print(
        f"held-out sacreBLEU {results['bleu']:.2f}, chrF {results['chrf']:.2f} on {results['bleu_pairs']} "
        f"pairs after {results['steps']} steps on {results['train_pairs']} pairs "
        f"({results['train_seconds']:.0f} s of training)"
    )
    model = os.path.join(args.workdir, "model")
    print(f'translate with it: keras-tfm generate --model {shlex.quote(model)} --prompt "I see."')
    return 0


if __name__ == "__main__":
    sys.exit(main())
