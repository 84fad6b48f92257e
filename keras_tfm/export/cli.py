"""`keras-tfm export` and `keras-tfm generate` subcommands (argparse).

Each `add_*_subcommand(subparsers)` registers its parser and sets
`func=handler`; the main CLI calls `args.func(args)` (returns an exit code).
"""

import json
import os
import sys

from keras_tfm.checks import positive_int_arg

#: `keras-tfm generate`'s number of new tokens when --max-new-tokens is not given (capped by the export).
DEFAULT_MAX_NEW_TOKENS = 64


def export_info(version_dir):
    """The export's assets.extra/keras_tfm.json: kind, max_new_tokens_limit, (GPT) max_length; {} if absent."""
    path = os.path.join(version_dir, "assets.extra", "keras_tfm.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def default_max_new_tokens(info, prompts):
    """`DEFAULT_MAX_NEW_TOKENS`, capped by the export's limit. A GPT export whose `generate` slides a
    window past the model's context (`sliding_window` in its info) takes any count; an older one is also
    capped by the room its context leaves after the longest prompt (at most one token per UTF-8 byte)."""
    count = min(DEFAULT_MAX_NEW_TOKENS, info.get("max_new_tokens_limit") or DEFAULT_MAX_NEW_TOKENS)
    if info.get("max_length") and not info.get("sliding_window"):
        count = min(count, info["max_length"] - max(len(p.encode("utf-8")) for p in prompts))
    return max(count, 1)


def add_export_subcommand(subparsers):
    """Registers `export`: a trained model (+ the tokenizers beside it) → saved_models/NAME/VERSION."""
    p = subparsers.add_parser(
        "export",
        help="Export a trained model as a TF Serving SavedModel version.",
        description="Exports a trained model with every signature it supports. --model is a folder written by "
        "`keras-tfm train ... --output DIR` (model.keras, its tokenizer(s) and class names are read from it) "
        "or a .keras file (vocabulary files beside it are picked up the same way).",
    )
    p.add_argument("--model", required=True, help="Training output folder, or a .keras model file.")
    p.add_argument(
        "--tokenizer", help="Vocabulary file (keras_tfm save_vocabulary); default: the one beside the model."
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
        "--max-beams",
        dest="max_beams",
        type=positive_int_arg,
        default=4,
        help="Widest beam search a request may ask for (seq2seq translate, GPT beam_search: num_beams "
        "1..max; default 4).",
    )
    p.add_argument(
        "--beam-widths", dest="beam_widths", default=None, help="Deprecated: --max-beams = the largest."
    )
    p.add_argument("--eos-id", dest="eos_id", type=int, default=None, help="Stop id (GPT default none).")
    p.add_argument(
        "--ids-only",
        action="store_true",
        help="GPT without a tokenizer: only the id signatures (serving_default, generate_ids).",
    )
    p.add_argument("--no-warmup", dest="warmup", action="store_false", help="Do not write warmup requests.")
    p.add_argument("--no-xla", dest="jit_compile", action="store_false", help="Do not XLA-compile decoding.")
    p.set_defaults(func=run_export)
    return p


def _tokenizer_files(args, trained):
    """The export's tokenizer argument: explicit files first, else those found beside the model."""
    from keras_tfm.recipes import UsageError
    from keras_tfm.tokenizers import load_tokenizer

    def load(flag, path):
        try:
            return load_tokenizer(path)
        except (OSError, ValueError) as error:
            raise UsageError(flag, str(error)) from None

    found = dict(trained.tokenizers)
    if args.tokenizer:
        found.pop("tokenizer", None)
        found["source_tokenizer" if args.target_tokenizer else "tokenizer"] = load(
            "--tokenizer", args.tokenizer
        )
    if args.target_tokenizer:
        found["target_tokenizer"] = load("--target-tokenizer", args.target_tokenizer)
    if "source_tokenizer" in found and "target_tokenizer" in found:
        return (found["source_tokenizer"], found["target_tokenizer"])
    return found.get("tokenizer") or found.get("source_tokenizer")


def run_export(args):
    from keras_tfm.export.exporter import detect_kind, export_for_serving
    from keras_tfm.recipes import UsageError
    from keras_tfm.recipes.output import load_trained

    trained = load_trained(args.model)
    tokenizer = _tokenizer_files(args, trained)
    kind = args.kind
    if kind == "auto":
        try:
            kind = detect_kind(trained.model)
        except ValueError as error:
            raise UsageError("--kind", str(error)) from None
    if tokenizer is None and not (kind == "gpt" and args.ids_only):
        raise UsageError(
            "--model",
            f"no tokenizer beside the model in {trained.folder!r} for the text signatures; pass --tokenizer FILE"
            + (" (or --ids-only for the id signatures alone)" if kind == "gpt" else ""),
        )
    labels = [s.strip() for s in args.labels.split(",")] if args.labels else trained.labels
    max_beams = args.max_beams
    if args.beam_widths:
        try:
            max_beams = max(int(w) for w in args.beam_widths.split(","))
        except ValueError:
            raise UsageError(
                "--beam-widths", f"expected comma-separated ints; received {args.beam_widths!r}"
            ) from None
    try:
        path = export_for_serving(
            trained.model,
            os.path.join(args.dir, args.name),
            tokenizer=None if args.ids_only else tokenizer,
            version=args.version,
            kind=kind,
            label_names=labels,
            max_new_tokens_limit=args.max_new_tokens_limit,
            warmup=args.warmup,
            max_beams=max_beams,
            eos_id=args.eos_id,
            jit_compile=args.jit_compile,
        )
    except FileExistsError as error:
        raise UsageError("--version", str(error)) from None
    except ValueError as error:
        raise UsageError("--model", str(error).splitlines()[0]) from None
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
    p.add_argument(
        "--max-new-tokens",
        dest="max_new_tokens",
        type=int,
        default=None,
        help="Tokens to generate (default: 64, or fewer when the export's limits or a GPT's context "
        "after the prompt leave less room).",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default).")
    p.add_argument("--top-k", dest="top_k", type=int, default=0)
    p.add_argument("--top-p", dest="top_p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--num-beams",
        dest="num_beams",
        type=int,
        default=1,
        help="Beam width (1 = greedy; GPT: above 1 runs the beam_search signature, sampling options unused).",
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
    except FileNotFoundError as error:
        print(f"keras-tfm generate: error: --model: {error}", file=sys.stderr)
        return 2
    except (TypeError, ValueError) as error:
        print(f"keras-tfm generate: error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2


def _run_generate(args):
    from keras_tfm.export.client import call_signature, load_served, resolve_version_dir

    directory = resolve_version_dir(args.model, args.version)
    loaded = load_served(directory)
    names = set(loaded.signatures)
    if args.max_new_tokens is None:
        args.max_new_tokens = default_max_new_tokens(export_info(directory), args.prompt)
    prompts = [s.encode("utf-8") for s in args.prompt]
    beam = dict(
        max_new_tokens=args.max_new_tokens, num_beams=args.num_beams, length_penalty=args.length_penalty
    )
    if "beam_search" in names and args.num_beams != 1:
        out, main = call_signature(loaded, "beam_search", prompts=prompts, **beam), "completions"
    elif "generate" in names:
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
        out, main = call_signature(loaded, "translate", inputs=prompts, **beam), "translations"
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
