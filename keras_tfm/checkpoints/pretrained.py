"""Published checkpoints: `from_pretrained`, `save_pretrained`, `sentence_encoder`.

A checkpoint is a local directory in HuggingFace's layout (or `"hf://org/name"`, a Hugging
Face Hub repository resolved to its folder in the hub cache: `keras_tfm.checkpoints.hub`):

    config.json                       `model_type` picks the family and its sizes
    model.safetensors                 weights (or model-0000i-of-0000n.safetensors
                                      + model.safetensors.index.json)
    vocab.txt | vocab.json+merges.txt the tokenizer (see `pretrained_tokenizer`)
    modules.json, 1_Pooling/config.json   sentence-transformers pooling (optional)

Families: "bert" → `bert_encoder` (+ heads), "gpt2" and "llama" → `gpt`; the
weight mappings are in `keras_tfm.checkpoints.bert`, `.gpt2` and `.llama`
(on `weight_mapping`), the file reading and writing in
`keras_tfm.checkpoints.files`. Only `"hf://"` names are downloaded (`hub`).
"""

import json
import os
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras

    from keras_tfm.models.sentence_encoder import SentenceEncoder
    from keras_tfm.tokenizers.base import Tokenizer

from keras_tfm.checkpoints import bert as bert_checkpoint
from keras_tfm.checkpoints import gpt2 as gpt2_checkpoint
from keras_tfm.checkpoints import hub
from keras_tfm.checkpoints import llama as llama_checkpoint
from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.files import (
    CONFIG_FILE,
    CheckpointError,
    ConfigReader,
    MissingCheckpointFile,
    checkpoint_directory,
    read_json,
    read_weights,
    write_json,
    write_weights,
)
from keras_tfm.checks import check_allocation

FAMILIES = {family.MODEL_TYPE: family for family in (bert_checkpoint, gpt2_checkpoint, llama_checkpoint)}
#: Decoder-only families: built with `gpt`, task "causal_lm".
DECODERS = (gpt2_checkpoint, llama_checkpoint)

#: Options of the task heads (the other keyword arguments go to the builder).
HEAD_OPTIONS = {
    "classifier": ("num_classes", "pooling", "classifier_dropout"),
    "token_classifier": ("num_classes", "classifier_dropout"),
    "sentence_embedding": ("pooling", "normalize"),
    "masked_lm": (),
    "causal_lm": (),
    None: (),
}

#: The families whose tokenizer `pretrained_tokenizer` implements (WordPiece, byte-level BPE).
TOKENIZER_FAMILIES = (bert_checkpoint, gpt2_checkpoint)
#: Files of which one marks a checkpoint with a tokenizer.
TOKENIZER_MARKERS = ("vocab.txt", "vocab.json", "tokenizer.json")

MODULES_FILE = "modules.json"
POOLING_CONFIG = "1_Pooling/config.json"
#: sentence-transformers `1_Pooling/config.json` flags → SentenceEncoder pooling.
POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


def checkpoint_family(config, config_path):
    """The family module (`bert`, `gpt2`, `llama`) of a checkpoint's config.json contents."""
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise CheckpointError(
            f"{config_path}: field 'model_type' = {model_type!r} is not supported; supported model types: "
            f"{sorted(FAMILIES)}."
        )
    return FAMILIES[model_type]


def _task(family, task, config):
    if task == "encoder" and family is bert_checkpoint:
        return None  # the bare encoder, whatever head the checkpoint remembers
    if task is None:
        task = (config.get("keras_tfm") or {}).get("task")
    if task is None and family in DECODERS:
        task = "causal_lm"
    if task is not None and task not in family.TASKS:
        raise ValueError(
            f"Unknown `task` {task!r} for a {family.MODEL_TYPE!r} checkpoint; expected None or one of "
            f"{list(family.TASKS) + (['encoder'] if family is bert_checkpoint else [])}."
        )
    return task


