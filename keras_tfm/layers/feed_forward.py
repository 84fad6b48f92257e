"""Position-wise feed-forward network."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_choice, check_positive_int, check_rate
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.quantization import QuantizeSublayersMixin

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "geglu_tanh")
#: Gated linear units (Shazeer 2020): activation of the gate branch ("geglu_tanh": the tanh
#: form of GELU, T5 v1.1 / Flan-T5's "gated-gelu").
GATED_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh"}


def get_activation(name: str) -> Any:
    """Returns the activation function for one of `ACTIVATIONS` (for a gated
    unit, the activation of its gate: SiLU for "swiglu", GELU for "geglu", tanh-GELU for
    "geglu_tanh")."""
    check_choice("activation", name, ACTIVATIONS)
    name = GATED_ACTIVATIONS.get(name, name)
    if name == "relu":
        return ops.relu
    if name == "gelu":
        return lambda x: ops.gelu(x, approximate=False)
    if name == "gelu_tanh":
        return lambda x: ops.gelu(x, approximate=True)
    return ops.silu


@keras.saving.register_keras_serializable(package="keras_tfm")
class FeedForward(QuantizeSublayersMixin, keras.layers.Layer):
    """Position-wise feed-forward network, applied to every position alike.

        FFN(x) = act(x W_1 + b_1) W_2 + b_2,   act ∈ {ReLU, GELU, GELU-tanh, SiLU}

    or, for the gated units "swiglu" / "geglu" / "geglu_tanh" (Shazeer 2020; LLaMA,
    PaLM, T5 v1.1), three matrices:

        FFN(x) = (act(x W_g + b_g) ⊙ (x W_1 + b_1)) W_2 + b_2,   act = SiLU / GELU / tanh-GELU

    Args:
        d_ff: inner width (4·d_model in most models).
        activation: "relu" (Vaswani), "gelu" (BERT), "gelu_tanh" (GPT-2), "silu",
            or the gated "swiglu" (LLaMA) / "geglu" / "geglu_tanh" (T5 v1.1), which add the gate matrix
            `gate_dense` (`d_ff` wide like `inner_dense`).
        dropout: dropout rate after the activation.
        use_bias: whether both linear maps have biases.
        output_dim: output width; defaults to the input width.
        kernel_initializer, bias_initializer: initializers of both linear maps.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(..., d_model)`.
        training: Python bool, enables dropout.

    Returns:
        `(..., output_dim)`.
    """

    def __init__(
        self,
        d_ff: int,
        activation: str = "relu",
        dropout: float = 0.0,
        use_bias: bool = True,
        output_dim: int | None = None,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_ff = check_positive_int("d_ff", d_ff)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = check_bool("use_bias", use_bias)
        self.output_dim = check_positive_int("output_dim", output_dim, allow_none=True)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self._act = get_activation(activation)
        self.supports_masking = True

    def build(self, input_shape):
        d_model = input_shape[-1]
        if d_model is None:
            raise ValueError("The last dimension of `inputs` must be known.")
        common = dict(
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
        )
        # clone_initializers: each matrix gets its own draw.
        self.inner_dense = keras.layers.Dense(self.d_ff, name="inner", **clone_initializers(common, "inner"))
        self.inner_dense.build(input_shape)
        self.output_dense = keras.layers.Dense(
            self.output_dim or d_model, name="output", **clone_initializers(common, "output")
        )
        self.output_dense.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.gate_dense = None
        if self.activation in GATED_ACTIVATIONS:
            self.gate_dense = keras.layers.Dense(self.d_ff, name="gate", **clone_initializers(common, "gate"))
            self.gate_dense.build(input_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name="dropout")

    def call(self, inputs: Any, training: bool | None = None):
        if self.gate_dense is not None:
            x = self._act(self.gate_dense(inputs)) * self.inner_dense(inputs)
        else:
            x = self._act(self.inner_dense(inputs))
        if self.dropout > 0:
            x = self.dropout_layer(x, training=training)
        return self.output_dense(x)

    def _quantizable_sublayers(self):
        return [self.inner_dense, self.gate_dense, self.output_dense]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_ff": self.d_ff,
                "activation": self.activation,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
