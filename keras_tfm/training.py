"""Training utilities shared by the examples and the `keras-tfm` CLI.

Everything here drives plain `model.fit`; there is no per-step Python work
(data comes from `tf.data` with prefetch, `steps_per_execution` groups steps
into one graph call).

* `distribution_strategy(name)`: "default" | "mirrored" | "multi_worker".
* `set_precision(policy)`: "float32" | "mixed_float16" | "mixed_bfloat16"
  (Keras wraps the optimizer in a `LossScaleOptimizer` under mixed_float16
  when the model is built after the policy is set).
* `AtomicBackupAndRestore`: `keras.callbacks.BackupAndRestore` whose backups
  are written atomically (temporary name, fsync, `os.replace`) and which
  resumes in the middle of an epoch, at the step of the last backup, when used
  through `train`.
* `default_callbacks(...)`: TensorBoard + backup + NaN guard.
* `indexed_batches(batch_fn, ...)`: a resumable `tf.data` pipeline whose
  element `i` depends only on `(seed, i)`.
* `train(model, data, steps=..., ...)`: the loop the examples and the CLI share.

Why a subclass of `BackupAndRestore`: in Keras 3.15 the stock callback writes
`latest.weights.h5` and `training_metadata.json` in place, one after the
other; a process killed during (or between) the two writes leaves a truncated
file or weights that do not match the metadata. It also restores only the
epoch number, so a run killed mid-epoch starts that epoch again from batch 0.
"""

import glob
import json
import math
import os
import tempfile
import time

import keras
import tensorflow as tf

from keras_tfm.data.pipelines import PREFETCH_BATCHES

__all__ = [
    "AtomicBackupAndRestore",
    "StepTimer",
    "TrainResult",
    "default_callbacks",
    "distribution_strategy",
    "indexed_batches",
    "is_chief",
    "set_precision",
    "train",
]

STRATEGIES = ("default", "mirrored", "multi_worker")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


# --------------------------------------------------------------------------- #
# Strategies and precision
# --------------------------------------------------------------------------- #


def distribution_strategy(name="default", devices=None):
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


def is_chief(strategy=None):
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


def set_precision(policy="float32"):
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


