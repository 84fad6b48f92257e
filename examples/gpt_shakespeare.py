"""Lab: a 4-layer character-level GPT on Tiny Shakespeare (nanoGPT's CPU run, in Keras).

Defaults are nanoGPT's `train_shakespeare_char.py` with its CPU command line

    python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20
        --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
        --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0

i.e. 4 layers, 4 heads, d_model 128, context 64, batch 12, 2000 steps, AdamW (lr 1e-3, β2 0.99,
weight decay 0.1, global-norm clip 1.0), 100 warmup steps, no dropout, no biases, learned positions,
tied embeddings, exact GELU; the same model, initialisation and data sampling as nanoGPT.

One default differs: the learning rate decays warmup–stable–decay style (`--schedule wsd`: 1e-3
until step 1600, then linearly to 1e-4 at step 2000) instead of nanoGPT's cosine (`--schedule
cosine` reproduces nanoGPT). On this short run the model is still learning fast when cosine has
already halved the rate; holding the peak lowers the validation loss from about 1.91 (cosine, here
and in a PyTorch replica of nanoGPT) to about 1.85 (see bench/RESULTS.md). The validation loss
is printed every 250 steps on 20 fixed batches (nanoGPT's `eval_iters=20` estimate); the final
line gives it on the whole validation split, then a sample and the wall time. The train step is
XLA-compiled (`--no-jit-compile` to turn it off).

    python examples/gpt_shakespeare.py --data ../shared/data/tiny_shakespeare/input.txt
    python examples/gpt_shakespeare.py --manual-dir DIR_WITH_input.txt     # TFDS tiny_shakespeare
    python examples/gpt_shakespeare.py                                    # TFDS downloads it (internet)
    python examples/gpt_shakespeare.py --data input.txt --steps 200 --log-dir logs/gpt --backup-dir ckpt/gpt
    python examples/gpt_shakespeare.py --data input.txt --schedule cosine    # nanoGPT exactly
    python examples/gpt_shakespeare.py --data input.txt --position rope      # rotary positions
    python examples/gpt_shakespeare.py --data input.txt --preset llama_tiny  # Llama layout, same size
    python examples/gpt_shakespeare.py --data input.txt --position rope --norm rms --activation swiglu --num-key-value-heads 1
    python examples/gpt_shakespeare.py --data input.txt --output runs/gpt --export shakespeare

`--preset llama_tiny` trains today's decoder layout (pre-RMSNorm, SwiGLU, RoPE, grouped-query
attention with 2 key/value heads, no biases, untied head) at the lab model's parameter count
(804,224 against 805,248); `--position`, `--norm`, `--activation` and `--num-key-value-heads` change one
piece at a time, with or without the preset.

Same code as `keras-tfm train gpt` (`keras_tfm.recipes.train_gpt`).
"""

import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines

from keras_tfm.cli import train  # noqa: E402

if __name__ == "__main__":
    sys.exit(train.main("gpt", description=__doc__))
