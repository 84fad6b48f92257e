"""`keras-tfm export` and `keras-tfm generate` subcommands (argparse).

Each `add_*_subcommand(subparsers)` registers its parser and sets
`func=handler`; the main CLI calls `args.func(args)` (returns an exit code).
"""

import json
import sys


def add_export_subcommand(subparsers):
    """Registers `export`: .keras model + tokenizer vocabulary → saved_models/NAME/VERSION."""
    p = subparsers.add_parser("export", help="Export a .keras model as a TF Serving SavedModel version.")
    p.add_argument("--model", required=True, help="Saved .keras model (keras_tfm GPT, seq2seq or BERT).")
    p.add_argument(
        "--tokenizer", help="Vocabulary file (keras_tfm save_vocabulary); default: the model's tokenizer."
    )
    p.add_argument(
        "--target-tokenizer", dest="target_tokenizer", help="seq2seq: target-side vocabulary file."
    )
    p.add_argument("--name", required=True, help="Model name: writes DIR/NAME/VERSION.")
    p.add_argument("--dir", default="saved_models", help="Base directory (default saved_models).")
    p.add_argument("--version", type=int, default=None, help="Version number (default: next free).")
    p.add_argument(
        "--kind", default="auto", choices=["auto", "gpt", "seq2seq", "bert_classifier", "bert_mlm"]
    )
    p.add_argument("--labels", default=None, help="Classifier label names, comma-separated.")
    p.add_argument("--max-new-tokens-limit", dest="max_new_tokens_limit", type=int, default=None)
    p.add_argument(
        "--beam-widths", dest="beam_widths", default="1,2,4", help="seq2seq beam widths (default 1,2,4)."
    )
    p.add_argument("--eos-id", dest="eos_id", type=int, default=None, help="Stop id (GPT default none).")
    p.add_argument("--no-warmup", dest="warmup", action="store_false", help="Do not write warmup requests.")
    p.add_argument("--no-xla", dest="jit_compile", action="store_false", help="Do not XLA-compile decoding.")
    p.set_defaults(func=run_export)
    return p


def run_export(args):
    import os

    import keras

    import keras_tfm.models  # noqa: F401  (registers the builders' layers)
    from keras_tfm.data import load_tokenizer
    from keras_tfm.export.exporter import export_for_serving

    model = keras.saving.load_model(args.model)
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if args.target_tokenizer:
        tokenizer = (tokenizer, load_tokenizer(args.target_tokenizer))
    labels = [s.strip() for s in args.labels.split(",")] if args.labels else None
    widths = tuple(int(w) for w in args.beam_widths.split(","))
    path = export_for_serving(
        model,
        os.path.join(args.dir, args.name),
        tokenizer=tokenizer,
        version=args.version,
        kind=args.kind,
        label_names=labels,
        max_new_tokens_limit=args.max_new_tokens_limit,
        warmup=args.warmup,
        beam_widths=widths,
        eos_id=args.eos_id,
        jit_compile=args.jit_compile,
    )
    print(path)
    return 0


def add_generate_subcommand(subparsers):
    """Registers `generate`: query an exported version with tf.saved_model.load (no Keras)."""
    p = subparsers.add_parser(
        "generate", help="Run an exported SavedModel (generate / translate / classify / fill_mask)."
    )
    p.add_argument(
        "--model", required=True, help="saved_models/NAME (latest version) or a version directory."
    )
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--prompt", action="append", required=True, help="Input text (repeat for a batch).")
    p.add_argument("--max-new-tokens", dest="max_new_tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default).")
    p.add_argument("--top-k", dest="top_k", type=int, default=0)
    p.add_argument("--top-p", dest="top_p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--num-beams", dest="num_beams", type=int, default=1, help="seq2seq: beam width (1 = greedy)."
    )
    p.add_argument("--length-penalty", dest="length_penalty", type=float, default=0.6)
    p.add_argument("--json", action="store_true", help="Print all outputs as JSON.")
    p.set_defaults(func=run_generate)
    return p


def run_generate(args):
    import tensorflow as tf

    try:
        return _run_generate(args)
    except tf.errors.InvalidArgumentError as error:  # a request the model's signature rejected
        message = str(error)
        if "assertion failed:" in message:
            message = message.split("assertion failed:", 1)[1].split("\n")[0].strip()
        print(f"keras-tfm generate: invalid request: {message}", file=sys.stderr)
        return 2
    except (FileNotFoundError, TypeError, ValueError) as error:
        print(f"keras-tfm generate: {error}", file=sys.stderr)
        return 2


def _run_generate(args):
    from keras_tfm.export.client import call_signature, load_served

    loaded = load_served(args.model, args.version)
    names = set(loaded.signatures)
    prompts = [s.encode("utf-8") for s in args.prompt]
    if "generate" in names:
        out = call_signature(
            loaded,
            "generate",
            prompts=prompts,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=args.seed,
        )
        main = "completions"
    elif "translate" in names:
        out = call_signature(
            loaded,
            "translate",
            inputs=prompts,
            max_new_tokens=args.max_new_tokens,
            num_beams=args.num_beams,
            length_penalty=args.length_penalty,
        )
        main = "translations"
    elif "classify" in names:
        out = call_signature(loaded, "classify", inputs=prompts)
        main = "labels"
    elif "fill_mask" in names:
        out = call_signature(loaded, "fill_mask", inputs=prompts)
        main = "filled"
    else:
        print(f"No text signature in {sorted(names)}.", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({k: v.tolist() for k, v in out.items()}, ensure_ascii=False))
    else:
        for text in out[main]:
            print(text)
    return 0
