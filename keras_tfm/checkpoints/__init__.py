"""Published checkpoints in HuggingFace's layout: read, convert, write.

    from_pretrained(path, task=None)     a checkpoint directory → a keras_tfm model
    sentence_encoder(path)               → a `SentenceEncoder` (pooling as 1_Pooling says)
    pretrained_tokenizer(path)           → the checkpoint's WordPiece or byte-pair tokenizer
    save_pretrained(model, path)         a keras_tfm model → the same layout (atomic)

One module per concern: `files` (config.json, safetensors, atomic directories),
`weight_mapping` (checkpoint name ↔ Keras variable, both directions) and one
converter per family (`bert`, `gpt2`, `llama`); `pretrained` dispatches on
`model_type`. Nothing is downloaded.
"""

from keras_tfm.checkpoints.files import CheckpointError, MissingCheckpointFile
from keras_tfm.checkpoints.pretrained import (
    from_pretrained,
    pretrained_tokenizer,
    save_pretrained,
    sentence_encoder,
)

__all__ = [
    "CheckpointError",
    "MissingCheckpointFile",
    "from_pretrained",
    "pretrained_tokenizer",
    "save_pretrained",
    "sentence_encoder",
]