def _pooling_options(directory):
    """SentenceEncoder (pooling, normalize) from modules.json and 1_Pooling/config.json."""
    modules = None
    path = os.path.join(directory, MODULES_FILE)
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                modules = json.load(f)
        except (OSError, ValueError) as error:
            raise CheckpointError(f"{path}: not a readable JSON file ({error}).") from None
        if not isinstance(modules, list):
            raise CheckpointError(f"{path}: expected a JSON list of modules.")
    types = [str(m.get("type", "")) for m in modules or [] if isinstance(m, dict)]
    declared = next(
        (m.get("path") for m in modules or [] if isinstance(m, dict) and "Pooling" in str(m.get("type", ""))),
        None,
    )
    if declared is not None and (
        not isinstance(declared, str)
        or not declared
        or not os.path.isfile(os.path.join(directory, declared, "config.json"))
    ):
        raise CheckpointError(
            f"{path}: the Pooling module's path {declared!r} has no config.json ("
            f"{os.path.join(directory, str(declared), 'config.json')} does not exist); expected the folder "
            "of the pooling config, e.g. '1_Pooling'."
        )
    pooling_dir = declared or os.path.dirname(POOLING_CONFIG)
    normalize = True if modules is None else any(t.endswith("Normalize") for t in types)
    config = read_json(directory, os.path.join(pooling_dir, "config.json"), required=False)
    if config is None:
        return "mean", normalize
    config_path = os.path.join(directory, pooling_dir, "config.json")
    modes = [mode for flag, mode in POOLING_MODES.items() if config.get(flag)]
    unsupported = [
        k for k, v in config.items() if k.startswith("pooling_mode_") and v and k not in POOLING_MODES
    ]
    if unsupported or len(modes) != 1:
        raise CheckpointError(
            f"{config_path}: exactly one of {sorted(POOLING_MODES)} must be true; found "
            f"{[k for k, v in config.items() if k.startswith('pooling_mode_') and v]}."
        )
    return modes[0], normalize


def _num_classes(head, config, config_path):
    if head.get("num_classes") is not None:
        return head["num_classes"]
    labels = config.get("id2label") or {}
    if isinstance(labels, dict) and labels:
        return _at_least_two(len(labels), config_path, "id2label")
    if isinstance(config.get("num_labels"), int):
        return _at_least_two(config["num_labels"], config_path, "num_labels")
    raise ValueError(
        f"`num_classes` is required for this task ({config_path} has no 'id2label' / 'num_labels')."
    )


def _check_embedding_size(config, config_path, options):
    """Refuses, before anything is allocated or read, a config whose token embedding or learned
    position table alone would not fit in memory (naming the file and field)."""
    vocabulary_size, d_model = options.get("vocabulary_size"), options.get("d_model")
    if isinstance(vocabulary_size, int) and isinstance(d_model, int):
        check_allocation(
            f"{config_path}: field 'vocab_size' = {config.get('vocab_size')!r} (the {vocabulary_size} × "
            f"{d_model} token embedding)",
            vocabulary_size * d_model * 4,
        )
    max_length = options.get("max_length")
    if isinstance(max_length, int) and isinstance(d_model, int) and options.get("position") != "rope":
        field = next((f for f in ("n_positions", "max_position_embeddings") if f in config), "max_length")
        check_allocation(
            f"{config_path}: field {field!r} = {config.get(field)!r} (the {max_length} × {d_model} position "
            "embedding)",
            max_length * d_model * 4,
        )


def _at_least_two(num_classes, config_path, field):
    if num_classes < 2:
        raise ValueError(
            f"{config_path}: field {field!r} gives {num_classes} label(s); a classifier needs "
            "`num_classes` >= 2 (a softmax over one class is always 1); pass num_classes=2 for a "
            "binary task."
        )
    return num_classes


def _build(family, task, options, head, directory, config, config_path):
    from keras_tfm.models import bert_classifier, bert_encoder, bert_masked_lm, bert_token_classifier, gpt
    from keras_tfm.models.sentence_encoder import SentenceEncoder

    if family in DECODERS:
        return gpt(**options)
    encoder = bert_encoder(**options)
    saved = config.get("keras_tfm") or {}
    if task is None:
        return encoder
    if task == "masked_lm":
        return bert_masked_lm(encoder)
    if task == "classifier":
        return bert_classifier(
            encoder,
            _num_classes(head, config, config_path),
            pooling=head.get("pooling") or saved.get("pooling", "cls"),
            dropout=head.get("classifier_dropout"),
        )
    if task == "token_classifier":
        return bert_token_classifier(
            encoder, _num_classes(head, config, config_path), dropout=head.get("classifier_dropout")
        )
    pooling, normalize = _pooling_options(directory)
    return SentenceEncoder(
        encoder,
        pooling=head.get("pooling") or pooling,
        normalize=normalize if head.get("normalize") is None else head["normalize"],
    )


