"""`keras-tfm export`: a trained model (and the tokenizers beside it) → EXPORT_DIR/NAME/VERSION, or with
`--format litert` → EXPORT_DIR/NAME.tflite (and its metadata and tokenizers beside it)."""

import os

from keras_tfm.cli import usage
from keras_tfm.cli.options import comma_list, positive_int

#: --max-beams when not given.
DEFAULT_MAX_BEAMS = 4


def _tokenizers(args, trained):
    """The export's tokenizer argument: explicit files first, else those found beside the model."""
    from keras_tfm.tokenizers import load_tokenizer

    def load(flag, path):
        try:
            return load_tokenizer(path)
        except (OSError, ValueError) as error:
            raise usage.UsageError(flag, str(error)) from None

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


#: The export flags that only some kinds of model use (a flag given for another kind is refused).
KIND_FLAGS = {
    "label_names": ("classifier",),
    "eos_id": ("causal_lm", "seq2seq_lm"),
    "max_beams": ("causal_lm", "seq2seq_lm"),
    "max_new_tokens_limit": ("causal_lm", "seq2seq_lm"),
    "ids_only": ("causal_lm",),
    "target_tokenizer": ("seq2seq_lm",),
}


def _refuse_unused(args, kind):
    for name, kinds in KIND_FLAGS.items():
        if getattr(args, name) not in (None, False) and kind not in kinds:
            raise usage.UsageError(
                usage.flag(name), f"a {kind} model has no use for it (only {' or '.join(kinds)} models)"
            )


#: The flags of a SavedModel export that a LiteRT export has no use for (refused when given).
SAVED_MODEL_FLAGS = ("version", "signatures", "max_beams", "max_new_tokens_limit", "eos_id", "ids_only")


def _export_litert(args, trained, tokenizer, kind):
    """`--format litert`: `export_for_litert` to EXPORT_DIR/NAME.tflite; returns the path."""
    from keras_tfm.export.litert import export_for_litert
    from keras_tfm.export.litert_runner import interpreter_class

    try:
        interpreter_class()
    except ImportError as error:
        raise usage.UsageError("--format", str(error)) from None
    for name in SAVED_MODEL_FLAGS:
        if getattr(args, name) not in (None, False):
            raise usage.UsageError(usage.flag(name), "a SavedModel option; --format litert has no use for it")
    os.makedirs(args.export_dir, exist_ok=True)
    return export_for_litert(
        trained.model,
        os.path.join(args.export_dir, f"{args.name}.tflite"),
        tokenizer=tokenizer,
        quantize=args.quantize,
        label_names=args.label_names or trained.labels,
        kind=kind,
    )


def _signatures(names):
    """--signatures → `export_for_serving(signatures=)`: None (the defaults), "all" or the names."""
    if names is None:
        return None
    return "all" if names == ["all"] else tuple(names)


def _ids_only(signatures):
    """--ids-only: the id signatures of `signatures` (None: the defaults; "all"), also for a model.keras that
    carries its tokenizer (`export_for_serving` would take `model.tokenizer`); a text signature named in
    --signatures is refused."""
    from keras_tfm.export.exporter import DEFAULT_SIGNATURES, SIGNATURES, TEXT_SIGNATURES

    if signatures is None or signatures == "all":
        names = (DEFAULT_SIGNATURES if signatures is None else SIGNATURES)["causal_lm"]
        return tuple(n for n in names if n not in TEXT_SIGNATURES)
    text = [n for n in signatures if n in TEXT_SIGNATURES]
    if text:
        raise usage.UsageError(
            "--signatures", f"{text[0]!r} takes and returns text; --ids-only exports the id signatures alone"
        )
    return signatures


