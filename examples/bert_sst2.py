"""BERT on SST-2: masked-LM pretraining on the task text, then a sentence classifier.

1. A WordPiece vocabulary is learned on the SST-2 training sentences.
2. A small BERT encoder is pretrained with the masked-LM objective (15% of the tokens selected;
   80% [MASK], 10% random, 10% unchanged) on the training sentences only (no labels).
3. The pretrained encoder gets a classifier on [CLS] (tanh pooler) and is fine-tuned on the labels;
   the dev accuracy is reported after every epoch and at the end (and the test accuracy when
   `stsa.binary.test` is there).

    python examples/bert_sst2.py --data ../shared/data/sst2_sentence_level       # stsa.binary.{train,dev,test}
    python examples/bert_sst2.py --data DIR --output runs/bert --export sst2       # keep the classifier, serve it
    python examples/bert_sst2.py --manual-dir DIR_WITH_SST-2.zip                  # TFDS glue/sst2
    python examples/bert_sst2.py                                                  # TFDS downloads it (internet)

`--pretrain-steps` (800) and `--finetune-epochs` (8) size the two stages; `--steps N` instead gives
the whole run N optimizer steps (N // 2 pretraining, the rest fine-tuning). Same code as
`keras-tfm train bert` (`keras_tfm.recipes.train_bert`).
"""

import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines

from keras_tfm.cli import train  # noqa: E402

if __name__ == "__main__":
    sys.exit(train.main("bert", description=__doc__))
