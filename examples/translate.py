"""English→Spanish translation with the encoder–decoder Transformer of "Attention Is All You Need".

Post-norm encoder–decoder, sinusoidal positions, Adam(0.9, 0.98, 1e-9) with the inverse-square-root
warmup schedule (`keras_tfm.optimizers.vaswani_adam`), label smoothing 0.1, padding-masked loss.
Word vocabularies per language are learned from the training pairs. A held-out set (random,
seeded) gives the teacher-forced token accuracy and the corpus BLEU-4 (with brevity penalty,
`keras_tfm.bleu.corpus_bleu`) of greedy translations (cached decoding, `keras_tfm.generation`),
and a few translations are printed.

    python examples/translate.py --data ../shared/data/spa_eng_anki/spa-eng/spa.txt
    python examples/translate.py --data spa.txt --steps 200 --max-pairs 5000      # quick try
    python examples/translate.py --data spa.txt --output runs/mt --export translator

The data is the Anki/Tatoeba `spa-eng.zip` of the Keras and TensorFlow translation tutorials
(download and unzip it yourself when online). Same code as `keras-tfm train seq2seq`.
"""

import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines

from keras_tfm import recipes  # noqa: E402

if __name__ == "__main__":
    sys.exit(recipes.main_for("seq2seq", description=__doc__))
