"""Training diagnostics as Keras callbacks.

* `GradientNormMonitor`: global and per-block gradient norms on a fixed probe
  batch, every `every_n_steps` steps.
* `LossSpikeDetector`: flags batches whose loss exceeds `factor` times a
  running median (or EMA) of the recent batch losses.
* `AttentionEntropyMonitor`: attention entropy per layer and head on a fixed
  probe batch (attention collapse / uniform attention check).

Every callback writes its values into the `logs` dict that Keras passes to
callbacks, so that they appear in `model.fit(...)`'s `History` (epoch logs;
the values of the last measurement of the epoch), and, when `log_dir` is
given, to TensorBoard scalars (`tf.summary`; needs TensorFlow) at every measurement, with the
global training step as the step. Each callback also keeps its own full
record in `self.records` (a list of `(step, {name: value})`).

Put these callbacks before any callback that reads the logs (e.g.
`CSVLogger`, `TensorBoard`); `History` is always last, so it sees them.

They run on the TensorFlow, JAX and PyTorch backends: gradients come from
`tf.GradientTape`, `jax.grad` of `model.compute_loss_and_updates`, or
`torch.autograd.grad`.
"""

import math
import sys
import warnings
from collections import deque

import keras
import numpy as np

from keras_tfm.backend import require_tensorflow
from keras_tfm.checks import check_positive_int
from keras_tfm.inspection import attention_model, transformer_blocks


def _check_positive_float(name, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"`{name}` must be a positive finite number; received {value!r}.")
    return float(value)


def _unpack_probe(probe_data, name="probe_data"):
    """(x, y, sample_weight) from a tuple, or the first batch of a tf.data.Dataset."""
    tf = sys.modules.get("tensorflow")  # a tf.data.Dataset implies TensorFlow is loaded
    if tf is not None and isinstance(probe_data, tf.data.Dataset):
        probe_data = next(iter(probe_data))
    if not isinstance(probe_data, (tuple, list)):
        return probe_data, None, None
    if len(probe_data) == 1:
        return probe_data[0], None, None
    if len(probe_data) == 2:
        return probe_data[0], probe_data[1], None
    if len(probe_data) == 3:
        return tuple(probe_data)
    raise ValueError(
        f"`{name}` must be x, (x, y) or (x, y, sample_weight); received a sequence of {len(probe_data)}."
    )


class _DiagnosticCallback(keras.callbacks.Callback):
    """Shared logic: global step counter, TensorBoard writer, records."""

    def __init__(self, log_dir=None, every_n_steps=None):
        super().__init__()
        self.log_dir = None if log_dir is None else str(log_dir)
        self.every_n_steps = check_positive_int("every_n_steps", every_n_steps, allow_none=True)
        self.records = []
        self.step = 0
        self._writer = None
        self._last = {}

    def _write(self, values, step):
        if self.log_dir is None:
            return
        tf = require_tensorflow(f"{type(self).__name__}(log_dir=...) (TensorBoard scalars)")
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        with self._writer.as_default():
            for name, value in values.items():
                tf.summary.scalar(name, float(value), step=int(step))

    def _record(self, values, step, logs=None):
        values = {k: float(v) for k, v in values.items()}
        self.records.append((int(step), values))
        self._last = values
        self._write(values, step)
        if logs is not None:
            logs.update(values)

    def _due(self):
        return self.every_n_steps is not None and self.step % self.every_n_steps == 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None and self._last:
            logs.update(self._last)


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


class GradientNormMonitor(_DiagnosticCallback):
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
        probe_data,
        every_n_steps=100,
        per_layer=True,
        training=False,
        log_dir=None,
        use_tf_function=True,
    ):
        super().__init__(log_dir=log_dir, every_n_steps=check_positive_int("every_n_steps", every_n_steps))
        self.x, self.y, self.sample_weight = _unpack_probe(probe_data)
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

    def measure(self):
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

    def on_train_begin(self, logs=None):
        self._fn = None
        self._record(self.measure(), self.step)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self._due():
            self._record(self.measure(), self.step, logs)


