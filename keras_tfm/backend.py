"""Which parts of keras_tfm need TensorFlow, and a clear error when it is missing.

The core (`layers`, `models`, `losses`, `metrics`, `schedules`, `optimizers`,
`callbacks`) is written with `keras.ops` and runs on the TensorFlow, JAX and
PyTorch backends; keras_tfm never chooses the backend (Keras reads it from
`KERAS_BACKEND` or `~/.keras/keras.json`). The parts built on TensorFlow itself
— `data` (tf.data pipelines, tokenizers made of TF ops), `export` (SavedModel
for TF Serving), `training` (tf.distribute strategies, resumable tf.data) — import TensorFlow when they are first used and
call `require_tensorflow` to say so when it is not there.
"""

import importlib
import importlib.util

import keras

#: Subpackages that are built on TensorFlow (see the module docstring).
TENSORFLOW_ONLY = ("data", "export", "training", "recipes", "inspection", "cli")


def backend():
    """The Keras backend name: "tensorflow", "jax", "torch" or "numpy"."""
    return keras.backend.backend()


def tensorflow_available():
    """Whether TensorFlow can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):  # `sys.modules["tensorflow"] = None` raises ValueError
        return False


def require_tensorflow(feature, *, backend_too=False):
    """Imports and returns TensorFlow, or raises an ImportError that names `feature`.

    Args:
        feature: what needs TensorFlow, e.g. "keras_tfm.export" (used in the
            message).
        backend_too: also require the TensorFlow *Keras backend* (for code that
            runs a Keras model inside TF graphs, e.g. SavedModel export or the
            cached generation loop); raises a RuntimeError naming the active
            backend otherwise.

    Returns:
        The `tensorflow` module.
    """
    try:
        tf = importlib.import_module("tensorflow")
    except ImportError as error:
        raise ImportError(
            f"{feature} needs TensorFlow, which is not installed (`pip install tensorflow`); "
            f"the Keras backend is {backend()!r}. keras_tfm.layers, models, losses, metrics, "
            "schedules, optimizers and callbacks work without it."
        ) from error
    if backend_too and backend() != "tensorflow":
        raise RuntimeError(
            f"{feature} needs the TensorFlow Keras backend; the active backend is {backend()!r}. "
            "Set KERAS_BACKEND=tensorflow before importing keras (a `.keras` file saved on any "
            "backend loads there)."
        )
    return tf
