"""Generation on every backend: JAX and PyTorch give TensorFlow's tokens.

The tiny GPT and seq2seq models are built here (TensorFlow), their weights
saved; a JAX subprocess (`generation_backends_worker.py`; backends cannot mix
in one process) loads them and runs the same cases: greedy (with EOS, and past
the context with the sliding window), seeded sampling (the random stream is
backend-independent: same seed → same tokens), beam search, seq2seq greedy
decoding; it also runs greedy decoding under a `ModelParallel` that shards
the feed-forward kernels, on 8 virtual CPU devices. PyTorch is not in the
test extra (from the registry it is a CUDA build of several GB): `.ci/run`
installs the CPU build and runs `generation_torch_cases.py`, the same cases on
PyTorch against a TensorFlow subprocess, in its PyTorch pass.
"""

import json
import os
import subprocess
import sys

import generation_backends_worker as worker
import numpy as np
import pytest
from model_harness import tiny_gpt, tiny_seq2seq

from keras_tfm import generation

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def start_worker(weights, backend, *args):
    """Starts `generation_backends_worker.py` on `backend` (a subprocess)."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "jax":
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "generation_backends_worker.py"), weights, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _start_backends(weights):
    """Starts the JAX worker (it runs while TensorFlow computes its reference)."""
    return {"jax": start_worker(weights, "jax", "--distributed")}


def worker_results(backend, proc):
    """The parsed results of a worker started by `start_worker`."""
    stdout, stderr = proc.communicate(timeout=600)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, f"{backend} worker failed:\n{stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULTS ") :])


def _results(procs):
    """The workers' parsed results by backend."""
    return {backend: worker_results(backend, proc) for backend, proc in procs.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(TensorFlow's results, {backend: results}) for the same weights."""
    weights = str(tmp_path_factory.mktemp("generation_backends"))
    gpt, seq2seq = tiny_gpt(seed=1), tiny_seq2seq(seed=2)
    gpt.save_weights(os.path.join(weights, "gpt.weights.h5"))
    seq2seq.save_weights(os.path.join(weights, "seq2seq.weights.h5"))
    procs = _start_backends(weights)
    try:
        reference = worker.cases(gpt, seq2seq)
        return reference, _results(procs)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


TOKEN_CASES = ("greedy", "sliding", "sample", "beam", "beam_lengths", "seq2seq_greedy")


def assert_same_results(got, reference, backend):
    """`got` (a backend's results) equals TensorFlow's `reference`: tokens exactly, beam scores to 1e-4."""
    for case in TOKEN_CASES:
        np.testing.assert_array_equal(
            np.array(got[case]), np.array(reference[case]), err_msg=f"{backend}: {case}"
        )
    np.testing.assert_allclose(got["beam_scores"], reference["beam_scores"], rtol=1e-4)


def test_same_tokens_as_tensorflow(runs):
    reference, results = runs
    assert results["jax"]["backend"] == "jax"
    assert_same_results(results["jax"], reference, "jax")


def test_cases_are_not_trivial(runs):
    """The compared outputs exercise what they name: sampling differs from greedy, the
    sliding case passes the context, beams differ."""
    reference, _ = runs
    assert np.array(reference["sliding"]).shape == (2, 40)  # prompt + 40 > max_length 32
    assert not np.array_equal(np.array(reference["sample"]), np.array(reference["greedy"]))
    assert len({tuple(b) for b in reference["beam"][0]}) == 3


def test_jax_model_parallel_generation(runs):
    """JAX under ModelParallel (8 virtual devices, a 2 × 4 mesh, feed-forward kernels
    sharded 4 ways) decodes TensorFlow's greedy tokens."""
    reference, results = runs
    got = results["jax"]
    assert got["devices"] == 8
    assert got["shard_fraction"] == pytest.approx(1 / 4)
    np.testing.assert_array_equal(got["model_parallel"], reference["greedy"])


def test_seed_rule_on_tensorflow():
    """Same seed → same tokens; the stream is the documented integer hash (bit-exact values)."""
    from keras import ops

    u = ops.convert_to_numpy(generation.samplers.uniform_noise(np.array([0, 5], np.int32), (2, 4)))
    assert u.dtype == np.float32 and ((u > 0) & (u < 1)).all()
    again = ops.convert_to_numpy(generation.samplers.uniform_noise(np.array([0, 5], np.int32), (2, 4)))
    np.testing.assert_array_equal(u, again)
    # 24-bit grid: every value is an odd multiple of 2^-24.
    scaled = u.astype(np.float64) * (1 << 24)
    np.testing.assert_array_equal(scaled, np.round(scaled))
    assert (np.round(scaled).astype(np.int64) % 2 == 1).all()