class LossSpikeDetector(_DiagnosticCallback):
    """Flags training batches whose loss jumps above its recent level.

        spike at step t  ⇔  loss_t > factor · reference_t   (or loss_t is NaN/inf)

    with `reference_t` the median of the last `window` non-spike batch losses
    (`mode="median"`) or their exponential moving average with decay
    `ema_decay` (`mode="ema"`), once `warmup` losses have been seen. Spikes do
    not update the reference. Losses are assumed positive (cross-entropy).

    Keras reports the epoch's *running mean* loss in batch logs; the batch's own
    loss is recovered exactly from the loss tracker's (total, count) difference
    (falling back to differencing the running mean, which assumes equal batch
    sizes).

    Args:
        factor: spike threshold (> 1).
        window: number of recent losses for the median.
        mode: "median" or "ema".
        ema_decay: EMA decay in (0, 1).
        warmup: losses needed before detection starts.
        stop_training: set `model.stop_training = True` at the first spike.
        warn: emit a `UserWarning` for each spike.
        log_dir: TensorBoard log directory: `batch_loss`, `loss_reference`,
            `loss_spike` at every step.

    Attributes:
        spikes: list of `(step, loss, reference)`.
        losses: list of `(step, batch loss)` of every training batch.

    Logs: batch logs `loss_spike` 0/1 and `batch_loss`; epoch logs `loss_spike`
    (1 if the epoch had a spike) and `loss_spikes` (their number).
    """

    MODES = ("median", "ema")

    def __init__(
        self,
        factor=2.0,
        window=50,
        mode="median",
        ema_decay=0.9,
        warmup=10,
        stop_training=False,
        warn=True,
        log_dir=None,
    ):
        super().__init__(log_dir=log_dir)
        self.factor = _check_positive_float("factor", factor)
        if self.factor <= 1.0:
            raise ValueError(f"`factor` must be > 1; received {factor!r}.")
        self.window = check_positive_int("window", window)
        if mode not in self.MODES:
            raise ValueError(f"Unknown `mode` {mode!r}; expected one of {list(self.MODES)}.")
        self.mode = mode
        if (
            isinstance(ema_decay, bool)
            or not isinstance(ema_decay, (int, float))
            or not 0.0 < ema_decay < 1.0
        ):
            raise ValueError(f"`ema_decay` must be in (0, 1); received {ema_decay!r}.")
        self.ema_decay = float(ema_decay)
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
            raise ValueError(f"`warmup` must be an int >= 1; received {warmup!r}.")
        self.warmup = warmup
        self.stop_training = bool(stop_training)
        self.warn = bool(warn)
        self.spikes = []
        self.losses = []
        self._history = deque(maxlen=self.window)
        self._ema = None
        self._seen = 0

    def reference(self):
        """The current reference loss (None during warmup)."""
        if self._seen < self.warmup:
            return None
        if self.mode == "median":
            return float(np.median(self._history))
        return self._ema

    def update(self, loss, step=None):
        """Feeds one batch loss; returns True if it is a spike."""
        step = self.step if step is None else step
        loss = float(loss)
        ref = self.reference()
        spike = not math.isfinite(loss) or (ref is not None and loss > self.factor * ref)
        if spike:
            self.spikes.append((int(step), loss, ref))
            self._epoch_spikes += 1
            if self.warn:
                warnings.warn(
                    f"Loss spike at step {step}: loss {loss:.4g} > {self.factor:g} × {self.mode} {ref}.",
                    stacklevel=2,
                )
            if self.stop_training and self.model is not None:
                self.model.stop_training = True
        else:
            self._history.append(loss)
            self._ema = (
                loss if self._ema is None else self.ema_decay * self._ema + (1 - self.ema_decay) * loss
            )
            self._seen += 1
        return spike

    _epoch_spikes = 0

    def _tracker(self):
        tracker = getattr(self.model, "_loss_tracker", None)
        if tracker is None or not hasattr(tracker, "total") or not hasattr(tracker, "count"):
            return None
        return tracker

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_spikes = 0
        self._prev = (0.0, 0.0)
        self._batches = 0

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if not hasattr(self, "_prev"):
            self.on_epoch_begin(0)
        tracker = self._tracker()
        loss = None
        if tracker is not None:
            total, count = float(tracker.total.numpy()), float(tracker.count.numpy())
            if count > self._prev[1]:
                loss = (total - self._prev[0]) / (count - self._prev[1])
            self._prev = (total, count)
        if loss is None and logs is not None and "loss" in logs:
            mean = float(logs["loss"])
            k = self._batches + 1
            loss = k * mean - (k - 1) * getattr(self, "_prev_mean", 0.0) if k > 1 else mean
            self._prev_mean = mean
        self._batches += 1
        if loss is None:
            return
        ref = self.reference()
        self.losses.append((self.step, loss))
        spike = self.update(loss, self.step)
        values = {"batch_loss": loss, "loss_spike": float(spike)}
        if logs is not None:
            logs.update(values)
        if ref is not None:
            values["loss_reference"] = ref
        self._write(values, self.step)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["loss_spike"] = float(self._epoch_spikes > 0)
            logs["loss_spikes"] = float(self._epoch_spikes)


