"""Reading a HuggingFace-layout checkpoint: `Checkpoint(path)`.

A checkpoint is a local directory in HuggingFace's layout (or `"hf://org/name"`, a Hugging
Face Hub repository resolved to its folder in the hub cache: `keras_tfm.checkpoints.hub`):

    config.json                       `model_type` picks the family and its sizes
    generation_config.json            seq2seq families: special ids, forced tokens (optional)
    model.safetensors                 weights (or model-0000i-of-0000n.safetensors
                                      + model.safetensors.index.json)
    vocab.txt | vocab.json+merges.txt | tokenizer.json | spiece.model | source.spm+target.spm
                                      the tokenizer (`tokenizer_files`)
    modules.json, 1_Pooling/config.json   sentence-transformers pooling (optional)

`Checkpoint` reads the config and knows the family (`bert`, `gpt2`, `llama`, and the
seq2seq `t5`, `bart`, `marian`: the weight mappings, on `weight_mapping`); it gives the
model classes their constructor options
(`builder_options`, `head_options`) and fills a built model's weights (`load_weights`: every
weight is checked before any is assigned, so a failure never leaves a half-loaded model).
It imports no model class: `TransformerModel.from_preset` builds the model and calls it.
"""

import json
import math
import os
import warnings

from keras_tfm.checkpoints import bart as bart_checkpoint
from keras_tfm.checkpoints import bert as bert_checkpoint
from keras_tfm.checkpoints import gpt2 as gpt2_checkpoint
from keras_tfm.checkpoints import hub
from keras_tfm.checkpoints import llama as llama_checkpoint
from keras_tfm.checkpoints import marian as marian_checkpoint
from keras_tfm.checkpoints import mistral as mistral_checkpoint
from keras_tfm.checkpoints import qwen2 as qwen2_checkpoint
from keras_tfm.checkpoints import t5 as t5_checkpoint
from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.files import CONFIG_FILE, CheckpointError, ConfigReader, read_json, read_weights
from keras_tfm.checkpoints.tokenizer_files import (
    SEQ2SEQ_TOKENIZER_KINDS,
    TOKENIZER_MARKERS,
    TokenizerNotImplemented,
    check_vocabulary_size,
    pretrained_tokenizer,
    seq2seq_tokenizer,
)
from keras_tfm.resources import check_allocation

#: Encoder–decoder families: built as `Seq2Seq`, task "seq2seq_lm".
SEQ2SEQ_FAMILIES = (t5_checkpoint, bart_checkpoint, marian_checkpoint)
#: Decoder-only families: built with `gpt`, task "causal_lm".
DECODERS = (gpt2_checkpoint, llama_checkpoint, mistral_checkpoint, qwen2_checkpoint)
FAMILIES = {family.MODEL_TYPE: family for family in (bert_checkpoint, *DECODERS, *SEQ2SEQ_FAMILIES)}

#: The task of a BERT checkpoint's bare encoder (whatever head the checkpoint remembers).
ENCODER_TASK = "encoder"

GENERATION_CONFIG = "generation_config.json"
#: HuggingFace `generate`'s beam-search defaults (GenerationConfig).
HF_BEAM_DEFAULTS = {"length_penalty_style": "hf", "length_penalty": 1.0, "early_stopping": False}

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


def family_tasks(family) -> tuple:
    """The tasks a checkpoint family builds (`ENCODER_TASK`: BERT's bare encoder)."""
    return family.TASKS + ((ENCODER_TASK,) if family is bert_checkpoint else ())


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


def _num_classes(config, config_path):
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


