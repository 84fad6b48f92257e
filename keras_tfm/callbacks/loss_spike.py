"""LossSpikeDetector: batch losses above `factor` times their recent median or EMA."""

import math
import os
import warnings
from collections import deque

import keras
import numpy as np

from keras_tfm.callbacks.diagnostic import DiagnosticCallback
from keras_tfm.checks import check_choice, check_float, check_open_rate, check_positive_int


class LossSpikeDetector(DiagnosticCallback):
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
        factor: float = 2.0,
        window: int = 50,
        mode: str = "median",
        ema_decay: float = 0.9,
        warmup: int = 10,
        stop_training: bool = False,
        warn: bool = True,
        log_dir: str | os.PathLike | None = None,
    ):
        super().__init__(log_dir=log_dir)
        self.factor = check_float("factor", factor, low=1.0, low_open=True)
        self.window = check_positive_int("window", window)
        self.mode = check_choice("mode", mode, self.MODES)
        self.ema_decay = check_open_rate("ema_decay", ema_decay)
        self.warmup = check_positive_int("warmup", warmup)
        self.stop_training = bool(stop_training)
        self.warn = bool(warn)
        self.spikes = []
        self.losses = []
        self._history = deque(maxlen=self.window)
        self._ema = None
        self._seen = 0

    def reference(self) -> float | None:
        """The current reference loss (None during warmup)."""
        if self._seen < self.warmup:
            return None
        if self.mode == "median":
            return float(np.median(self._history))
        return self._ema

    def update(self, loss: float, step: int | None = None) -> bool:
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
        """The compiled model's loss tracker (`model.metrics`' running-mean "loss"), or None.

        None on JAX: its trainer keeps metric values inside the compiled state during `fit`
        (the variables hold no value until the epoch ends), so the logs' running mean is used.
        """
        if keras.backend.backend() == "jax":
            return None
        for metric in getattr(self.model, "metrics", None) or ():
            if metric.name == "loss" and hasattr(metric, "total") and hasattr(metric, "count"):
                return metric
        return None

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._loss_metric = self._tracker()  # model.metrics walks the layers: once per epoch
        self._epoch_spikes = 0
        self._prev = (0.0, 0.0)
        self._batches = 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        super().on_train_batch_end(batch, logs)
        if not hasattr(self, "_prev"):
            self.on_epoch_begin(0)
        tracker = self._loss_metric
        loss = None
        if tracker is not None:
            total, count = (float(keras.ops.convert_to_numpy(v)) for v in (tracker.total, tracker.count))
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

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None:
            logs["loss_spike"] = float(self._epoch_spikes > 0)
            logs["loss_spikes"] = float(self._epoch_spikes)
