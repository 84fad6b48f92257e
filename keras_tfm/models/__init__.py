"""Model builders: GPT, BERT and the encoder–decoder Transformer of Vaswani et al.

    gpt(preset, **options)                       decoder-only LM
    seq2seq(preset, **options)                   encoder–decoder ("Attention Is All You Need")
    bert_encoder(preset, **options)              BERT encoder (+ pooler)
    bert_masked_lm / bert_classifier / bert_token_classifier
    compile_for_lm / compile_for_classification

Presets: `list_presets()`; see `keras_tfm.models.presets`.
"""

from keras_tfm.models.bert import (
    bert_classifier,
    bert_encoder,
    bert_masked_lm,
    bert_token_classifier,
    bert_weight_mapping,
    load_bert_weights,
)
from keras_tfm.models.compile import compile_for_classification, compile_for_lm
from keras_tfm.models.gpt import gpt
from keras_tfm.models.heads import Bias, SequencePooling
from keras_tfm.models.presets import PRESETS, get_preset, list_presets
from keras_tfm.models.seq2seq import (
    seq2seq,
    seq2seq_encoder,
    seq2seq_greedy_decode,
    seq2seq_layer_names,
    seq2seq_num_params,
)

__all__ = [
    "PRESETS",
    "Bias",
    "SequencePooling",
    "bert_classifier",
    "bert_encoder",
    "bert_masked_lm",
    "bert_token_classifier",
    "bert_weight_mapping",
    "compile_for_classification",
    "compile_for_lm",
    "get_preset",
    "gpt",
    "list_presets",
    "load_bert_weights",
    "seq2seq",
    "seq2seq_encoder",
    "seq2seq_greedy_decode",
    "seq2seq_layer_names",
    "seq2seq_num_params",
]
from keras_tfm.models.vit import vit_classifier  # noqa: E402,F401