def run_export(args):
    """Exports `--model` with the signatures of --signatures (default: its kind's); prints the version
    folder."""
    from keras_tfm.atomic_files import write_guard
    from keras_tfm.export import detect_kind, export_for_serving
    from keras_tfm.recipes import load_trained
    from keras_tfm.recipes.output import check_export_target, model_bytes

    if args.name in ("", ".", "..") or "/" in args.name or "\\" in args.name:
        raise usage.UsageError(
            "--name", f"must be a plain folder name (the model's name); received {args.name!r}"
        )
    check_export_target("export_dir", args.export_dir, args.name)  # before the (slow) load
    trained = load_trained(args.model)
    tokenizer = _tokenizers(args, trained)
    kind = args.kind
    if kind == "auto":
        try:
            kind = detect_kind(trained.model)
        except ValueError as error:
            raise usage.UsageError("--kind", str(error)) from None
    _refuse_unused(args, kind)
    if tokenizer is None and not (kind == "causal_lm" and args.ids_only):
        raise usage.UsageError(
            "--model",
            f"no tokenizer beside the model in {trained.folder!r} for the text signatures; pass --tokenizer FILE"
            + (" (or --ids-only for the id signatures alone)" if kind == "causal_lm" else ""),
        )
    if args.quantize is not None and args.format != "litert":
        raise usage.UsageError("--quantize", "only a LiteRT export is quantized (--format litert)")
    signatures = _signatures(args.signatures)
    if args.ids_only:
        signatures = _ids_only(signatures)
    target = os.path.join(args.export_dir, args.name)
    try:
        with write_guard(target, model_bytes(trained.model)):
            if args.format == "litert":
                print(_export_litert(args, trained, tokenizer, kind))
                return 0
            path = export_for_serving(
                trained.model,
                target,
                tokenizer=None if args.ids_only else tokenizer,
                version=args.version,
                kind=kind,
                label_names=args.label_names or trained.labels,
                max_new_tokens_limit=args.max_new_tokens_limit,
                warmup=args.warmup,
                max_beams=DEFAULT_MAX_BEAMS if args.max_beams is None else args.max_beams,
                eos_id=args.eos_id,
                jit_compile=args.jit_compile,
                signatures=signatures,
            )
    except FileExistsError as error:
        raise usage.UsageError("--version", str(error)) from None
    except ValueError as error:
        named = usage.from_error(error, {k: v for k, v in args._flags.items() if k != "model"})
        raise (named or usage.UsageError("--model", str(error).splitlines()[0])) from None
    print(path)
    return 0


def register(subparsers):
    """`keras-tfm export`."""
    import argparse

    p = subparsers.add_parser(
        "export",
        help="export a trained model as a TF Serving SavedModel version (or a LiteRT .tflite file)",
        description="Exports a trained model with its kind's default signatures (--signatures for others). --model is a folder written by "
        "`keras-tfm train ... --output DIR` (model.keras, its tokenizer(s) and class names are read from it) "
        "or a .keras file (vocabulary files beside it are picked up the same way).",
    )
    p.add_argument("--model", required=True, help="training output folder, or a .keras model file")
    p.add_argument(
        "--format",
        default="saved_model",
        choices=["saved_model", "litert"],
        help="saved_model: EXPORT_DIR/NAME/VERSION for TF Serving (default); litert: EXPORT_DIR/NAME.tflite "
        "for `keras-tfm generate` and ai-edge-litert (GPT, seq2seq, BERT classifier, sentence encoder)",
    )
    p.add_argument(
        "--quantize",
        default=None,
        choices=["int8", "int8_per_channel"],
        help="--format litert: int8 weights (one scale per tensor, or per output channel), float "
        "activations (dynamic-range quantization)",
    )
    p.add_argument(
        "--tokenizer", help="vocabulary file (keras_tfm save_vocabulary); default: the one beside the model"
    )
    p.add_argument("--target-tokenizer", help="seq2seq: target-side vocabulary file")
    p.add_argument("--name", required=True, help="the model's name: writes EXPORT_DIR/NAME/VERSION")
    p.add_argument("--export-dir", default="saved_models", help="base folder (default: %(default)s)")
    p.add_argument(
        "--version", type=positive_int, default=None, help="version number (default: the next free one)"
    )
    p.add_argument(
        "--kind", default="auto", choices=["auto", "causal_lm", "seq2seq_lm", "classifier", "masked_lm"]
    )
    p.add_argument(
        "--label-names", type=comma_list, default=None, help="classifier class names, comma-separated"
    )
    p.add_argument("--max-new-tokens-limit", type=positive_int, default=None)
    p.add_argument(
        "--max-beams",
        type=positive_int,
        default=None,
        help="widest beam search a request may ask for (seq2seq translate, GPT beam_search: num_beams "
        f"1..max; default: {DEFAULT_MAX_BEAMS})",
    )
    p.add_argument("--eos-id", type=int, default=None, help="stop id (GPT default: none)")
    p.add_argument(
        "--signatures",
        type=comma_list,
        default=None,
        help="signatures to export, comma-separated, or 'all' (default: GPT serving_default,generate,"
        "generate_ids (beam_search,beam_search_ids on request); seq2seq translate; classifier classify; "
        "masked LM fill_mask; sentence encoder embed)",
    )
    p.add_argument(
        "--ids-only",
        action="store_true",
        help="GPT: only the id signatures (serving_default, generate_ids; with --signatures all also "
        "beam_search_ids), even when the model carries a tokenizer",
    )
    p.add_argument(
        "--warmup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write warmup requests (default: on)",
    )
    p.add_argument(
        "--jit-compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="XLA-compile decoding (default: on)",
    )
    return usage.set_handler(p, run_export)
