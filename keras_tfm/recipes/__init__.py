"""Ready-made recipes: plain Python functions shared by `keras-tfm` and `examples/*.py`.

    gpt       train_gpt(**GPTOptions)          character GPT on Tiny Shakespeare (nanoGPT's CPU run)
    bert      train_bert(**BertOptions)        BERT: MLM pretraining on the SST-2 sentences, then SST-2
    seq2seq   train_seq2seq(**Seq2SeqOptions)  Transformer English→Spanish translation (Anki/Tatoeba pairs)
    finetune  finetune_checkpoint(**FinetuneOptions)  a published checkpoint fine-tuned as a text classifier
    finetune_seq2seq  finetune_seq2seq_checkpoint(**Seq2SeqFinetuneOptions)  a T5 / BART / Marian checkpoint
                      fine-tuned on sentence pairs

    results = keras_tfm.recipes.train_gpt(data="input.txt", steps=200, max_length=64, output="runs/gpt")

Each recipe takes keyword arguments, the fields of its options dataclass (defaults defined there, once;
`keras-tfm` reads them for its flags), checks them before any training (a ValueError or TypeError naming
the argument) and returns a dict of results. With `output=DIR` a training recipe also writes the model,
its tokenizers and training.json (`output`); `evaluate_<name>(trained, data)` scores such a folder read
back with `output.load_trained` (`keras-tfm evaluate`). `RECIPES` lists the training recipes by name.
"""

import collections

from keras_tfm.recipes import bert, gpt, seq2seq
from keras_tfm.recipes.bert import BertOptions, evaluate_bert, load_sst2, train_bert
from keras_tfm.recipes.finetune import (
    FinetuneOptions,
    evaluate_classifier,
    finetune_checkpoint,
    finetune_classifier,
    predict_classes,
)
from keras_tfm.recipes.finetune_seq2seq import (
    Seq2SeqFinetuneOptions,
    evaluate_seq2seq_pairs,
    finetune_seq2seq,
    finetune_seq2seq_checkpoint,
)
from keras_tfm.recipes.gpt import (
    GPTOptions,
    evaluate_gpt,
    load_shakespeare_text,
    nanogpt_init,
    sample_text,
    train_gpt,
)
from keras_tfm.recipes.options import TrainingOptions
from keras_tfm.recipes.output import load_trained
from keras_tfm.recipes.seq2seq import Seq2SeqOptions, evaluate_seq2seq, train_seq2seq

#: A training recipe: `train(**options)`, its `options` dataclass, `evaluate(trained, data)`, and what
#: `keras-tfm train --help` / `keras-tfm evaluate --help` say of it.
Recipe = collections.namedtuple("Recipe", ["train", "options", "evaluate", "help", "metric_help"])

RECIPES = {
    "gpt": Recipe(train_gpt, GPTOptions, evaluate_gpt, gpt.HELP, gpt.METRIC_HELP),
    "bert": Recipe(train_bert, BertOptions, evaluate_bert, bert.HELP, bert.METRIC_HELP),
    "seq2seq": Recipe(train_seq2seq, Seq2SeqOptions, evaluate_seq2seq, seq2seq.HELP, seq2seq.METRIC_HELP),
}

__all__ = [
    "RECIPES",
    "BertOptions",
    "FinetuneOptions",
    "GPTOptions",
    "Recipe",
    "Seq2SeqFinetuneOptions",
    "Seq2SeqOptions",
    "TrainingOptions",
    "evaluate_bert",
    "evaluate_classifier",
    "evaluate_gpt",
    "evaluate_seq2seq",
    "evaluate_seq2seq_pairs",
    "finetune_checkpoint",
    "finetune_classifier",
    "finetune_seq2seq",
    "finetune_seq2seq_checkpoint",
    "load_shakespeare_text",
    "load_sst2",
    "load_trained",
    "nanogpt_init",
    "predict_classes",
    "sample_text",
    "train_bert",
    "train_gpt",
    "train_seq2seq",
]
