"""GradientNormMonitor: gradient norms on a fixed probe batch, on every Keras backend."""

import os
from typing import Any

import keras
import numpy as np

from keras_tfm.callbacks.diagnostic import DiagnosticCallback, unpack_probe
from keras_tfm.checks import check_positive_int


def _gradient_function(model, training, compile):
    """`(x, y, sample_weight) -> gradients of model.compute_loss` for the active Keras backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def tf_gradients(x, y, sample_weight):
            with tf.GradientTape() as tape:
                y_pred = model(x, training=training)
                loss = model.compute_loss(
                    x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
                )
            grads = tape.gradient(loss, model.trainable_variables)
            # IndexedSlices of embedding lookups → dense.
            return [None if g is None else tf.convert_to_tensor(g) for g in grads]

        return tf.function(tf_gradients) if compile else tf_gradients
    if backend == "jax":
        import jax

        def loss_fn(trainable, non_trainable, metrics, x, y, sample_weight):
            loss, _ = model.compute_loss_and_updates(
                trainable, non_trainable, metrics, x, y, sample_weight, training=training
            )
            return loss

        grad_fn = jax.grad(loss_fn)
        if compile:
            grad_fn = jax.jit(grad_fn)

        def jax_gradients(x, y, sample_weight):
            state = [
                [v.value for v in variables]
                for variables in (
                    model.trainable_variables,
                    model.non_trainable_variables,
                    model.metrics_variables,
                )
            ]
            return grad_fn(*state, x, y, sample_weight)

        return jax_gradients
    if backend == "torch":
        import torch

        def torch_gradients(x, y, sample_weight):
            y_pred = model(x, training=training)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)
            params = [v.value for v in model.trainable_variables]
            grads = torch.autograd.grad(loss, params, allow_unused=True)
            return [None if g is None else g.detach().cpu() for g in grads]

        return torch_gradients
    raise NotImplementedError(f"GradientNormMonitor does not support the {backend!r} backend.")


class GradientNormMonitor(DiagnosticCallback):
    """Logs the global gradient norm and one norm per top-level layer.

        grad_norm          = ‖∇_θ L(probe)‖₂                over all trainable variables
        grad_norm/<layer>  = ‖∇_{θ_layer} L(probe)‖₂      θ_layer: the trainable
                                                            variables of the top-level
                                                            layer (e.g. decoder_block_3)

    `L` is the model's compiled loss (`model.compute_loss`, including added
    losses) on a fixed probe batch, computed by a separate function (the
    weights are read, never changed; fit's train step and its metrics are not
    touched). A variable shared by several layers (tied embedding) counts for
    the first layer that owns it. Gradients of the unscaled loss are in the
    variables' dtype.

    Args:
        probe_data: `(x, y)` or `(x, y, sample_weight)` (arrays/tensors), or a
            `tf.data.Dataset` whose first batch is used.
        every_n_steps: measure every N training steps (and at step 0, before
            training); default 100.
        per_layer: also log the per-layer norms.
        training: run the model in training mode (dropout on) for the probe.
        log_dir: TensorBoard log directory (optional).
        use_tf_function: compile the probe computation (`tf.function` on
            TensorFlow, `jax.jit` on JAX; PyTorch runs eagerly). False: run it
            eagerly, quicker for a handful of measurements.

    Logs: `grad_norm`, `grad_norm/<layer>` (epoch logs: the last measurement).
    """

    def __init__(
        self,
        probe_data: Any,
        every_n_steps: int = 100,
        per_layer: bool = True,
        training: bool = False,
        log_dir: str | os.PathLike | None = None,
        use_tf_function: bool = True,
    ):
        super().__init__(log_dir=log_dir, every_n_steps=check_positive_int("every_n_steps", every_n_steps))
        self.x, self.y, self.sample_weight = unpack_probe(probe_data)
        self.per_layer = bool(per_layer)
        self.training = bool(training)
        self.use_tf_function = bool(use_tf_function)
        self._fn = None

    def _groups(self):
        owner = {}
        for layer in self.model.layers:
            for v in layer.trainable_variables:
                owner.setdefault(id(v), layer.name)
        return [owner.get(id(v), "other") for v in self.model.trainable_variables]

    def _build(self):
        model = self.model
        if not getattr(model, "compiled", False):
            raise ValueError("GradientNormMonitor needs a compiled model (`model.compile(loss=...)`).")
        groups = self._groups()
        names = list(dict.fromkeys(groups))
        index = [names.index(g) for g in groups]
        self._names = names
        self._fn = _gradient_function(model, self.training, self.use_tf_function)
        self._index = index

    def measure(self) -> dict[str, float]:
        """Computes the norms now; returns {name: float}."""
        if self._fn is None:
            self._build()
        grads = self._fn(self.x, self.y, self.sample_weight)
        squares = np.zeros(len(self._names), np.float64)
        for i, g in zip(self._index, grads):
            if g is not None:
                squares[i] += float(np.sum(np.square(keras.ops.convert_to_numpy(g).astype(np.float64))))
        per = np.sqrt(squares)
        values = {"grad_norm": float(np.sqrt(squares.sum()))}
        if self.per_layer:
            for name, value in zip(self._names, per):
                values[f"grad_norm/{name}"] = float(value)
        return values

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._fn = None
        self._record(self.measure(), self.step)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        super().on_train_batch_end(batch, logs)
        if self._due():
            self._record(self.measure(), self.step, logs)
