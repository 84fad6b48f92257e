"""`keras-tfm generate`: query an exported SavedModel version with tf.saved_model.load (no Keras), or a
LiteRT export (a `.tflite` path) with `keras_tfm.export.litert_runner`.

Before loading, the graph's ops are checked against those keras_tfm's exporters emit
(`keras_tfm.export.trusted_ops`): a SavedModel with any other op (WriteFile, ReadFile, PyFunc, ...) is
refused by name, unless `--trust-saved-model`.

Prints one text per `--prompt` (`output_texts`): a GPT's prompt followed by its completion, as KerasHub's
`generate` returns it (`--completion-only`: the completion alone, for scripts); a seq2seq model's
translation, a classifier's label and a masked LM's filled-in text (the whole text already), each alone.
`--json` prints every output of the signature instead (a GPT's "completions" without the prompt).

A HuggingFace-layout checkpoint folder (config.json: T5, BART, Marian, GPT-2, Llama, Mistral, Qwen2, or
the `--output` of `keras-tfm finetune`) is loaded with `from_pretrained` and answers the same request in
process, as its export's `translate` / `generate` / `beam_search` would (`checkpoint_text`).
"""

import json
import os

from keras_tfm.cli import checkpoint_text, usage
from keras_tfm.cli.options import positive_int, seed

#: The number of new tokens when --max-new-tokens is not given (capped by the export).
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
    window past the model's context (`sliding_window` in its info) takes any count; one without it is also
    capped by the room its context leaves after the longest prompt (at most one token per UTF-8 byte)."""
    count = min(DEFAULT_MAX_NEW_TOKENS, info.get("max_new_tokens_limit") or DEFAULT_MAX_NEW_TOKENS)
    if info.get("max_length") and not info.get("sliding_window"):
        count = min(count, info["max_length"] - max(len(p.encode("utf-8")) for p in prompts))
    return max(count, 1)


def run_generate(args):
    """Runs the export's text signature on `--prompt`s; prints the outputs (`output_texts`, or JSON)."""
    import tensorflow as tf

    try:
        return _run_generate(args)
    except tf.errors.InvalidArgumentError as error:  # a request the model's signature rejected
        message = str(error)
        if "assertion failed:" in message:
            message = message.split("assertion failed:", 1)[1].split("\n")[0].strip()
        raise usage.UsageError(None, f"invalid request: {message}") from None
    except FileNotFoundError as error:
        raise usage.UsageError("--model", str(error)) from None
    except usage.UsageError:
        raise
    except (TypeError, ValueError) as error:  # a request the client refused before calling the model
        raise (
            usage.from_error(error, args._flags) or usage.UsageError(None, str(error).splitlines()[0])
        ) from None


#: The request flags with their defaults; a flag left out is None on the command line (so that a flag
#: given for a signature that cannot use it is refused, not ignored).
REQUEST_DEFAULTS = {
    "temperature": 0.0,
    "top_k": 0,
    "top_p": 1.0,
    "seed": 0,
    "num_beams": 1,
    "length_penalty": 0.6,
    "max_new_tokens": None,
}
SAMPLING = ("temperature", "top_k", "top_p", "seed")
BEAM = ("num_beams", "length_penalty", "max_new_tokens")
#: The request flags each text signature uses.
USES = {
    "beam_search": BEAM,
    "generate": (*SAMPLING, "max_new_tokens"),
    "translate": BEAM,
    "classify": (),
    "fill_mask": (),
}


#: The signatures that continue the prompt (a GPT's): their texts are printed after the prompt.
CONTINUING = ("generate", "beam_search")
#: The output printed of each signature.
PRINTED = {
    "generate": "completions",
    "beam_search": "completions",
    "translate": "translations",
    "classify": "labels",
    "fill_mask": "filled",
}


def output_texts(signature, prompts, out, completion_only=False):
    """The texts `keras-tfm generate` prints, one per prompt.

    Args:
        signature: the signature called (`PRINTED`).
        prompts: the prompts (str), in the order of the request.
        out: the signature's outputs (`keras_tfm.export.client.call_signature`).
        completion_only: for `CONTINUING` signatures, the completion without the prompt.

    Returns:
        For `generate` / `beam_search`, `prompt + completion` (the completion alone with
        `completion_only`); else the translation, the label or the filled-in text.
    """
    texts = [str(text) for text in out[PRINTED[signature]]]
    if signature in CONTINUING and not completion_only:
        return [prompt + text for prompt, text in zip(prompts, texts)]
    return texts


def _choose_signature(names, args):
    """The text signature `args` asks of an export with the signatures `names`."""
    if "beam_search" in names and args.num_beams not in (None, 1):
        return "beam_search"
    for name in ("generate", "translate", "classify", "fill_mask"):
        if name in names:
            return name
    raise usage.UsageError("--model", f"no text signature in {sorted(names)}")


