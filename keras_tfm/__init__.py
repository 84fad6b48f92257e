"""keras_tfm: Transformers for Keras 3 / TensorFlow.

Subpackages: `layers` (the core layers), `models` (BERT / GPT / seq2seq builders),
`data` (tokenizers and tf.data pipelines), `generation` (cached decoding, samplers,
beam search), `export` (SavedModel for TF Serving), plus `losses`, `metrics`,
`schedules`, `optimizers`, `callbacks`, `plotting` and `training`.
"""

import os as _os

_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"

# Importing registers every serialisable layer, loss, metric and schedule, so that
# `keras.saving.load_model` works after a plain `import keras_tfm`.
from keras_tfm import (  # noqa: E402,F401
    data,  # noqa: E402,F401
    generation,  # noqa: E402,F401
    layers,  # noqa: E402,F401
    losses,
    metrics,
    models,  # noqa: E402,F401
    optimizers,
    schedules,
)
