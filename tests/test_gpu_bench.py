"""bench/gpu.sh in its CPU mode: the GPU bench's code paths (JAX backend, no TensorFlow needed) on a tiny GPT."""

import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpu_bench_cpu_mode_reports_speed_mfu_and_generation(tmp_path):
    out = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["PYTHON"] = sys.executable
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"  # two CPU devices: the sharded row runs
    proc = subprocess.run(
        ["bash", os.path.join(ROOT, "bench", "gpu.sh"), "--cpu", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["platform"] == "cpu" and result["policy"] == "mixed_bfloat16"
    assert result["bf16_matmul_peak_tflops"] > 0
    rows = result["configs"]["tiny"]["rows"]
    assert rows["keras_tfm"]["tokens_per_s"] > 0 and 0 < rows["keras_tfm"]["mfu"] < 1.5
    assert rows["generation"]["tokens_per_s"] > 0
    assert rows["sharded"]["tokens_per_s"] > 0 and "1 x 2 mesh of 2 devices" in rows["sharded"]["what"]
    assert ("torch" in rows) == (importlib.util.find_spec("torch") is not None)
    assert "tokens/s" in proc.stdout and "MFU" in proc.stdout