class Checkpoint:
    """A checkpoint directory, read: its config, family, weights and tokenizer.

    Args:
        path: a checkpoint directory or `"hf://org/name"` (`hub.checkpoint_path`).

    Attributes:
        directory: the local directory.
        config: the contents of config.json; `config_path` its path.
        family: the family module (`bert`, `gpt2`, `llama`, `t5`, `bart`, `marian`) of its
            `model_type`.

    Raises:
        ValueError: a missing or unreadable config.json, an unsupported `model_type`; a hub
            repository neither cached nor downloadable.
        ImportError: an `"hf://"` name without `huggingface_hub`.
    """

    def __init__(self, path: str | os.PathLike):
        self.directory = hub.checkpoint_path(path)
        self.config = read_json(self.directory, CONFIG_FILE)
        self.config_path = os.path.join(self.directory, CONFIG_FILE)
        self.family = checkpoint_family(self.config, self.config_path)

    def task(self, task: str | None = None) -> str:
        """`task` checked against the family's, or the one the checkpoint remembers
        (`save_pretrained`'s "keras_tfm" entry), or the family's default ("causal_lm" for a
        decoder, `ENCODER_TASK` for BERT)."""
        tasks = family_tasks(self.family)
        if task is None:
            task = (self.config.get("keras_tfm") or {}).get("task")
        if task is None:
            task = getattr(self.family, "DEFAULT_TASK", None)
        if task is None:
            task = "causal_lm" if self.family in DECODERS else ENCODER_TASK
        if task not in tasks:
            raise ValueError(
                f"Unknown `task` {task!r} for a {self.family.MODEL_TYPE!r} checkpoint; expected None or one "
                f"of {list(tasks)}."
            )
        return task

    def builder_options(self, overrides: dict | None = None) -> dict:
        """The model constructor's options from config.json, with `overrides` over them; a token
        embedding too large for this machine is refused before anything is allocated."""
        read = ConfigReader(self.config, self.config_path)
        options = self.family.builder_options(self.config, read)
        if hasattr(self.family, "checkpoint_options"):  # files beside config.json (special ids, ...)
            options.update(self.family.checkpoint_options(self.config, read, self.directory))
        options.update(overrides or {})
        _check_embedding_size(self.config, self.config_path, options)
        return options

    def generation_defaults(self) -> dict | None:
        """How a decoder of this checkpoint generates by default (a model's `generation_defaults`,
        read by `keras_tfm.generation` and the exporters), as HuggingFace `generate` does:
        `length_penalty_style` "hf" (HuggingFace's beam search), `length_penalty` and
        `early_stopping` from `generation_config.json` (else HuggingFace's 1.0 and False), and
        `eos_id`, its `eos_token_id` (else config.json's; the first of a list; None when neither
        names one). None for an encoder (BERT)."""
        if self.family not in DECODERS + SEQ2SEQ_FAMILIES:
            return None
        path = os.path.join(self.directory, GENERATION_CONFIG)
        read = ConfigReader(read_json(self.directory, GENERATION_CONFIG, required=False) or {}, path)
        alpha = read.get("length_penalty", 1.0)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
            raise read.error("length_penalty", "expected a finite number")
        early = read.get("early_stopping", False)
        if not isinstance(early, bool) and early != "never":
            raise read.error("early_stopping", 'expected true, false or "never"')
        eos, source = read.get("eos_token_id"), read
        if eos is None:
            eos, source = self.config.get("eos_token_id"), ConfigReader(self.config, self.config_path)
        eos = eos[0] if isinstance(eos, list) and eos else eos
        if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int) or eos < 0):
            raise source.error("eos_token_id", "expected a token id (an int >= 0) or a list of them")
        return dict(HF_BEAM_DEFAULTS, length_penalty=float(alpha), early_stopping=early, eos_id=eos)

    def num_classes(self) -> int:
        """The classifier's classes (`id2label` / `num_labels`); a ValueError when the config has none."""
        return _num_classes(self.config, self.config_path)

    def saved_option(self, name: str, default: object = None) -> object:
        """An option `save_pretrained` remembered under "keras_tfm" (e.g. a classifier's pooling)."""
        return (self.config.get("keras_tfm") or {}).get(name, default)

    def sentence_pooling(self) -> tuple[str, bool]:
        """sentence-transformers `(pooling, normalize)` from modules.json / 1_Pooling/config.json."""
        return _pooling_options(self.directory)

    def load_weights(self, model: object, task: str) -> None:
        """Fills `model`'s weights from the checkpoint (all checked before any is assigned).

        Warns:
            UserWarning listing the weights the checkpoint lacks (they keep their initial values)
            and the checkpoint weights left unused.

        Raises:
            ValueError: a missing weight, or one whose shape disagrees with the config (naming the
                weight, both shapes and the config field to check).
        """
        tensors, sources = _normalise_names(*read_weights(self.directory))
        sources = {n: os.path.join(self.directory, f) for n, f in sources.items()}
        family = self.family
        prefix = wm.state_dict_prefix(tensors, family.STATE_DICT_PREFIX)
        entries = family.entries(model, prefix)
        pairs, missing = wm.collect(entries, tensors, sources, self.config, self.config_path)
        mapped = {e.name for e in entries}
        # Encoder parts a head does not use (BERT's pooler under a masked LM or mean pooling).
        unneeded = (family.unneeded(model, prefix) if hasattr(family, "unneeded") else ()) + getattr(
            family, "ZEROS_WHEN_MISSING", ()
        )
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
        where = f"{type(model).__name__}.from_preset({self.directory!r})"
        if missing:
            warnings.warn(
                f"{where}: {len(missing)} weight(s) of the {task} model are not in the checkpoint and keep "
                f"their initial values (train them before use): {missing}.",
                stacklevel=3,
            )
        if unused:
            warnings.warn(
                f"{where}: {len(unused)} checkpoint weight(s) were not used: {unused}.", stacklevel=3
            )

    def tokenizer(self, model: object = None) -> object:
        """The checkpoint's tokenizer (`pretrained_tokenizer`; seq2seq families:
        `seq2seq_tokenizer`), or None when the directory has no tokenizer files; a tokenizer that
        cannot be read, is of a kind this version does not implement, or does not fit `model`
        is a warning naming the problem (the model stays usable with ids)."""
        seq2seq = self.family in SEQ2SEQ_FAMILIES
        if not seq2seq and not any(
            os.path.isfile(os.path.join(self.directory, name)) for name in TOKENIZER_MARKERS
        ):
            return None
        try:
            if seq2seq:
                tokenizer = seq2seq_tokenizer(self.directory, self.family.MODEL_TYPE)
            else:
                tokenizer = pretrained_tokenizer(self.directory)
                if model is not None:
                    check_vocabulary_size(tokenizer, getattr(model, "vocabulary_size", None))
            if model is not None and tokenizer is not None:
                model._check_tokenizer(tokenizer)
        except TokenizerNotImplemented as error:
            warnings.warn(
                f"{type(model).__name__}.from_preset({self.directory!r}): loaded without a tokenizer: "
                f"the checkpoint's {SEQ2SEQ_TOKENIZER_KINDS[self.family.MODEL_TYPE]} tokenizer is not "
                f"read ({error}); pass token ids, or set `model.tokenizer` yourself.",
                stacklevel=3,
            )
            return None
        except (ValueError, TypeError, OSError) as error:
            warnings.warn(
                f"{type(model).__name__}.from_preset({self.directory!r}): the checkpoint's tokenizer was not "
                f"attached ({error}); set `model.tokenizer` yourself to use the text methods.",
                stacklevel=3,
            )
            return None
        return tokenizer
