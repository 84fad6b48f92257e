"""Position-wise feed-forward network."""

import keras
from keras import ops

from keras_tfm.checks import check_choice, check_positive_int, check_rate

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")


def get_activation(name):
    """Returns the activation function for one of `ACTIVATIONS`."""
    check_choice("activation", name, ACTIVATIONS)
    if name == "relu":
        return ops.relu
    if name == "gelu":
        return lambda x: ops.gelu(x, approximate=False)
    if name == "gelu_tanh":
        return lambda x: ops.gelu(x, approximate=True)
    return ops.silu


@keras.saving.register_keras_serializable(package="keras_tfm")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network, applied to every position alike.

        FFN(x) = act(x W_1 + b_1) W_2 + b_2,   act ∈ {ReLU, GELU, GELU-tanh, SiLU}

    Args:
        d_ff: inner width (4·d_model in most models).
        activation: "relu" (Vaswani), "gelu" (BERT), "gelu_tanh" (GPT-2) or "silu".
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
        d_ff,
        activation="relu",
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_ff = check_positive_int("d_ff", d_ff)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = bool(use_bias)
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
        self.inner_dense = keras.layers.Dense(self.d_ff, name="inner", **common)
        self.inner_dense.build(input_shape)
        self.output_dense = keras.layers.Dense(self.output_dim or d_model, name="output", **common)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name="dropout")

    def call(self, inputs, training=None):
        x = self._act(self.inner_dense(inputs))
        if self.dropout > 0:
            x = self.dropout_layer(x, training=training)
        return self.output_dense(x)

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
