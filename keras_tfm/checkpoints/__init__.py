"""Published checkpoints in HuggingFace's layout: read, convert, write (no model class here).

    Checkpoint(path)                     a checkpoint directory (or "hf://org/name") read: config,
                                         family, constructor options, weights, tokenizer
    save_pretrained(model, path)         a keras_tfm model → the same layout (atomic)
    pretrained_tokenizer(path)           → the checkpoint's WordPiece or byte-pair tokenizer
    checkpoint_path(path)                a directory, or "hf://org/name" → its folder in the
                                         Hugging Face cache (downloaded when online; `hub`)

The model classes build themselves from a checkpoint: `GPT.from_preset(path)`,
`BertClassifier.from_preset(path)`, ... (`keras_tfm.models.base`), and
`keras_tfm.models.from_pretrained(path, task)` picks the class. This package sits below
`models`: one module per concern, `files` (config.json, safetensors, atomic directories),
`weight_mapping` (checkpoint name ↔ Keras variable, both directions), one converter per
family (`bert`, `gpt2`, `llama`, `mistral`, `qwen2`, `t5`, `bart`, `marian`), `loading`
(`Checkpoint`), `saving`, `tokenizer_files` and `hub`.

A family converter is a module with `MODEL_TYPE`, `STATE_DICT_PREFIX`, `TASKS`, `DEFAULT_TASK`,
`IGNORED_SUFFIXES`, `TIED`, `builder_options(config, read)`, `entries(model, prefix)` (checkpoint
name ↔ variable, both directions) and `hf_config(model, task)`; optionally `save_entries(model,
task)` (else `entries(model, STATE_DICT_PREFIX)` is written) and `unneeded(model, prefix)` (name
prefixes a head does not use; else none).
"""

from keras_tfm.checkpoints.files import CheckpointError, MissingCheckpointFile
from keras_tfm.checkpoints.hub import checkpoint_path
from keras_tfm.checkpoints.loading import Checkpoint
from keras_tfm.checkpoints.saving import save_pretrained
from keras_tfm.checkpoints.tokenizer_files import pretrained_tokenizer

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "MissingCheckpointFile",
    "checkpoint_path",
    "pretrained_tokenizer",
    "save_pretrained",
]