def _refuse_unused(signature, args):
    """A UsageError for the first request flag given that `signature` cannot use."""
    for name in REQUEST_DEFAULTS:
        if name == "num_beams" and signature == "generate" and args.num_beams == 1:
            continue  # one beam is greedy decoding, what `generate` does without sampling flags
        if getattr(args, name) is not None and name not in USES[signature]:
            used = ", ".join(usage.flag(n) for n in USES[signature]) or "none of the request flags"
            hint = ""
            if signature == "beam_search" and name in SAMPLING:
                hint = " (GPT: --num-beams above 1 runs beam_search, which does not sample)"
            elif signature == "generate" and name == "num_beams":
                hint = " (the export has no beam_search signature: `keras-tfm export --signatures all`)"
            raise usage.UsageError(
                usage.flag(name),
                f"the export's {signature!r} signature cannot use it; it takes {used}{hint}",
            )


#: The text "signature" of a LiteRT export of each kind (the flags it takes are those of `USES`).
LITERT_SIGNATURES = {"causal_lm": "generate", "seq2seq_lm": "translate", "classifier": "classify"}


def _run_litert(args):
    """`--model PATH.tflite`: the LiteRT runner on `--prompt`s (greedy or sampling; no beam search)."""
    from keras_tfm.export.litert_encoder import LiteRTEncoder
    from keras_tfm.export.litert_runner import LiteRTGenerator, interpreter_class, read_metadata

    try:
        interpreter_class()
    except ImportError as error:
        raise usage.UsageError("--model", str(error)) from None
    metadata = read_metadata(args.model)
    if args.version is not None:
        raise usage.UsageError("--version", "a .tflite file has no versions")
    signature = LITERT_SIGNATURES.get(metadata["kind"])
    if signature is None:
        raise usage.UsageError("--model", f"a {metadata['kind']} LiteRT export has no text output to print")
    _refuse_unused(signature, args)
    if args.num_beams not in (None, 1):
        raise usage.UsageError("--num-beams", "a LiteRT export decodes greedily or by sampling (1 beam)")
    if args.completion_only and (signature != "generate" or args.json):
        raise usage.UsageError(
            "--completion-only", "only for a GPT's text (and --json prints it alone already)"
        )
    if args.max_new_tokens == 0:
        raise usage.UsageError(
            "--max-new-tokens", "must be at least 1; received 0 (nothing would be generated)"
        )
    info = {"max_length": metadata["max_length"], "sliding_window": metadata["kind"] == "causal_lm"}
    max_new_tokens = args.max_new_tokens or default_max_new_tokens(info, args.prompt)
    if signature == "classify":
        probabilities = LiteRTEncoder(args.model).predict(list(args.prompt))
        names = metadata.get("label_names") or [f"LABEL_{i}" for i in range(max(probabilities.shape[-1], 2))]
        index = (
            (probabilities[:, 0] >= 0.5).astype(int)
            if probabilities.shape[-1] == 1
            else probabilities.argmax(-1)
        )
        out = {"probabilities": probabilities, "labels": [names[i] for i in index]}
    elif signature == "translate":
        out = {
            "translations": LiteRTGenerator(args.model).translate(
                list(args.prompt),
                max_new_tokens=max_new_tokens,
                length_penalty=REQUEST_DEFAULTS["length_penalty"]
                if args.length_penalty is None
                else args.length_penalty,
            )
        }
    else:
        sampling = {
            n: REQUEST_DEFAULTS[n] if getattr(args, n) is None else getattr(args, n) for n in SAMPLING
        }
        completions = LiteRTGenerator(args.model).generate(
            list(args.prompt), max_new_tokens, sampler="sample", completion_only=True, **sampling
        )
        out = {"completions": completions}
    return _print(signature, args, out)


def _print(signature, args, out):
    if args.json:
        print(
            json.dumps({k: getattr(v, "tolist", lambda v=v: v)() for k, v in out.items()}, ensure_ascii=False)
        )
    else:
        for text in output_texts(signature, args.prompt, out, args.completion_only):
            print(text)
    return 0


def _run_checkpoint(args):
    """`--model CHECKPOINT_FOLDER`: the request an export of it would answer, in process
    (`checkpoint_text`); the checkpoint's own length penalty unless `--length-penalty`."""
    signature = checkpoint_text.checkpoint_signature(args.model, args.num_beams)
    if args.version is not None:
        raise usage.UsageError("--version", "a checkpoint folder has no versions")
    _refuse_unused(signature, args)
    if args.completion_only and (signature == "translate" or args.json):
        raise usage.UsageError(
            "--completion-only", "only for a decoder's text (and --json prints it alone already)"
        )
    if args.max_new_tokens == 0:
        raise usage.UsageError(
            "--max-new-tokens", "must be at least 1; received 0 (nothing would be generated)"
        )
    model = checkpoint_text.load_checkpoint(args.model)
    limit = model.max_length - 1 if signature == "translate" and model.max_length else DEFAULT_MAX_NEW_TOKENS
    request = {
        "max_new_tokens": args.max_new_tokens or min(DEFAULT_MAX_NEW_TOKENS, limit),
        "num_beams": args.num_beams or 1,
        "length_penalty": args.length_penalty,
        "sampling": {n: getattr(args, n) for n in SAMPLING if getattr(args, n) is not None},
    }
    out = checkpoint_text.checkpoint_outputs(model, signature, list(args.prompt), request)
    return _print(signature, args, out)


