"""`AtomicBackupAndRestore`: atomic, step-exact backups for `model.fit` and `train`.

Why a subclass of `BackupAndRestore`: in Keras 3.15 the stock callback writes
`latest.weights.h5` and `training_metadata.json` in place, one after the
other; a process killed during (or between) the two writes leaves a truncated
file or weights that do not match the metadata. It also restores only the
epoch number, so a run killed mid-epoch starts that epoch again from batch 0.
"""

import glob
import json
import os
import time

import keras

from keras_tfm.training.atomic_files import _fsync_dir, _fsync_file, atomic_write_text
from keras_tfm.training.strategies import is_chief


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
