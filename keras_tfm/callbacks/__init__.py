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

One module per callback:

    diagnostic         DiagnosticCallback: step counter, records, logs, TensorBoard writer; probe batches
    gradient_norm      GradientNormMonitor (and the per-backend gradient function)
    loss_spike         LossSpikeDetector
    attention_entropy  AttentionEntropyMonitor
"""

from keras_tfm.callbacks.attention_entropy import AttentionEntropyMonitor
from keras_tfm.callbacks.diagnostic import DiagnosticCallback, unpack_probe
from keras_tfm.callbacks.gradient_norm import GradientNormMonitor
from keras_tfm.callbacks.loss_spike import LossSpikeDetector

__all__ = [
    "AttentionEntropyMonitor",
    "DiagnosticCallback",
    "GradientNormMonitor",
    "LossSpikeDetector",
    "unpack_probe",
]