class AttentionEntropyMonitor(_DiagnosticCallback):
    """Attention entropy per layer and head on a fixed probe batch.

        H(layer, head) = mean over valid queries q of −Σ_k p_qk log p_qk

    over the keys q may attend to (causal and padding masks; see
    `keras_tfm.inspection.attention_entropy`). A head whose normalised entropy
    H / log(n_q) falls below `collapse_threshold` attends to one key only
    ("attention collapse"); one above `uniform_threshold` averages uniformly.

    Args:
        probe_inputs: model inputs (not labels) of the probe batch: int ids
            (B, T), a dict for multi-input models, or `(x, y)` (y ignored), or
            a `tf.data.Dataset` whose first batch is used.
        every_n_steps: measure every N steps; None (default): at each epoch end.
        padding_mask: optional (B, T) padding mask of the probe (1 = token);
            otherwise taken from a "padding_mask" input of a dict probe.
        collapse_threshold, uniform_threshold: normalised-entropy limits.
        log_dir: TensorBoard log directory.

    Logs: `attention_entropy/<layer>/head_<h>` (nats), `attention_entropy/<layer>/mean`,
    `attention_entropy/mean`, `attention_collapsed_heads`, `attention_uniform_heads`.

    Attributes:
        flags: list of `(step, layer, head, "collapsed" | "uniform", normalised entropy)`.
    """

    def __init__(
        self,
        probe_inputs,
        every_n_steps=None,
        padding_mask=None,
        collapse_threshold=0.1,
        uniform_threshold=0.98,
        log_dir=None,
    ):
        super().__init__(log_dir=log_dir, every_n_steps=every_n_steps)
        x, _, _ = _unpack_probe(probe_inputs, "probe_inputs")
        self.x = x
        if padding_mask is None and isinstance(x, dict) and "padding_mask" in x:
            padding_mask = x["padding_mask"]
        self.padding_mask = None if padding_mask is None else np.asarray(padding_mask).astype(bool)
        for name, value in (
            ("collapse_threshold", collapse_threshold),
            ("uniform_threshold", uniform_threshold),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"`{name}` must be in [0, 1]; received {value!r}.")
        self.collapse_threshold = float(collapse_threshold)
        self.uniform_threshold = float(uniform_threshold)
        self.flags = []

    def measure(self):
        """Computes the entropies now; returns {name: float}."""
        from keras_tfm.inspection import attention_entropy

        blocks = {b.name: b for b in transformer_blocks(self.model)}
        maps = attention_model(self.model)(self.x, training=False)
        values, all_heads, collapsed, uniform = {}, [], 0, 0
        for name, w in maps.items():
            w = np.asarray(keras.ops.convert_to_numpy(w))
            block = blocks.get(name.split("_call")[0])
            causal = bool(getattr(block, "causal", False))
            key_mask = (
                self.padding_mask
                if self.padding_mask is not None and w.shape[-1] == self.padding_mask.shape[-1]
                else None
            )
            ent = attention_entropy(w, causal=causal, key_mask=key_mask)
            norm = attention_entropy(w, causal=causal, key_mask=key_mask, normalize=True)
            for h, (e, n) in enumerate(zip(ent, norm)):
                values[f"attention_entropy/{name}/head_{h}"] = e
                if n < self.collapse_threshold:
                    collapsed += 1
                    self.flags.append((self.step, name, h, "collapsed", float(n)))
                elif n > self.uniform_threshold:
                    uniform += 1
                    self.flags.append((self.step, name, h, "uniform", float(n)))
            values[f"attention_entropy/{name}/mean"] = float(np.nanmean(ent))
            all_heads.extend(ent.tolist())
        values["attention_entropy/mean"] = float(np.nanmean(all_heads))
        values["attention_collapsed_heads"] = float(collapsed)
        values["attention_uniform_heads"] = float(uniform)
        return values

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self._due():
            self._record(self.measure(), self.step, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.every_n_steps is None:
            self._record(self.measure(), self.step, logs)
        else:
            super().on_epoch_end(epoch, logs)