# --------------------------------------------------------------------------- #
# Atomic, step-exact backups
# --------------------------------------------------------------------------- #


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _fsync_file(path):
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def atomic_write_text(path, text):
    """Writes `text` to `path` atomically: temporary file in the same folder, fsync, `os.replace`."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_dir(folder)


class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` with atomic writes and mid-epoch (step) resumption.

    Files in `backup_dir`:

        ckpt-<step>.weights.h5   model + optimizer state after <step> training batches
        training_metadata.json   {"step", "epoch", "batch", "weights"} naming the file above

    A backup is committed in this order: the weights are saved to a
    temporary `.weights.h5` name, fsynced and renamed to `ckpt-<step>.weights.h5`;
    then the metadata is written the same way (temporary file, fsync,
    `os.replace`); only then are older `ckpt-*` files removed. A process
    killed at any point leaves either the previous or the new backup, both
    complete and consistent — never a truncated file, never weights that do
    not match the metadata.

    Restoring: `restore(model)` loads the last backup and returns its global
    step (number of training batches done). `train` calls it before `fit` and
    resumes the data and the epoch counter at that step, so a run killed
    mid-epoch continues from the backup step, not from the start of the
    epoch. Used directly in `model.fit(callbacks=[...])`, it restores in
    `on_train_begin` with Keras's epoch-level semantics (the interrupted
    epoch is run again from its first batch, with the restored weights).

    With `MultiWorkerMirroredStrategy` only the chief writes (every worker
    reads the same `backup_dir`, which must be on a shared filesystem).

    Args:
        backup_dir: folder of the backups (used only by this callback).
        save_freq: "epoch" or an int: back up every `save_freq` training
            batches (and at the end of each epoch).
        delete_checkpoint: remove `backup_dir` when training completes.
        keep: number of previous weight files kept besides the current one.
    """

    METADATA = "training_metadata.json"

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, keep=0):
        super().__init__(
            backup_dir, save_freq=save_freq, double_checkpoint=False, delete_checkpoint=delete_checkpoint
        )
        if isinstance(save_freq, bool) or (save_freq != "epoch" and save_freq <= 0):
            raise ValueError(f"`save_freq` must be 'epoch' or a positive int; received {save_freq!r}.")
        self.keep = int(keep)
        self._metadata_path = os.path.join(backup_dir, self.METADATA)
        self._restored = False
        self._restored_step = 0
        # Segment bookkeeping (set by `train`; defaults work for plain `fit`).
        self._segment_start = None
        self._segment_epoch = 0
        self._segment_steps_per_epoch = None
        self._total_steps = None
        self._epoch_start_step = 0
        self._step = 0
        self._last_saved_step = 0

    # ---- state ---------------------------------------------------------- #

    @property
    def step(self):
        """Global training step (batches done) as last seen by the callback."""
        return self._step

    @property
    def last_saved_step(self):
        """Step of the last backup written (or restored)."""
        return self._last_saved_step

    def read_metadata(self):
        """The metadata of the last committed backup, or None."""
        if not os.path.exists(self._metadata_path):
            return None
        with open(self._metadata_path) as f:
            metadata = json.load(f)
        weights = os.path.join(self.backup_dir, metadata["weights"])
        if not os.path.exists(weights):
            raise OSError(f"Backup metadata {self._metadata_path} names a missing weights file {weights}.")
        return metadata

    def restore(self, model=None):
        """Loads the last backup into `model` (default: `self.model`).

        Returns:
            The global step of the backup (0 when there is none).
        """
        model = model or self.model
        if model is None:
            raise ValueError("`restore` needs a model: pass one or call it after `set_model`.")
        if self.model is None:
            self.set_model(model)
        metadata = self.read_metadata()
        self._restored = True
        if metadata is None:
            self._restored_step = 0
            return 0
        if not model.built:
            raise ValueError("The model must be built before restoring a backup (call it on a batch first).")
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        model.load_weights(os.path.join(self.backup_dir, metadata["weights"]))
        self._restored_step = int(metadata["step"])
        self._step = self._last_saved_step = self._restored_step
        return self._restored_step

    def begin_segment(self, start_step, first_epoch, steps_per_epoch, total_steps):
        """Called by `train` before each `fit` call (see `train`)."""
        self._segment_start = int(start_step)
        self._segment_epoch = int(first_epoch)
        self._segment_steps_per_epoch = int(steps_per_epoch)
        self._total_steps = int(total_steps)
        self._step = self._last_saved_step = int(start_step)

    # ---- callback hooks ------------------------------------------------- #

    def on_train_begin(self, logs=None):
        if self._restored:
            return
        # Plain `model.fit` use: Keras's epoch-level semantics.
        step = self.restore(self.model)
        metadata = self.read_metadata()
        if metadata is not None:
            self.model._initial_epoch = int(metadata["epoch"])
        self._step = self._last_saved_step = step

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch
        if self._segment_start is not None:
            self._epoch_start_step = (
                self._segment_start + (epoch - self._segment_epoch) * self._segment_steps_per_epoch
            )
        else:
            self._epoch_start_step = self._step

    def on_train_batch_end(self, batch, logs=None):
        self._last_batch_seen = batch
        self._step = self._epoch_start_step + batch + 1
        if self.save_freq != "epoch" and self._step - self._last_saved_step >= self.save_freq:
            self._save_model()

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._last_batch_seen = -1
        if self._step != self._last_saved_step:
            self._save_model()

    def on_train_end(self, logs=None):
        finished = self._total_steps is None or self._step >= self._total_steps
        if finished and self.delete_checkpoint and is_chief() and os.path.exists(self.backup_dir):
            import shutil

            shutil.rmtree(self.backup_dir, ignore_errors=True)

    # ---- writing -------------------------------------------------------- #

    def _save_model(self):
        step = self._step
        self._last_saved_step = step
        if not is_chief():
            return
        os.makedirs(self.backup_dir, exist_ok=True)
        name = f"ckpt-{step}.weights.h5"
        final = os.path.join(self.backup_dir, name)
        tmp = os.path.join(self.backup_dir, f".tmp-{os.getpid()}-{name}")
        try:
            self.model.save_weights(tmp, overwrite=True)
            _fsync_file(tmp)
            os.replace(tmp, final)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        _fsync_dir(self.backup_dir)
        in_epoch = self._last_batch_seen + 1
        metadata = {
            "step": step,
            # Completed epochs (Keras's restore semantics) and batches into the current one.
            "epoch": self._current_epoch,
            "batch": in_epoch,
            "weights": name,
            "time": time.time(),
        }
        atomic_write_text(self._metadata_path, json.dumps(metadata))
        self._remove_old(keep_name=name)

    def _remove_old(self, keep_name):
        files = sorted(
            glob.glob(os.path.join(self.backup_dir, "ckpt-*.weights.h5")),
            key=lambda p: int(os.path.basename(p)[5:].split(".")[0]),
        )
        old = [p for p in files if os.path.basename(p) != keep_name]
        for path in old[: max(0, len(old) - self.keep)]:
            try:
                os.remove(path)
            except OSError:  # pragma: no cover
                pass


