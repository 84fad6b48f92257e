"""Looking inside trained models: attention maps and head statistics, translation scores, pictures.

inspection   attention_maps, attention_entropy, head_statistics, describe_head
bleu         corpus_scores: cased sacreBLEU BLEU and chrF of detokenized text
plotting     lecture pictures as PNG files (attention heads, positional encodings,
             learning-rate schedules, training curves)
"""

from keras_tfm.analysis.bleu import corpus_scores
from keras_tfm.analysis.inspection import (
    attention_entropy,
    attention_maps,
    attention_model,
    describe_head,
    head_statistics,
    key_validity,
    transformer_blocks,
)

__all__ = [
    "attention_entropy",
    "attention_maps",
    "attention_model",
    "corpus_scores",
    "describe_head",
    "head_statistics",
    "key_validity",
    "transformer_blocks",
]
