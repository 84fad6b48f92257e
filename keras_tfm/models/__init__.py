"""Model classes and their builders: GPT, BERT, the encoder–decoder Transformer, ViT.

Each builder returns a functional `keras.Model` subclass whose parts are
attributes and whose operations are methods (see `keras_tfm.models.base`):

    gpt(preset, **options)                       GPT            decoder-only LM
    seq2seq(preset, **options)                   Seq2Seq        encoder–decoder
    bert_encoder(preset, **options)              BertEncoder    BERT encoder (+ pooler)
    bert_masked_lm / bert_classifier / bert_token_classifier
                                                 BertMaskedLM / BertClassifier / BertTokenClassifier
    vit_classifier(image_size, patch_size, ...)  ViT
    compile_for_lm / compile_for_classification
    from_functional(model), load_model(path)     models saved before the classes existed

Presets: `list_presets()`; see `keras_tfm.models.presets`. Parameter counts
without building: `gpt_num_params`, `seq2seq_num_params`.
"""

from keras_tfm.models.base import TransformerModel
from keras_tfm.models.bert import BertEncoder, bert_encoder
from keras_tfm.models.bert_tasks import (
    BertClassifier,
    BertMaskedLM,
    BertTask,
    BertTokenClassifier,
    bert_classifier,
    bert_masked_lm,
    bert_token_classifier,
)
from keras_tfm.models.bert_weights import bert_weight_mapping, load_bert_weights
from keras_tfm.models.gpt import GPT, gpt
from keras_tfm.models.heads import Bias, SequencePooling
from keras_tfm.models.legacy import from_functional, load_model
from keras_tfm.models.param_counts import gpt_num_params, seq2seq_num_params
from keras_tfm.models.presets import PRESETS, get_preset, list_presets
from keras_tfm.models.seq2seq import Seq2Seq, seq2seq
from keras_tfm.models.seq2seq_helpers import seq2seq_encoder, seq2seq_greedy_decode, seq2seq_layer_names
from keras_tfm.models.vit import ViT, vit_classifier

__all__ = [
    "GPT",
    "PRESETS",
    "BertClassifier",
    "BertEncoder",
    "BertMaskedLM",
    "BertTask",
    "BertTokenClassifier",
    "Bias",
    "Seq2Seq",
    "SequencePooling",
    "TransformerModel",
    "ViT",
    "bert_classifier",
    "bert_encoder",
    "bert_masked_lm",
    "bert_token_classifier",
    "bert_weight_mapping",
    "from_functional",
    "get_preset",
    "gpt",
    "gpt_num_params",
    "list_presets",
    "load_bert_weights",
    "load_model",
    "seq2seq",
    "seq2seq_encoder",
    "seq2seq_greedy_decode",
    "seq2seq_layer_names",
    "seq2seq_num_params",
    "vit_classifier",
]
from keras_tfm.models.sentence_encoder import SentenceEncoder  # noqa: E402