# --------------------------------------------------------------------------- #
# Callbacks
# --------------------------------------------------------------------------- #


class StepTimer(keras.callbacks.Callback):
    """Records wall time of the training (`seconds`) and of each epoch (`epoch_seconds`)."""

    def __init__(self):
        super().__init__()
        self.seconds = 0.0
        self.epoch_seconds = []
        self._t0 = self._te = None

    def on_train_begin(self, logs=None):
        self._t0 = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._te = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(time.perf_counter() - self._te)

    def on_train_end(self, logs=None):
        self.seconds += time.perf_counter() - self._t0


def tensorboard_available():
    """Whether the `tensorboard` package (needed by `keras.callbacks.TensorBoard`) is installed."""
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def tensorboard_callback(log_dir):
    """`keras.callbacks.TensorBoard(log_dir)` (epoch scalars), or None with a warning without `tensorboard`."""
    if not tensorboard_available():
        import warnings

        warnings.warn(
            "`tensorboard` is not installed (pip install tensorboard): no TensorBoard logs are written.",
            stacklevel=2,
        )
        return None
    return keras.callbacks.TensorBoard(log_dir=log_dir, write_graph=False, update_freq="epoch")


def default_callbacks(log_dir=None, backup_dir=None, save_freq="epoch", terminate_on_nan=True):
    """The callbacks the examples use.

    Args:
        log_dir: TensorBoard folder (`keras.callbacks.TensorBoard`, epoch
            scalars); None for none. Only the chief writes under multi-worker.
        backup_dir: folder for `AtomicBackupAndRestore`; None for none.
        save_freq: backup frequency ("epoch" or a number of batches).
        terminate_on_nan: add `keras.callbacks.TerminateOnNaN`.

    Returns:
        A list of callbacks (the backup one, when present, is an
        `AtomicBackupAndRestore`).
    """
    callbacks = []
    if backup_dir:
        callbacks.append(AtomicBackupAndRestore(backup_dir, save_freq=save_freq))
    if log_dir and is_chief():
        tb = tensorboard_callback(log_dir)
        if tb is not None:
            callbacks.append(tb)
    if terminate_on_nan:
        callbacks.append(keras.callbacks.TerminateOnNaN())
    return callbacks


# --------------------------------------------------------------------------- #
# Data
# --------------------------------------------------------------------------- #