def _run_generate(args):
    from keras_tfm.export.client import call_signature, load_served, resolve_version_dir

    if str(args.model).endswith(".tflite"):
        return _run_litert(args)
    if checkpoint_text.is_checkpoint_dir(args.model):
        return _run_checkpoint(args)

    directory = resolve_version_dir(args.model, args.version)
    if not args.trust_saved_model:
        from keras_tfm.export.trusted_ops import UntrustedSavedModelError, check_saved_model_ops

        try:
            check_saved_model_ops(directory)  # reads saved_model.pb; runs nothing
        except UntrustedSavedModelError as error:
            raise usage.UsageError("--model", str(error)) from None
    loaded = load_served(directory)
    signature = _choose_signature(set(loaded.signatures), args)
    _refuse_unused(signature, args)
    if args.completion_only and (signature not in CONTINUING or args.json):
        raise usage.UsageError(
            "--completion-only",
            "--json prints the completions alone already"
            if args.json
            else f"the export's {signature!r} signature prints its output alone already (no prompt)",
        )
    if args.max_new_tokens == 0:  # a negative count is refused by the signature itself
        raise usage.UsageError(
            "--max-new-tokens", "must be at least 1; received 0 (nothing would be generated)"
        )
    request = {
        name: REQUEST_DEFAULTS[name] if value is None else value
        for name, value in ((name, getattr(args, name)) for name in REQUEST_DEFAULTS)
    }
    max_new_tokens = request["max_new_tokens"]
    if max_new_tokens is None:
        max_new_tokens = default_max_new_tokens(export_info(directory), args.prompt)
    prompts = [s.encode("utf-8") for s in args.prompt]
    beam = dict(
        max_new_tokens=max_new_tokens,
        num_beams=request["num_beams"],
        length_penalty=request["length_penalty"],
    )
    if signature == "beam_search":
        out = call_signature(loaded, "beam_search", prompts=prompts, **beam)
    elif signature == "generate":
        sampling = {name: request[name] for name in SAMPLING}
        out = call_signature(loaded, "generate", prompts=prompts, max_new_tokens=max_new_tokens, **sampling)
    elif signature == "translate":
        out = call_signature(loaded, "translate", inputs=prompts, **beam)
    elif signature == "classify":
        out = call_signature(loaded, "classify", inputs=prompts)
    else:
        out = call_signature(loaded, "fill_mask", inputs=prompts)
    if args.json:
        print(json.dumps({k: v.tolist() for k, v in out.items()}, ensure_ascii=False))
    else:
        for text in output_texts(signature, args.prompt, out, args.completion_only):
            print(text)
    return 0


def register(subparsers):
    """`keras-tfm generate`."""
    p = subparsers.add_parser(
        "generate",
        help="run an exported SavedModel (generate / translate / classify / fill_mask), a LiteRT .tflite file "
        "or a checkpoint folder",
    )
    p.add_argument(
        "--model",
        required=True,
        help="saved_models/NAME (latest version), a version folder, a LiteRT export NAME.tflite, or a "
        "HuggingFace-layout checkpoint folder (T5, BART, Marian: translate; GPT-2, Llama, Mistral, Qwen2: "
        "generate), run in process",
    )
    p.add_argument("--version", type=positive_int, default=None, help="version number (default: the latest)")
    p.add_argument("--prompt", action="append", required=True, help="input text (repeat for a batch)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="tokens to generate (default: 64, or fewer when the export's limits or a GPT's context "
        "after the prompt leave less room)",
    )
    sampling = "; generate signature only (GPT)"
    p.add_argument("--temperature", type=float, default=None, help="0 = greedy (default)" + sampling)
    p.add_argument("--top-k", type=int, default=None, help="0 = all (default)" + sampling)
    p.add_argument("--top-p", type=float, default=None, help="default: 1.0" + sampling)
    p.add_argument(
        "--seed", type=seed, default=None, help="sampling seed, 0 to 2**31 - 1 (default: 0)" + sampling
    )
    p.add_argument(
        "--num-beams",
        type=int,
        default=None,
        help="beam width (default: 1 = greedy; GPT: above 1 runs the beam_search signature, which takes no "
        "sampling flag; seq2seq: translate). A flag the export's signature cannot use is refused",
    )
    p.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help="beam search: GNMT alpha (default: 0.6; a checkpoint folder: its own, HuggingFace's len^alpha)",
    )
    p.add_argument(
        "--completion-only",
        action="store_true",
        help="GPT: print the completion alone (default: the prompt followed by its completion)",
    )
    p.add_argument("--json", action="store_true", help="print all outputs as JSON")
    p.add_argument(
        "--trust-saved-model",
        action="store_true",
        help="run a SavedModel whose graph holds ops keras_tfm's exports never emit (refused by default: a "
        "SavedModel is a program that can read and write files)",
    )
    return usage.set_handler(p, run_generate)
