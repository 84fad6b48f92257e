"""Distribution strategies and mixed precision for `train` (TensorFlow's `tf.distribute`).

* `distribution_strategy(name)`: "default" | "mirrored" | "multi_worker".
* `is_chief(strategy)`: whether this worker writes logs and backups.
* `set_precision(policy)`: "float32" | "mixed_float16" | "mixed_bfloat16"
  (Keras wraps the optimizer in a `LossScaleOptimizer` under mixed_float16
  when the model is built after the policy is set).
"""

from collections.abc import Sequence

import keras
import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi_worker")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def distribution_strategy(
    name: str = "default", devices: Sequence[str] | None = None
) -> tf.distribute.Strategy:
    """Returns a `tf.distribute.Strategy` by name.

    Args:
        name: "default" (the current/default strategy: one device),
            "mirrored" (`MirroredStrategy`: synchronous data parallelism over
            the local GPUs, or over `devices`) or "multi_worker"
            (`MultiWorkerMirroredStrategy`; the cluster comes from the
            `TF_CONFIG` environment variable, set on every worker).
        devices: optional list of device names for "mirrored", e.g.
            `["/cpu:0", "/cpu:1"]` after splitting the CPU into logical
            devices with `tf.config.set_logical_device_configuration`.

    Returns:
        A `tf.distribute.Strategy`. Build and compile the model inside
        `strategy.scope()` (`train` does it when given a model factory); the
        batch size of the data is the *global* batch, split over replicas.

    Raises:
        ValueError: unknown name, or `devices` given for another strategy.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; expected one of {list(STRATEGIES)}.")
    if devices is not None and name != "mirrored":
        raise ValueError(f"`devices` is only used by the 'mirrored' strategy; received name={name!r}.")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    return tf.distribute.MultiWorkerMirroredStrategy()


def is_chief(strategy: tf.distribute.Strategy | None = None) -> bool:
    """True on the worker that writes logs and backups (always True off multi-worker)."""
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    has_chief = "chief" in (resolver.cluster_spec().as_dict() or {})
    return task_type == "worker" and task_id == 0 and not has_chief


def set_precision(policy: str = "float32") -> str:
    """Sets the global Keras dtype policy; build models after calling it.

    Args:
        policy: "float32", "mixed_float16" (float16 compute, float32
            variables; `model.compile` then wraps the optimizer in a
            dynamic `keras.optimizers.LossScaleOptimizer`) or
            "mixed_bfloat16" (no loss scaling needed).

    Returns:
        The previous policy name (to restore it later).
    """
    if policy not in PRECISIONS:
        raise ValueError(f"Unknown precision {policy!r}; expected one of {list(PRECISIONS)}.")
    previous = keras.config.dtype_policy().name
    keras.config.set_dtype_policy(policy)
    return previous