def indexed_batches(batch_fn, start_step=0, steps=None, seed=0, prefetch=PREFETCH_BATCHES):
    """A resumable dataset: element `i` is `batch_fn(tf.stack([seed, i]))`.

    `batch_fn` receives a stateless-random seed (shape [2] int64) and must
    return one (already batched) element, e.g. nanoGPT-style random windows
    drawn with `tf.random.stateless_uniform`. Because element `i` depends only
    on `(seed, i)`, restarting at `start_step` gives exactly the batches an
    uninterrupted run would have seen.

    Args:
        batch_fn: `seed -> element` in TF ops.
        start_step: index of the first element.
        steps: number of elements (None: infinite).
        seed: int.
        prefetch: prefetch buffer.

    Returns:
        A `tf.data.Dataset`.
    """
    stop = tf.int64.max if steps is None else int(start_step) + int(steps)
    ds = tf.data.Dataset.range(int(start_step), stop)
    ds = ds.map(
        lambda i: batch_fn(tf.stack([tf.constant(int(seed), tf.int64), i])),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return _with_options(ds.prefetch(prefetch))


def _with_options(ds):
    """Shards by data under multi-worker strategies; no tf.data autotuning (see `keras_tfm.data.pipelines`)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.autotune.enabled = False
    return ds.with_options(options)


def _data_at(data, start_step):
    """`data(start)` for a factory, else the dataset repeated and skipped to `start`."""
    if callable(data) and not isinstance(data, tf.data.Dataset):
        ds = data(start_step)
    else:
        ds = data.repeat()
        if start_step:
            ds = ds.skip(start_step)
    if not isinstance(ds, tf.data.Dataset):
        raise TypeError(
            f"Training data must be a tf.data.Dataset (or a factory returning one); got {type(ds)}."
        )
    return _with_options(ds.prefetch(PREFETCH_BATCHES))


# --------------------------------------------------------------------------- #
# The training loop
# --------------------------------------------------------------------------- #


class TrainResult:
    """What `train` returns.

    Attributes:
        model: the trained model.
        history: dict metric -> list of per-epoch values (all `fit` calls merged).
        epochs: list of epoch indices matching `history`.
        start_step: step training (re)started from (> 0 after a resume).
        steps: total steps trained by the end.
        seconds: wall time of the `fit` calls.
    """

    def __init__(self, model, history, epochs, start_step, steps, seconds):
        self.model = model
        self.history = history
        self.epochs = epochs
        self.start_step = start_step
        self.steps = steps
        self.seconds = seconds

    def __repr__(self):
        last = {k: v[-1] for k, v in self.history.items() if v}
        return f"TrainResult(steps={self.steps}, start_step={self.start_step}, seconds={self.seconds:.1f}, last={last})"


def _segments(start, total, steps_per_epoch):
    """[(first_epoch, num_epochs, steps_per_epoch, start_step)] covering [start, total)."""
    groups = []
    s = start
    while s < total:
        epoch = s // steps_per_epoch
        end = min((epoch + 1) * steps_per_epoch, total)
        n = end - s
        if (
            groups
            and groups[-1][2] == n
            and s % steps_per_epoch == 0
            and groups[-1][3] % steps_per_epoch == 0
        ):
            first, count, _, seg_start = groups[-1]
            groups[-1] = (first, count + 1, n, seg_start)
        else:
            groups.append((epoch, 1, n, s))
        s = end
    return groups


def _patch_multi_worker_reduce():
    """Works around Keras 3.15 reducing scalar step outputs with `axis=0` under multi-worker.

    `keras.src.backend.tensorflow.trainer.reduce_per_replica` calls
    `strategy.reduce("MEAN", v, axis=0)` on every step output (the scalar
    loss and metric results) when the strategy is a multi-worker
    `MultiWorkerMirroredStrategy`, which fails for scalars ("Invalid reduction
    dimension 0"). Scalars are averaged over replicas with `axis=None` here;
    everything else keeps Keras's behaviour.
    """
    from keras.src.backend.tensorflow import trainer as tf_trainer

    if getattr(tf_trainer, "_keras_tfm_patched", False):
        return
    original = tf_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and tf_trainer._collective_all_reduce_multi_worker(strategy):

            def reduce(v):
                if isinstance(v, (tf.Tensor, tf.distribute.DistributedValues)):
                    rank = (
                        v.shape.rank
                        if isinstance(v, tf.Tensor)
                        else strategy.experimental_local_results(v)[0].shape.rank
                    )
                    if rank == 0:
                        return strategy.reduce("MEAN", v, axis=None)
                    return strategy.reduce("MEAN", v, axis=0)
                return v

            return tf.nest.map_structure(reduce, values)
        return original(values, strategy, reduction)

    tf_trainer.reduce_per_replica = reduce_per_replica
    tf_trainer._keras_tfm_patched = True


def _patch_symbolic_build(model, strategy):
    """Works around Keras 3.15 under `MultiWorkerMirroredStrategy`.

    Before training, `fit` builds the metrics/optimizer from one batch that it
    averages over replicas with `strategy.reduce("MEAN", (x, y))`; the
    collective reduce of a nested integer batch fails ("Attempt to convert a
    value (PerReplica...) to a Tensor"). Only the shapes matter there, so the
    first local replica's batch is used instead.
    """
    _patch_multi_worker_reduce()
    if getattr(model, "_keras_tfm_patched_build", False):
        return
    original = model._maybe_symbolic_build

    def local_batch(value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def maybe_symbolic_build(iterator=None, data_batch=None):
        if iterator is not None and data_batch is None:
            for _, _, it in iterator:
                data_batch = tf.nest.map_structure(local_batch, next(it))
                break
        return original(iterator=None, data_batch=data_batch)

    model._maybe_symbolic_build = maybe_symbolic_build
    model._keras_tfm_patched_build = True


def train(
    model,
    data,
    *,
    steps,
    steps_per_epoch=None,
    validation_data=None,
    validation_steps=None,
    strategy=None,
    callbacks=None,
    log_dir=None,
    backup_dir=None,
    save_freq=None,
    verbose="auto",
):
    """Trains with `model.fit` for `steps` batches, resumably.

    Training is cut into epochs of `steps_per_epoch` batches; at the end of
    each the model is evaluated on `validation_data` (nanoGPT's
    `eval_interval`), TensorBoard scalars are written and a backup is taken.

    Args:
        model: a compiled `keras.Model`, or a zero-argument callable returning
            one (called inside `strategy.scope()` — use this form with a
            distribution strategy).
        data: an infinite (or repeatable) `tf.data.Dataset` of `(x, y)` or
            `(x, y, sample_weight)` global batches, or a callable
            `start_step -> Dataset` (e.g. built with `indexed_batches`) so a
            resumed run sees exactly the data an uninterrupted run would.
            A plain dataset is `.repeat()`ed and `.skip()`ped on resume.
        steps: total number of training batches (global steps).
        steps_per_epoch: batches per epoch (default: `steps`, one epoch).
        validation_data: dataset evaluated at each epoch end (or None).
        validation_steps: batches of `validation_data` per evaluation
            (None: the whole dataset, which must then be finite).
        strategy: a `tf.distribute.Strategy` or a name for
            `distribution_strategy` (default: the current strategy).
        callbacks: extra Keras callbacks.
        log_dir: TensorBoard folder (None: no TensorBoard).
        backup_dir: `AtomicBackupAndRestore` folder (None: no backups). When a
            backup exists, training resumes from its step.
        save_freq: backup every this many batches (default: each epoch).
        verbose: passed to `fit` (the Keras progress bar by default).

    Returns:
        A `TrainResult`.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"`steps` must be a positive int; received {steps!r}.")
    steps_per_epoch = steps if steps_per_epoch is None else int(steps_per_epoch)
    if steps_per_epoch <= 0:
        raise ValueError(f"`steps_per_epoch` must be a positive int; received {steps_per_epoch!r}.")
    if isinstance(strategy, str):
        strategy = distribution_strategy(strategy)
    strategy = strategy or tf.distribute.get_strategy()
    if not isinstance(model, keras.Model):
        with strategy.scope():
            model = model()
    if not isinstance(model, keras.Model):
        raise TypeError(f"`model` must be a keras.Model or a factory returning one; got {type(model)}.")
    if model.optimizer is None:
        raise ValueError("`model` must be compiled before `train`.")

    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        _patch_symbolic_build(model, strategy)

    callbacks = list(callbacks or [])
    backup = next((c for c in callbacks if isinstance(c, AtomicBackupAndRestore)), None)
    if backup_dir and backup is None:
        backup = AtomicBackupAndRestore(backup_dir, save_freq=save_freq or "epoch")
        callbacks.append(backup)
    if (
        log_dir
        and is_chief(strategy)
        and not any(isinstance(c, keras.callbacks.TensorBoard) for c in callbacks)
    ):
        tb = tensorboard_callback(log_dir)
        if tb is not None:
            callbacks.append(tb)
    if not any(isinstance(c, keras.callbacks.TerminateOnNaN) for c in callbacks):
        callbacks.append(keras.callbacks.TerminateOnNaN())
    timer = StepTimer()
    callbacks.append(timer)

    start = 0
    if backup is not None:
        with strategy.scope():
            start = backup.restore(model)
        if start >= steps:
            return TrainResult(model, {}, [], start, start, 0.0)

    history, epochs = {}, []
    for first_epoch, num_epochs, spe, seg_start in _segments(start, steps, steps_per_epoch):
        if backup is not None:
            backup.begin_segment(seg_start, first_epoch, spe, steps)
        h = model.fit(
            _data_at(data, seg_start),
            initial_epoch=first_epoch,
            epochs=first_epoch + num_epochs,
            steps_per_epoch=spe,
            validation_data=validation_data,
            validation_steps=validation_steps,
            callbacks=callbacks,
            verbose=verbose,
            shuffle=False,
        )
        for key, values in h.history.items():
            history.setdefault(key, []).extend(float(v) for v in values)
        epochs.extend(h.epoch)
    return TrainResult(model, history, epochs, start, steps, timer.seconds)


def num_epochs(steps, steps_per_epoch):
    """ceil(steps / steps_per_epoch)."""
    return math.ceil(steps / steps_per_epoch)
