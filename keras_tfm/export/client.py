"""Loading and querying exported versions with TensorFlow only (no Keras).

Nothing here imports Keras: `tests/serving_client.py` and `bench/serve_latency.py`
run the same logic in processes where importing `keras` fails.
"""

import os
from typing import Any

import numpy as np
import tensorflow as tf


def list_versions(base_dir: str | os.PathLike) -> list[int]:
    """Sorted integer versions present under `base_dir` (TF Serving layout)."""
    if not os.path.isdir(base_dir):
        return []
    return sorted(
        int(n) for n in os.listdir(base_dir) if n.isdigit() and os.path.isdir(os.path.join(base_dir, n))
    )


def latest_version(base_dir: str | os.PathLike) -> int | None:
    """Largest integer version directory under `base_dir` (None if none)."""
    versions = list_versions(base_dir)
    return versions[-1] if versions else None


def resolve_version_dir(path: str | os.PathLike, version: int | None = None) -> str:
    """`path` is a model base dir (`saved_models/NAME`, versions inside) or a
    version dir (`saved_models/NAME/3`, holding `saved_model.pb`)."""
    path = os.fspath(path)
    if version is None and os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    if version is None:
        version = latest_version(path)
        if version is None:
            raise FileNotFoundError(
                f"No model version (integer sub-directory with saved_model.pb) under {path!r}."
            )
    directory = os.path.join(path, str(int(version)))
    if not os.path.isfile(os.path.join(directory, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel at {directory!r}.")
    return directory


def load_served(path: str | os.PathLike, version: int | None = None) -> Any:
    """`tf.saved_model.load` of a version (latest by default)."""
    return tf.saved_model.load(resolve_version_dir(path, version))


def call_signature(loaded, name, **inputs):
    """Calls signature `name` with numpy-converted inputs; returns numpy outputs
    (strings decoded to str)."""
    fn = loaded.signatures[name]
    specs = fn.structured_input_signature[1]
    feed = {k: tf.constant(v, dtype=specs[k].dtype) for k, v in inputs.items()}
    out = fn(**feed)
    result = {}
    for key, value in out.items():
        value = value.numpy()
        if value.dtype == object:
            value = np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(value)
        result[key] = value
    return result