def _normalise_names(tensors, sources):
    """Old BERT checkpoints name LayerNorm parameters gamma/beta."""
    renamed = {}
    for name in list(tensors):
        if "LayerNorm." in name and name.endswith((".gamma", ".beta")):
            new = name[: name.rfind(".")] + (".weight" if name.endswith(".gamma") else ".bias")
            renamed[name] = new
    for old, new in renamed.items():
        tensors[new], sources[new] = tensors.pop(old), sources.pop(old)
    return tensors, sources


def from_pretrained(path: str | os.PathLike, task: str | None = None, **overrides) -> "keras.Model":
    """Builds a keras_tfm model from a HuggingFace-layout checkpoint, with its tokenizer.

    `config.json` picks the builder (`model_type` "bert" → `bert_encoder`,
    "gpt2" or "llama" → `gpt`) and its sizes; the weights come from `model.safetensors`
    (or the shards of `model.safetensors.index.json`), read with the
    safetensors NumPy API. Every weight is checked before any is assigned,
    so a failure never returns a half-loaded model. A BERT or GPT-2
    checkpoint's tokenizer (`pretrained_tokenizer`) is attached as
    `model.tokenizer` when the directory has its files (Llama's SentencePiece
    tokenizer is not implemented: set `model.tokenizer` yourself).

    Args:
        path: the checkpoint directory, or `"hf://org/name"`: a Hugging Face
            Hub repository, downloaded into the hub cache when online, read
            from it when offline (`keras_tfm.checkpoints.hub`).
        task: the head to build. BERT: None (the encoder: `sequence_output`,
            `pooled_output`), "masked_lm", "classifier", "token_classifier",
            "sentence_embedding" (see `sentence_encoder`), "encoder" (the
            encoder even when the checkpoint remembers a head). GPT-2 and
            Llama: None or "causal_lm" (the language model). A checkpoint
            written by `save_pretrained` remembers its task.
        **overrides: builder options replacing the config's (e.g.
            `dropout=0.0`, `dtype="mixed_bfloat16"`, `attention_impl=...`),
            and the head options: `num_classes` (default: the config's
            `id2label`), `pooling` ("cls" | "mean" | "max"),
            `classifier_dropout`, `normalize` (sentence embeddings).

    Returns:
        A keras_tfm model: `BertEncoder`, `BertMaskedLM`, `BertClassifier`,
        `BertTokenClassifier`, `SentenceEncoder` or `GPT`.

    Warns:
        UserWarning listing the head weights the checkpoint lacks (they keep
        their initial values: train them) and the checkpoint weights left
        unused (e.g. BERT's next-sentence head); naming the tokenizer files
        when they cannot be read or do not fit the model (no tokenizer is
        attached then).

    Raises:
        ValueError: a missing or unreadable file, an unsupported `model_type`
            or task, a config field of the wrong type, a missing weight, or a
            weight whose shape disagrees with the config (naming the weight,
            both shapes and the config field to check); a hub repository
            neither cached nor downloadable.
        ImportError: an `"hf://"` name without `huggingface_hub`.
    """
    directory = hub.checkpoint_path(path)
    config = read_json(directory, CONFIG_FILE)
    config_path = os.path.join(directory, CONFIG_FILE)
    family = checkpoint_family(config, config_path)
    task = _task(family, task, config)
    head = {k: overrides.pop(k) for k in HEAD_OPTIONS.get(task, ()) if k in overrides}
    options = family.builder_options(config, ConfigReader(config, config_path))
    options.update(overrides)
    _check_embedding_size(config, config_path, options)
    tensors, sources = read_weights(directory)
    tensors, sources = _normalise_names(tensors, sources)
    sources = {n: os.path.join(directory, f) for n, f in sources.items()}

    model = _build(family, task, options, head, directory, config, config_path)
    prefix = wm.state_dict_prefix(tensors, family.STATE_DICT_PREFIX)
    entries = family.entries(model, prefix)
    pairs, missing = wm.collect(entries, tensors, sources, config, config_path)
    mapped = {e.name for e in entries}
    # Encoder parts a head does not use (BERT's pooler under a masked LM or mean pooling) are not reported.
    unneeded = family.unneeded(model, prefix)
    missing = [n for n in missing if not n.startswith(unneeded)]
    unused = sorted(
        n
        for n in tensors
        if n not in mapped
        and not n.endswith(family.IGNORED_SUFFIXES)
        and n not in family.TIED
        and not n.startswith(unneeded)
    )
    wm.assign(pairs)
    if missing:
        warnings.warn(
            f"from_pretrained({directory!r}): {len(missing)} weight(s) of the {task or 'encoder'} model are not "
            f"in the checkpoint and keep their initial values (train them before use): {missing}.",
            stacklevel=2,
        )
    if unused:
        warnings.warn(
            f"from_pretrained({directory!r}): {len(unused)} checkpoint weight(s) were not used: {unused}.",
            stacklevel=2,
        )
    if family in TOKENIZER_FAMILIES:
        _attach_tokenizer(model, directory)
    return model


