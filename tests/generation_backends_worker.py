"""Runs the generation cases of `test_generation_backends.py` on the backend of
`KERAS_BACKEND` and prints their results as JSON (one subprocess per backend).

Usage: python generation_backends_worker.py WEIGHTS_DIR [--distributed]
(`--distributed`, JAX with 8 virtual devices: greedy decoding again under a
`ModelParallel` that shards the feed-forward kernels 4 ways on a 2 × 4 mesh).
"""

import json
import os
import sys

import keras
import numpy as np

from keras_tfm import generation, models

GPT_PROMPTS = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10]]
SOURCES = [[3, 4, 5, 6], [7, 8, 9]]


def build_gpt():
    return models.gpt("tiny")


def build_seq2seq():
    return models.seq2seq("tiny")


def cases(gpt, seq2seq):
    """The results compared across backends (lists, JSON-ready)."""
    out = {
        "greedy": generation.generate(gpt, GPT_PROMPTS, 12, eos_id=63),
        "sliding": generation.generate(gpt, GPT_PROMPTS, 40),
        "sample": generation.generate(
            gpt, GPT_PROMPTS, 12, sampler="sample", seed=5, temperature=1.2, top_k=20, top_p=0.9
        ),
    }
    sequences, scores, lengths = generation.beam_search(gpt, GPT_PROMPTS, 6, num_beams=3)
    out.update(beam=sequences, beam_scores=scores, beam_lengths=lengths)
    out["seq2seq_greedy"] = generation.generate(seq2seq, SOURCES, 8, bos_id=1)
    return {k: np.asarray(v).tolist() for k, v in out.items()}


def feed_forward_layout(model, mesh):
    """A LayoutMap sharding every 2-D feed-forward kernel of `model` along "model" (the rest replicated)."""
    import re

    layout_map = keras.distribution.LayoutMap(mesh)
    for v in model.variables:
        if "feed_forward" in v.path and len(v.shape) == 2:
            layout_map[re.escape(v.path) + "$"] = (None, "model")
    return layout_map


def distributed(weights):
    """Greedy tokens under ModelParallel, and the per-device share of a sharded kernel."""
    devices = keras.distribution.list_devices()
    results = {"devices": len(devices)}
    mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"), devices)
    layout_map = feed_forward_layout(build_gpt(), mesh)
    model_parallel = keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    with model_parallel.scope():
        gpt = build_gpt()
        gpt.load_weights(os.path.join(weights, "gpt.weights.h5"))
        results["model_parallel"] = generation.generate(gpt, GPT_PROMPTS, 12, eos_id=63).tolist()
        kernel = next(v for v in gpt.variables if "feed_forward" in v.path and len(v.shape) == 2)
        shard = kernel.value.addressable_shards[0].data
        results["shard_fraction"] = float(np.prod(shard.shape) / np.prod(kernel.shape))
    return results


def main(argv):
    weights = argv[0]
    gpt, seq2seq = build_gpt(), build_seq2seq()
    gpt.load_weights(os.path.join(weights, "gpt.weights.h5"))
    seq2seq.load_weights(os.path.join(weights, "seq2seq.weights.h5"))
    results = {"backend": keras.backend.backend(), **cases(gpt, seq2seq)}
    if "--distributed" in argv:
        results.update(distributed(weights))
    print("RESULTS " + json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
