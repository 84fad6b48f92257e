"""Translation (Anki English→Spanish, Multi30k English→German) with the Transformer of Vaswani et al.

Post-norm encoder–decoder, sinusoidal positions, Adam(0.9, 0.98, 1e-9) with the inverse-square-root
warmup schedule (`keras_tfm.optimizers.vaswani_adam`), label smoothing 0.1, padding-masked loss.
One cased byte-level BPE vocabulary (8,000 tokens) is learned from both sides of the training pairs,
so every sentence is tokenized without an unknown token and detokenized to normal text
(`--tokenizer word`: the older lower-cased word vocabulary per language). A held-out set (random,
seeded; for a Multi30k folder its official `test_2016_flickr` split) gives the teacher-forced token
accuracy and the cased sacreBLEU and chrF (`keras_tfm.analysis.bleu`, needs `pip install sacrebleu`) of
beam-search translations (width 4, GNMT length penalty 0.6; cached decoding, `keras_tfm.generation`),
and a few translations are printed.

    python examples/translate.py --data ../shared/data/spa_eng_anki/spa-eng/spa.txt
    python examples/translate.py --data ../shared/data/multi30k_task1_raw --max-words 40 --bleu-pairs 0
    python examples/translate.py --data spa.txt --steps 200 --max-pairs 5000      # quick try
    python examples/translate.py --data spa.txt --output runs/mt --export translator

The data is the Anki/Tatoeba `spa-eng.zip` of the Keras and TensorFlow translation tutorials, or the
Multi30k task 1 files (train/val/test_2016_flickr .en.gz/.de.gz; download them yourself when online).
Same code as `keras-tfm train seq2seq`.
"""

import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines

from keras_tfm.cli import train  # noqa: E402

if __name__ == "__main__":
    sys.exit(train.main("seq2seq", description=__doc__))
