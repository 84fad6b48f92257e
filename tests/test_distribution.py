"""Sharded training on 8 virtual JAX CPU devices, run from the README's test command.

JAX reads its device count once, at start-up, and `keras.distribution` shards on JAX only; the
suite runs on TensorFlow. So this file runs `tests/distribution_cases.py` (get_layout_map under
ModelParallel on 2 × 4 and 1 × 8 meshes, per-device bytes, memory_plan against the measured shards
and the compiled step) in ONE subprocess with KERAS_BACKEND=jax, JAX_PLATFORMS=cpu and
XLA_FLAGS=--xla_force_host_platform_device_count=8, and asserts that every case passed. XLA's
backend optimisation level 0 halves the compile time of these tiny steps; the numbers compared
are the same.
"""

import os
import subprocess
import sys

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
        "-q",
        "-n",
        "0",
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
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-3000:]
