"""Model classes and their builders: GPT, BERT, the encoder–decoder Transformer, ViT.

Each builder returns a functional `keras.Model` subclass whose parts are
attributes and whose operations are methods (see `keras_tfm.models.base`):

    gpt(preset, **options)                       GPT            decoder-only LM
    seq2seq(preset, **options)                   Seq2Seq        encoder–decoder
    bert_encoder(preset, **options)              BertEncoder    BERT encoder (+ pooler)
    bert_masked_lm / bert_classifier / bert_token_classifier
                                                 BertMaskedLM / BertClassifier / BertTokenClassifier
    SentenceEncoder(encoder, pooling)            pooled (normalised) sentence embeddings
    vit_classifier(image_size, patch_size, ...)  ViT

A builder merges a preset (`list_presets()`, `keras_tfm.models.presets`) under
its explicit options and calls the class. Parameter counts without building:
`gpt_num_params`, `seq2seq_num_params`; bytes per device of a training step:
`memory_plan` (`keras_tfm.models.memory`). Model parallelism: `Model.get_layout_map(mesh)`
(`keras_tfm.models.layout`). LoRA: `model.enable_lora(rank)`,
`model.merge_lora()` (`keras_tfm.models.lora`). Published checkpoints:
`Class.from_preset(directory | "hf://org/name")`, `from_pretrained(path, task)` (the class
the checkpoint's task builds), `sentence_encoder(path)`. Compiling for training is
`keras_tfm.training.compile_for_lm` / `compile_for_classification`.
"""

from keras_tfm.models.base import TransformerModel
from keras_tfm.models.bert import BertEncoder, bert_encoder
from keras_tfm.models.bert_builders import bert_classifier, bert_masked_lm, bert_token_classifier
from keras_tfm.models.bert_classifiers import BertClassifier, BertTokenClassifier
from keras_tfm.models.bert_tasks import BertMaskedLM, BertTask
from keras_tfm.models.gpt import GPT, gpt
from keras_tfm.models.heads import Bias, SequencePooling
from keras_tfm.models.loading import from_pretrained
from keras_tfm.models.memory import MemoryPlan, memory_plan
from keras_tfm.models.param_counts import gpt_num_params, seq2seq_num_params
from keras_tfm.models.presets import PRESETS, get_preset, list_presets
from keras_tfm.models.sentence_encoder import SentenceEncoder, sentence_encoder
from keras_tfm.models.seq2seq import Seq2Seq, seq2seq
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
    "MemoryPlan",
    "SentenceEncoder",
    "Seq2Seq",
    "SequencePooling",
    "TransformerModel",
    "ViT",
    "bert_classifier",
    "bert_encoder",
    "bert_masked_lm",
    "bert_token_classifier",
    "from_pretrained",
    "get_preset",
    "gpt",
    "gpt_num_params",
    "list_presets",
    "memory_plan",
    "seq2seq",
    "seq2seq_num_params",
    "sentence_encoder",
    "vit_classifier",
]