def _attach_tokenizer(model, directory):
    """`model.tokenizer = pretrained_tokenizer(directory)` when the directory has tokenizer files;
    a tokenizer that cannot be read or does not fit the model is a warning (the model is intact)."""
    if not any(os.path.isfile(os.path.join(directory, name)) for name in TOKENIZER_MARKERS):
        return
    try:
        model.tokenizer = pretrained_tokenizer(directory)
    except (ValueError, TypeError, OSError) as error:
        warnings.warn(
            f"from_pretrained({directory!r}): the checkpoint's tokenizer was not attached ({error}); set "
            "`model.tokenizer` yourself to use the text methods.",
            stacklevel=3,
        )


def sentence_encoder(path: str | os.PathLike, **overrides) -> "SentenceEncoder":
    """`from_pretrained(path, task="sentence_embedding")`: a `SentenceEncoder`
    whose pooling ("mean", "cls", "max") follows the checkpoint's
    `1_Pooling/config.json` and whose L2 normalisation follows `modules.json`
    (mean pooling and normalisation when they are absent)."""
    return from_pretrained(path, task="sentence_embedding", **overrides)


def _identify(model):
    """(family module, task) of a keras_tfm model."""
    from keras_tfm.models import GPT, BertClassifier, BertEncoder, BertMaskedLM, BertTokenClassifier
    from keras_tfm.models.sentence_encoder import SentenceEncoder

    tasks = (
        (GPT, gpt2_checkpoint, "causal_lm"),
        (BertEncoder, bert_checkpoint, None),
        (BertMaskedLM, bert_checkpoint, "masked_lm"),
        (BertClassifier, bert_checkpoint, "classifier"),
        (BertTokenClassifier, bert_checkpoint, "token_classifier"),
        (SentenceEncoder, bert_checkpoint, "sentence_embedding"),
    )
    for cls, family, task in tasks:
        if isinstance(model, cls):
            if family is gpt2_checkpoint and llama_checkpoint.is_llama_layout(model):
                family = llama_checkpoint
            return family, task
    raise TypeError(
        f"save_pretrained writes GPT, BERT (encoder, masked LM, classifiers) and SentenceEncoder models; "
        f"received {type(model).__name__}."
    )


def _refuse_quantized(model):
    """A ValueError naming the quantized layers: a checkpoint holds float weights only (integer
    codes written without their scales would load as garbage)."""
    quantized = model.quantized_layers()
    if quantized:
        modes = sorted(set(quantized.values()))
        raise ValueError(
            f"This model is quantized ({', '.join(repr(m) for m in modes)}: {len(quantized)} layers, e.g. "
            f"{next(iter(quantized))!r}); save_pretrained writes float weights only. Call "
            "save_pretrained before `quantize()` (and quantize the model from_pretrained returns), or "
            "save the quantized model with `model.save(path.keras)`."
        )


def _saved_options(model, task):
    options = {"task": task}
    if task == "classifier":
        options["pooling"] = model.pooling
    return options


