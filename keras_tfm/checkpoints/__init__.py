"""Published checkpoints in HuggingFace's layout: read, convert, write.

    from_pretrained(path, task=None)     a checkpoint directory → a keras_tfm model (its
                                         tokenizer attached as `model.tokenizer`)
    sentence_encoder(path)               → a `SentenceEncoder` (pooling as 1_Pooling says)
    pretrained_tokenizer(path)           → the checkpoint's WordPiece or byte-pair tokenizer
    save_pretrained(model, path)         a keras_tfm model → the same layout (atomic)
    checkpoint_path(path)                a directory, or "hf://org/name" → its folder in the
                                         Hugging Face cache (downloaded when online; `hub`)

One module per concern: `files` (config.json, safetensors, atomic directories),
`weight_mapping` (checkpoint name ↔ Keras variable, both directions) and one
converter per family (`bert`, `gpt2`, `llama`); `pretrained` dispatches on
`model_type`; `hub` resolves "hf://" names (every `path` above may be one; `pip install
keras-tfm[hub]`). Importing the package registers `presets.load_preset_directory`, which the
model classes' `from_preset(directory | "hf://org/name")` calls.
"""

from keras_tfm.checkpoints import presets  # registers `from_preset` for checkpoints
from keras_tfm.checkpoints.files import CheckpointError, MissingCheckpointFile
from keras_tfm.checkpoints.hub import checkpoint_path
from keras_tfm.checkpoints.pretrained import (
    from_pretrained,
    pretrained_tokenizer,
    save_pretrained,
    sentence_encoder,
)

__all__ = [
    "CheckpointError",
    "MissingCheckpointFile",
    "checkpoint_path",
    "from_pretrained",
    "pretrained_tokenizer",
    "save_pretrained",
    "sentence_encoder",
]
