"""PyTorch generation gives TensorFlow's tokens (run by `.ci/run`'s PyTorch pass).

PyTorch is not in the test extra (from the registry it is a CUDA build of
several GB), so the README's test command cannot run this file; `.ci/run`
installs the CPU build and runs it with `KERAS_BACKEND=torch`. The models are
built here (PyTorch), their weights saved, and a TensorFlow subprocess
(`generation_backends_worker.py`) runs the cases of `test_generation_backends.py`
on the same weights as the reference.
"""

import os

import generation_backends_worker as worker
import keras
from test_generation_backends import assert_same_results, start_worker, worker_results


def test_torch_gives_tensorflows_tokens(tmp_path):
    assert keras.backend.backend() == "torch", "run with KERAS_BACKEND=torch (see .ci/run)"
    gpt, seq2seq = worker.build_gpt(), worker.build_seq2seq()
    gpt.save_weights(os.path.join(tmp_path, "gpt.weights.h5"))
    seq2seq.save_weights(os.path.join(tmp_path, "seq2seq.weights.h5"))
    tensorflow = start_worker(str(tmp_path), "tensorflow")
    got = worker.cases(gpt, seq2seq)
    reference = worker_results("tensorflow", tensorflow)
    assert reference["backend"] == "tensorflow"
    assert_same_results(got, reference, "torch")