#: tokenizer_config.json `tokenizer_class` → kind ("bpe" | "wordpiece").
TOKENIZER_CLASSES = {
    "GPT2Tokenizer": "bpe",
    "GPT2TokenizerFast": "bpe",
    "BertTokenizer": "wordpiece",
    "BertTokenizerFast": "wordpiece",
}
TOKENIZER_FILES = {"bpe": "vocab.json + merges.txt", "wordpiece": "vocab.txt"}


def _tokenizer_json_kind(directory):
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8-sig") as f:
            model = (json.load(f) or {}).get("model") or {}
    except (OSError, ValueError, AttributeError, RecursionError):
        return None  # the reader chosen below names the problem
    return {"BPE": "bpe", "WordPiece": "wordpiece"}.get(model.get("type"))


def _tokenizer_kind(directory, config):
    """("bpe" | "wordpiece") from what the files declare, else from which files are complete."""
    present = lambda name: os.path.isfile(os.path.join(directory, name))  # noqa: E731
    json_kind = _tokenizer_json_kind(directory)
    complete = {
        "bpe": (present("vocab.json") and present("merges.txt")) or json_kind == "bpe",
        "wordpiece": present("vocab.txt") or json_kind == "wordpiece",
    }
    found = [
        n
        for n in ("vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
        if present(n)
    ]
    tokenizer_config = read_json(directory, "tokenizer_config.json", required=False) or {}
    declared, source = None, None
    if tokenizer_config.get("tokenizer_class") in TOKENIZER_CLASSES:
        declared = TOKENIZER_CLASSES[tokenizer_config["tokenizer_class"]]
        source = f"tokenizer_config.json's tokenizer_class {tokenizer_config['tokenizer_class']!r}"
    elif config.get("model_type") in (gpt2_checkpoint.MODEL_TYPE, bert_checkpoint.MODEL_TYPE):
        declared = "bpe" if config["model_type"] == gpt2_checkpoint.MODEL_TYPE else "wordpiece"
        source = f"config.json's model_type {config['model_type']!r}"
    if declared is not None:
        if not complete[declared]:
            raise MissingCheckpointFile(
                f"{directory}: {source} needs {TOKENIZER_FILES[declared]} (or a tokenizer.json); found "
                f"{found or 'no tokenizer files'}."
            )
        return declared
    kinds = [kind for kind, ok in complete.items() if ok]
    if not kinds:
        raise MissingCheckpointFile(
            f"{directory}: no complete tokenizer: expected vocab.txt (WordPiece), vocab.json + merges.txt "
            f"(byte-level BPE) or tokenizer.json; found {found or 'no tokenizer files'}."
        )
    return kinds[0]


def pretrained_tokenizer(path: str | os.PathLike, **kwargs) -> "Tokenizer":
    """The tokenizer of a checkpoint directory.

    The kind is what `tokenizer_config.json`'s `tokenizer_class` or
    `config.json`'s `model_type` ("gpt2", "bert") declares, else the one whose
    files are complete: byte-level BPE from `vocab.json` + `merges.txt`
    (`BytePairTokenizer.from_pretrained`), BERT WordPiece from `vocab.txt` /
    `tokenizer.json` (`WordPieceTokenizer.from_pretrained`). A declared kind
    whose files are missing is a FileNotFoundError listing the files found.
    `path` may be `"hf://org/name"` (see `from_pretrained`). `kwargs` override
    what the files say (e.g. `sequence_length=128`).
    """
    from keras_tfm.tokenizers import BytePairTokenizer, WordPieceTokenizer

    directory = hub.checkpoint_path(path)
    config = read_json(directory, CONFIG_FILE, required=False) or {}
    if _tokenizer_kind(directory, config) == "bpe":
        return BytePairTokenizer.from_pretrained(directory, **kwargs)
    return WordPieceTokenizer.from_pretrained(directory, **kwargs)


def save_tokenizer(tokenizer: "Tokenizer", directory: str | os.PathLike) -> None:
    """Writes a tokenizer's files in the checkpoint layout: `vocab.json` +
    `merges.txt` for a byte-level BPE, else `vocab.txt` (+ `tokenizer_config.json`
    with the special tokens and lower-casing of a WordPiece tokenizer), into
    an existing `directory` (the temporary directory of `save_pretrained`)."""
    vocabulary = list(tokenizer.get_vocabulary())
    merges = tokenizer.get_config().get("merges")
    if merges is not None:
        with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump({token: i for i, token in enumerate(vocabulary)}, f, ensure_ascii=False)
        with open(os.path.join(directory, "merges.txt"), "w", encoding="utf-8") as f:
            f.write(
                "#version: 0.2\n" + "".join(f"{m if isinstance(m, str) else ' '.join(m)}\n" for m in merges)
            )
        return
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{token}\n" for token in vocabulary))
    options = {"tokenizer_class": "BertTokenizer"}
    if hasattr(tokenizer, "lowercase"):
        options["do_lower_case"] = bool(tokenizer.lowercase)
    for role in ("unk", "pad", "cls", "sep", "mask"):
        token_id = getattr(tokenizer, f"{role}_id", None)
        if token_id is not None:
            options[f"{role}_token"] = vocabulary[token_id]
    write_json(directory, "tokenizer_config.json", options)


def _layout_tokenizer(tokenizer):
    """`tokenizer` if the checkpoint layout holds its kind (WordPiece, byte-level BPE), else None."""
    from keras_tfm.tokenizers import BytePairTokenizer, WordPieceTokenizer

    return tokenizer if isinstance(tokenizer, (BytePairTokenizer, WordPieceTokenizer)) else None


def save_pretrained(
    model: "keras.Model",
    path: str | os.PathLike,
    tokenizer: "Tokenizer | None" = None,
    overwrite: bool = False,
    max_shard_size: int | str | None = None,
) -> str:
    """Writes `model` as a HuggingFace-layout checkpoint directory, atomically.

    `config.json` (the family's fields, plus a "keras_tfm" entry with the task),
    `model.safetensors` (or shards + index when larger than `max_shard_size`),
    the tokenizer's vocabulary files, and for a `SentenceEncoder`
    `modules.json` + `1_Pooling/config.json`. Everything is written into a
    temporary directory beside `path` and renamed into place, so `path` is
    never half-written. `from_pretrained(path)` rebuilds the same model.

    Args:
        model: a keras_tfm GPT, BERT encoder, BERT head model or
            `SentenceEncoder` (with GPT-2 / BERT options: learned positions,
            biases, GPT-2 pre-norm, BERT post-norm).
        path: the directory to write.
        tokenizer: the tokenizer whose vocabulary is saved alongside; None:
            `model.tokenizer` when it is a WordPiece or byte-level BPE
            tokenizer (the kinds the layout holds), else none.
        overwrite: replace an existing non-empty `path` (else ValueError).
        max_shard_size: e.g. "2GB"; None writes one file.

    Returns:
        `path`.

    Raises:
        ValueError: a quantized model (save it before `quantize()`, or as
            `.keras`), or options the family's layout lacks.
    """
    family, task = _identify(model)
    _refuse_quantized(model)
    if tokenizer is None:
        tokenizer = _layout_tokenizer(model.tokenizer)
    config = family.hf_config(model, task)
    config["keras_tfm"] = _saved_options(model, task)
    config["torch_dtype"] = "float32"
    tensors = wm.to_tensors(family.save_entries(model, task))
    with checkpoint_directory(path, overwrite=overwrite) as temp:
        write_json(temp, CONFIG_FILE, config)
        write_weights(temp, tensors, max_shard_size=max_shard_size)
        if task == "sentence_embedding":
            modules = [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
            if model.normalize:
                modules.append(
                    {
                        "idx": 2,
                        "name": "2",
                        "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize",
                    }
                )
            with open(os.path.join(temp, MODULES_FILE), "w", encoding="utf-8") as f:
                json.dump(modules, f, indent=2)
            pooling = {flag: mode == model.pooling for flag, mode in POOLING_MODES.items()}
            pooling.update(word_embedding_dimension=int(model.output.shape[-1]))
            pooling["pooling_mode_mean_sqrt_len_tokens"] = False
            write_json(temp, POOLING_CONFIG, pooling)
        if tokenizer is not None:
            save_tokenizer(tokenizer, temp)
    return os.fspath(path)
