"""Runs tests/serving_client.py in a fresh process (keras and keras_tfm blocked there)."""

import json
import os
import subprocess
import sys

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_client.py")


def run_serving_client(spec, folder, timeout=900):
    """The client's result dict for `spec` (its format: serving_client.py's docstring), with the
    spec and the result written in `folder`; fails the test on a non-zero exit status."""
    spec_path, result_path = os.path.join(folder, "spec.json"), os.path.join(folder, "result.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    proc = subprocess.run(
        [sys.executable, CLIENT, spec_path, result_path],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        cwd=str(folder),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(result_path, encoding="utf-8") as f:
        return json.load(f)
