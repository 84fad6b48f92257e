"""keras_tfm: Transformers for Keras 3 / TensorFlow."""

import os as _os

_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"

from keras_tfm import layers  # noqa: E402,F401
