"""Attention: the core, its implementations, masks, score biases and the multi-head layers."""

# Registered attention-core implementations (import for the side effect).
from keras_tfm.layers.attention import chunked, linear, local  # noqa: F401
