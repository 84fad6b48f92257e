"""AttentionEntropyMonitor: attention entropy per layer and head on a fixed probe batch."""

import os
from typing import Any

import keras
import numpy as np

from keras_tfm.analysis.inspection import attention_entropy, attention_model, transformer_blocks
from keras_tfm.callbacks.diagnostic import DiagnosticCallback, unpack_probe
from keras_tfm.checks import check_closed_rate


class AttentionEntropyMonitor(DiagnosticCallback):
    """Attention entropy per layer and head on a fixed probe batch.

        H(layer, head) = mean over valid queries q of −Σ_k p_qk log p_qk

    over the keys q may attend to (causal and padding masks; see
    `keras_tfm.analysis.inspection.attention_entropy`). A head whose normalised entropy
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
        probe_inputs: Any,
        every_n_steps: int | None = None,
        padding_mask: np.ndarray | None = None,
        collapse_threshold: float = 0.1,
        uniform_threshold: float = 0.98,
        log_dir: str | os.PathLike | None = None,
    ):
        super().__init__(log_dir=log_dir, every_n_steps=every_n_steps)
        x, _, _ = unpack_probe(probe_inputs, "probe_inputs")
        self.x = x
        if padding_mask is None and isinstance(x, dict) and "padding_mask" in x:
            padding_mask = x["padding_mask"]
        self.padding_mask = None if padding_mask is None else np.asarray(padding_mask).astype(bool)
        self.collapse_threshold = check_closed_rate("collapse_threshold", collapse_threshold)
        self.uniform_threshold = check_closed_rate("uniform_threshold", uniform_threshold)
        self.flags = []

    def measure(self) -> dict[str, float]:
        """Computes the entropies now; returns {name: float}."""
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

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        super().on_train_batch_end(batch, logs)
        if self._due():
            self._record(self.measure(), self.step, logs)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.every_n_steps is None:
            self._record(self.measure(), self.step, logs)
        else:
            super().on_epoch_end(epoch, logs)
