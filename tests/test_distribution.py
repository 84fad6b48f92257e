"""Sharded training on 8 virtual JAX CPU devices, run from the README's test command.

JAX reads its device count once, at start-up, and `keras.distribution` shards on JAX only; the
suite runs on TensorFlow. So this file runs `tests/distribution_cases.py` (get_layout_map under
ModelParallel on 2 × 4 and 1 × 8 meshes, per-device bytes, memory_plan against the measured shards
and the compiled step) in ONE subprocess with KERAS_BACKEND=jax, JAX_PLATFORMS=cpu and
XLA_FLAGS=--xla_force_host_platform_device_count=8, and asserts that every case passed. XLA's
backend optimisation level 0 halves the compile time of these tiny steps; the numbers compared
are the same.
"""

import math
import os
import subprocess
import sys

import pytest

from keras_tfm.models import gpt_num_params, memory_plan
from keras_tfm.models.param_counts import gpt_variable_shapes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 600  # seconds, on a loaded 2-core machine


def test_distribution_cases_on_eight_virtual_devices():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XLA_FLAGS"))}
    env.update(
        KERAS_BACKEND="jax",
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0",
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=ROOT,
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-o",
        "addopts=",  # not the suite's xdist options: one process, with its summary line
        "-q",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::UserWarning",
    ]
    proc = subprocess.run(
        command + ["tests/distribution_cases.py"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, proc.stdout[-3000:]


# ------------------------------------------------ memory_plan on paper (no device, no model built)
@pytest.mark.parametrize("preset", ["tiny", "llama_tiny", "gpt2_medium", "llama2_7b", "llama3_8b"])
def test_variable_shapes_of_a_preset_add_up_to_its_parameter_count(preset):
    shapes = gpt_variable_shapes(preset)
    assert sum(math.prod(shape) for _, shape in shapes) == gpt_num_params(preset)


def test_memory_plan_of_llama2_7b_on_eight_devices():
    plans = memory_plan("llama2_7b", devices=8, batch=8, max_length=1024, precision="bfloat16")
    params = gpt_num_params("llama2_7b")
    assert plans["data"].parameters == 2 * params  # replicated, 2-byte weights
    assert plans["data"].optimizer == 2 * plans["data"].gradients + 8
    # Every matrix splits 8 ways (32 heads, 32 key/value heads, d_ff 11008, vocabulary 32000); the
    # 65 norms of 4096 stay whole.
    norms = (2 * 32 + 1) * 4096
    assert plans["model"].parameters == 2 * ((params - norms) // 8 + norms)
    assert plans["model"].batch_per_device == 8 and plans["data"].batch_per_device == 1
    lora = memory_plan("llama2_7b", devices=8, batch=8, max_length=1024, lora_rank=8)["model"]
    # A (4096, 32, 8) split by heads, B (8, 128) whole; query and value of 32 blocks; float32.
    assert lora.gradients == 4 * 32 * 2 * (4096 * 32 * 8 // 8 + 8 * 128)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(precision="fp8"), ValueError, r"`precision`"),
        (dict(optimizer="adagrad"), ValueError, r"`optimizer`"),
        (
            dict(devices=8, model_devices=3),
            ValueError,
            r"`model_devices` must divide `devices`=8; received 3",
        ),
        (dict(batch=0), ValueError, r"`batch`"),
        (dict(remat="yes"), TypeError, r"`remat` must be a bool"),
    ],
)
def test_memory_plan_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        memory_plan("tiny", **kwargs)
