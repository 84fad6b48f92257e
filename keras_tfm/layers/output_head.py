"""Projection from hidden states to the vocabulary, and temperature softmax."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_choice, check_positive_float, check_positive_int
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.quantization import QuantizeSublayersMixin
from keras_tfm.tensor_checks import check_positive_value

HEAD_OUTPUTS = ("logits", "probabilities")


def softmax_with_temperature(logits: Any, temperature: Any = 1.0) -> Any:
    """p_i = exp(z_i / τ) / Σ_j exp(z_j / τ), in float32.

    τ → 0 approaches one-hot argmax; τ > 1 flattens the distribution.
    `temperature` may be a Python float or a tensor; it must be > 0.
    """
    temperature = check_positive_value("temperature", temperature)  # NaN, inf, 0 and < 0 refused
    logits = ops.cast(logits, "float32")
    return ops.softmax(logits / ops.cast(temperature, "float32"), axis=-1)


@keras.saving.register_keras_serializable(package="keras_tfm")
class OutputHead(QuantizeSublayersMixin, keras.layers.Layer):
    """Linear map to vocabulary logits, optionally followed by a softmax with
    temperature:

        z = h W + b,        p = softmax(z / τ)

    Logits and probabilities are float32 under any dtype policy. For a
    weight-tied head use `TokenEmbedding(...)(h, reverse=True)` (z = h Eᵀ),
    then `softmax_with_temperature`.

    Args:
        vocabulary_size: output size `V`.
        use_bias: whether the projection has a bias.
        output: "logits" or "probabilities".
        temperature: default softmax temperature τ > 0 (for "probabilities").
        kernel_initializer: initializer of `W`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(..., d_model)`.
        temperature: optional override of τ for this call.

    Returns:
        float32 `(..., V)` logits or probabilities.
    """

    def __init__(
        self,
        vocabulary_size: int,
        use_bias: bool = True,
        output: str = "logits",
        temperature: float = 1.0,
        kernel_initializer: Any = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = check_positive_int("vocabulary_size", vocabulary_size)
        self.use_bias = check_bool("use_bias", use_bias)
        self.output_type = check_choice("output", output, HEAD_OUTPUTS)
        self.temperature = check_positive_float("temperature", temperature)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        self.dense = keras.layers.Dense(
            self.vocabulary_size,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer, "logits"),
            dtype=self.dtype_policy,
            name="logits",
        )
        self.dense.build(input_shape)

    def call(self, inputs: Any, temperature: Any = None):
        logits = ops.cast(self.dense(inputs), "float32")
        if self.output_type == "logits":
            return logits
        return softmax_with_temperature(logits, self.temperature if temperature is None else temperature)

    def _quantizable_sublayers(self):
        return [self.dense]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocabulary_size,)

    def compute_output_spec(self, inputs, temperature=None):
        # Logits/probabilities are float32 under every dtype policy.
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "use_bias": self.use_bias,
                "output": self.output_type,
                "temperature": self.temperature,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class LogitsBias(keras.layers.Layer):
    """A learned bias over the vocabulary, added to float32 logits:

        z' = z + b,    b ∈ R^V  (initially zeros)

    The `final_logits_bias` of BART and Marian, which add it to their tied
    output projection h Eᵀ.

    Args:
        vocabulary_size: `V`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: logits `(..., V)`.

    Returns:
        float32 `(..., V)`.
    """

    def __init__(self, vocabulary_size: int, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = check_positive_int("vocabulary_size", vocabulary_size)
        self.supports_masking = True

    def build(self, input_shape=None):
        self.bias = self.add_weight(name="bias", shape=(self.vocabulary_size,), initializer="zeros")

    def call(self, inputs: Any):
        return ops.cast(inputs, "float32") + ops.cast(self.bias, "float32")

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary_size": self.vocabulary_size})
        return config
