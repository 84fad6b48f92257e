"""keras_tfm: Transformers for Keras 3, one lecture idea per layer.

Subpackages written with `keras.ops`, on the TensorFlow, JAX and PyTorch backends: `layers` (the
lecture, one idea per layer), `models` (GPT, BERT, Seq2Seq, ViT; presets; LoRA), `losses`, `metrics`,
`schedules`, `optimizers`, `callbacks`, `training` (its compile helpers) and `analysis`. Built on
TensorFlow (see `keras_tfm.backend`): `tokenizers`, `data` (tf.data pipelines), `checkpoints`
(HuggingFace-layout checkpoints), `generation` (cached XLA decoding), `export` (TF Serving),
`training.train`, `recipes` and `cli` (the `keras-tfm` command). docs/development.md shows the tree.

keras_tfm never chooses the Keras backend: Keras reads it from `KERAS_BACKEND` or
`~/.keras/keras.json` (TensorFlow by default). Every subpackage is reachable as an
attribute after `import keras_tfm` (`keras_tfm.export.export_for_serving(...)`); the
TensorFlow-based ones are imported on first use.
"""

import importlib as _importlib
import importlib.util as _importlib_util

import keras as _keras

#: The package version (pyproject.toml reads it from here).
__version__ = "0.1.0"

__all__ = [
    "__version__",
    "analysis",
    "callbacks",
    "checkpoints",
    "cli",
    "data",
    "export",
    "generation",
    "layers",
    "losses",
    "metrics",
    "models",
    "optimizers",
    "recipes",
    "schedules",
    "tokenizers",
    "training",
]

# Importing registers every serialisable layer, loss, metric, schedule and model, so that
# `keras.saving.load_model` works after a plain `import keras_tfm` on any backend.
from keras_tfm import (  # noqa: E402,F401
    callbacks,
    layers,
    losses,
    metrics,
    models,
    optimizers,
    schedules,
)

_LAZY = (
    "analysis",
    "atomic_files",
    "backend",
    "checkpoints",
    "checks",
    "cli",
    "data",
    "export",
    "generation",
    "recipes",
    "tokenizers",
    "training",
)

if _keras.backend.backend() == "tensorflow":
    # TensorFlow is loaded anyway: register the tokenizers (Keras layers made of TF ops)
    # so that models saved with them load after `import keras_tfm`.
    from keras_tfm import tokenizers  # noqa: E402,F401


def __getattr__(name):
    """Imports the subpackage or module `name` on first access (`keras_tfm.export`, ...)."""
    if name in _LAZY or (
        not name.startswith("_") and _importlib_util.find_spec(f"keras_tfm.{name}") is not None
    ):
        module = _importlib.import_module(f"keras_tfm.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'keras_tfm' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
