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


def _shape_text(shape):
    """`[None, None]` → "[B, T]"-like text: "[?, ?]" (a scalar: "[] (a scalar)")."""
    dims = ["?" if d is None else str(d) for d in shape.as_list()]
    return f"[{', '.join(dims)}]" + (" (a scalar)" if not dims else "")


def request_tensors(name, specs, inputs):
    """The tensors of a request to signature `name`, each checked against its input spec.

    Args:
        name: the signature (named in the errors).
        specs: {input name: tf.TensorSpec} of the signature.
        inputs: {input name: value} (NumPy arrays, lists, Python scalars or tensors).

    Returns:
        {input name: tf.Tensor} of the spec's dtype.

    Raises:
        ValueError: an input the signature does not take, one it needs and did not get, or a value
            whose shape does not fit the input's (a list for a scalar, a 2-D batch for a 1-D one).
        TypeError: a value that is not of the input's dtype (a number for a string input, 1.5 for an
            int32 one).
    """
    unknown = sorted(set(inputs) - set(specs))
    missing = sorted(set(specs) - set(inputs))
    if unknown or missing:
        raise ValueError(
            f"the {name!r} signature takes the inputs {sorted(specs)}; "
            + (f"unknown: {unknown}" if unknown else f"missing: {missing}")
            + "."
        )
    feed = {}
    for key, value in inputs.items():
        spec = specs[key]
        expected = f"{spec.dtype.name} of shape {_shape_text(spec.shape)}"
        try:
            tensor = value if isinstance(value, tf.Tensor) else tf.constant(value, dtype=spec.dtype)
        except (TypeError, ValueError):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise TypeError(
                f"`{key}` of the {name!r} signature must be {expected}; received {shown}."
            ) from None
        if tensor.dtype != spec.dtype:
            raise TypeError(
                f"`{key}` of the {name!r} signature must be {expected}; received dtype {tensor.dtype.name}."
            )
        if not spec.shape.is_compatible_with(tensor.shape):
            raise ValueError(
                f"`{key}` of the {name!r} signature must be {expected}; received shape "
                f"{_shape_text(tensor.shape)}."
            )
        feed[key] = tensor
    return feed


def call_signature(loaded, name, **inputs):
    """Calls signature `name` with numpy-converted inputs; returns numpy outputs
    (strings decoded to str). The inputs are checked first (`request_tensors`): an error names the
    input, its dtype and shape."""
    fn = loaded.signatures[name]
    out = fn(**request_tensors(name, fn.structured_input_signature[1], inputs))
    result = {}
    for key, value in out.items():
        value = value.numpy()
        if value.dtype == object:
            value = np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(value)
        result[key] = value
    return result
