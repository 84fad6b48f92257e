"""`AtomicBackupAndRestore`: atomic, step-exact backups for `model.fit` and `train`.

Why a subclass of `BackupAndRestore`: in Keras 3.15 the stock callback writes
`latest.weights.h5` and `training_metadata.json` in place, one after the
other; a process killed during (or between) the two writes leaves a truncated
file or weights that do not match the metadata. It also restores only the
epoch number, so a run killed mid-epoch starts that epoch again from batch 0.
"""

import glob
import hashlib
import json
import os
import time

import keras

from keras_tfm.atomic_files import atomic_write_text, fsync_dir, fsync_file
from keras_tfm.training.keras_patches import clear_fit_initial_epoch, set_fit_initial_epoch
from keras_tfm.training.strategies import is_chief


class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` with atomic writes and mid-epoch (step) resumption.

    Files in `backup_dir`:

        ckpt-<step>.weights.h5   model + optimizer state after <step> training batches
        training_metadata.json   {"step", "epoch", "batch", "weights", "sha256", "model"}:
                                 the file above, its SHA-256 and the model's weight
                                 paths and shapes (and its config when serialisable)

    A backup is committed in this order: the weights are saved to a
    temporary `.weights.h5` name, fsynced and renamed to `ckpt-<step>.weights.h5`;
    then the metadata is written the same way (temporary file, fsync,
    `os.replace`); only then are older `ckpt-*` files removed. A process
    killed at any point leaves either the previous or the new backup, both
    complete and consistent — never a truncated file, never weights that do
    not match the metadata.

    Restoring: `restore(model)` verifies the last backup before loading it
    (readable metadata, the weights file's SHA-256, and the model's weight
    shapes against the recorded ones) and refuses anything else with a
    ValueError naming `backup_dir`: a truncated, emptied, corrupted or
    hand-edited backup, or one written by a model of another size. Nothing is
    deleted then; `backup_dir` is removed at the end of training only after
    this run has verified (or written) the backup it holds. `restore` returns
    the backup's global step (number of training batches done). `train` calls it before `fit` and
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

    def __init__(
        self,
        backup_dir: str | os.PathLike,
        save_freq: str | int = "epoch",
        delete_checkpoint: bool = True,
        keep: int = 0,
    ):
        super().__init__(
            backup_dir, save_freq=save_freq, double_checkpoint=False, delete_checkpoint=delete_checkpoint
        )
        if isinstance(save_freq, bool) or (save_freq != "epoch" and save_freq <= 0):
            raise ValueError(f"`save_freq` must be 'epoch' or a positive int; received {save_freq!r}.")
        self.keep = int(keep)
        self._metadata_path = os.path.join(backup_dir, self.METADATA)
        self._restored = False
        self._verified = False  # the backup in backup_dir was verified (or written) by this run
        self._restored_step = 0
        # Segment bookkeeping (set by `train`; defaults work for plain `fit`).
        self._segment_start = None
        self._segment_epoch = 0
        self._segment_steps_per_epoch = None
        self._total_steps = None
        self._epoch_start_step = 0
        self._step = 0
        self._last_saved_step = 0
        self._epoch = 0  # completed epochs, as Keras's BackupAndRestore counts them
        self._batch = -1  # last batch seen in the current epoch

    # ---- state ---------------------------------------------------------- #

    @property
    def step(self) -> int:
        """Global training step (batches done) as last seen by the callback."""
        return self._step

    @property
    def last_saved_step(self) -> int:
        """Step of the last backup written (or restored)."""
        return self._last_saved_step

    def read_metadata(self) -> dict | None:
        """The metadata of the last committed backup (None when there is none), checked.

        Raises:
            ValueError: naming `backup_dir`, for metadata that is not JSON or
                lacks a field, a missing weights file or a checksum mismatch.
        """
        if not os.path.exists(self._metadata_path):
            return None
        where = f"backup folder {self.backup_dir!r}"
        try:
            with open(self._metadata_path, encoding="utf-8") as f:
                metadata = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(
                f"Cannot resume: {where} has an unreadable {self.METADATA} ({error}). Refusing to resume "
                "and deleting nothing: remove the folder to start afresh."
            ) from None
        missing = [
            k
            for k in ("step", "epoch", "weights", "sha256", "model")
            if not isinstance(metadata, dict) or k not in metadata
        ]
        if missing:
            raise ValueError(
                f"Cannot resume: {where} has a {self.METADATA} without {missing} (written by an older "
                "version, or edited). Refusing to resume from an unverifiable backup; remove the folder to "
                "start afresh."
            )
        step = metadata["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"Cannot resume: {where} records an invalid step {step!r}.")
        weights = os.path.join(self.backup_dir, str(metadata["weights"]))
        if not os.path.isfile(weights):
            raise ValueError(f"Cannot resume: {where} names a missing weights file {weights!r}.")
        digest = _sha256(weights)
        if digest != metadata["sha256"]:
            raise ValueError(
                f"Cannot resume: the weights file {weights!r} in {where} does not match its recorded "
                f"SHA-256 (the file is truncated or corrupted). Refusing to resume and deleting nothing."
            )
        return metadata

    def _check_model(self, model, metadata):
        """Refuses a backup whose recorded weight shapes differ from `model`'s."""
        recorded = metadata["model"].get("weights") if isinstance(metadata["model"], dict) else None
        current = _model_signature(model)["weights"]
        if recorded is None or [s for _, s in recorded] != [s for _, s in current]:
            detail = f"the backup has {len(recorded or [])} weights, the model {len(current)}"
            for i, (old, new) in enumerate(zip(recorded or [], current)):
                if old[1] != new[1]:
                    detail = (
                        f"weight {i} ({new[0]}): backup shape {tuple(old[1])}, model shape {tuple(new[1])}"
                    )
                    break
            raise ValueError(
                f"Cannot resume: the backup in {self.backup_dir!r} was written by a different model "
                f"({detail}). Use the same model options (e.g. --d-model) or another backup folder."
            )

    def restore(self, model: keras.Model | None = None) -> int:
        """Verifies and loads the last backup into `model` (default: `self.model`).

        Returns:
            The global step of the backup (0 when there is none).

        Raises:
            ValueError: naming `backup_dir` when the backup cannot be verified
                (see the class docstring); the backup is left in place.
        """
        model = model or self.model
        if model is None:
            raise ValueError("`restore` needs a model: pass one or call it after `set_model`.")
        if self.model is None:
            self.set_model(model)
        metadata = self.read_metadata()
        if metadata is None:
            self._restored = self._verified = True
            self._restored_step = 0
            return 0
        if not model.built:
            raise ValueError("The model must be built before restoring a backup (call it on a batch first).")
        self._check_model(model, metadata)
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        weights = os.path.join(self.backup_dir, metadata["weights"])
        try:
            model.load_weights(weights)
        except Exception as error:  # h5py/Keras errors on a file that passed the checksum
            raise ValueError(
                f"Cannot resume: loading {weights!r} from backup folder {self.backup_dir!r} failed "
                f"({type(error).__name__}: {str(error)[:200]})."
            ) from error
        self._restored = self._verified = True
        self._restored_step = int(metadata["step"])
        self._step = self._last_saved_step = self._restored_step
        return self._restored_step

    def begin_segment(
        self, start_step: int, first_epoch: int, steps_per_epoch: int, total_steps: int
    ) -> None:
        """Called by `train` before each `fit` call (see `train`)."""
        self._segment_start = int(start_step)
        self._segment_epoch = int(first_epoch)
        self._segment_steps_per_epoch = int(steps_per_epoch)
        self._total_steps = int(total_steps)
        self._step = self._last_saved_step = int(start_step)

    # ---- callback hooks ------------------------------------------------- #

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self._restored:
            return
        # Plain `model.fit` use: Keras's epoch-level semantics.
        step = self.restore(self.model)
        metadata = self.read_metadata()
        if metadata is not None:
            set_fit_initial_epoch(self.model, metadata["epoch"])
        self._step = self._last_saved_step = step

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch
        if self._segment_start is not None:
            self._epoch_start_step = (
                self._segment_start + (epoch - self._segment_epoch) * self._segment_steps_per_epoch
            )
        else:
            self._epoch_start_step = self._step

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._batch = batch
        self._step = self._epoch_start_step + batch + 1
        if self.save_freq != "epoch" and self._step - self._last_saved_step >= self.save_freq:
            self._save_model()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch + 1
        self._batch = -1
        if self._step != self._last_saved_step:
            self._save_model()

    def on_train_end(self, logs: dict | None = None) -> None:
        clear_fit_initial_epoch(self.model)
        finished = self._total_steps is None or self._step >= self._total_steps
        if (
            finished
            and self._verified
            and self.delete_checkpoint
            and is_chief()
            and os.path.exists(self.backup_dir)
        ):
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
            fsync_file(tmp)
            digest = _sha256(tmp)
            os.replace(tmp, final)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        fsync_dir(self.backup_dir)
        in_epoch = self._batch + 1
        metadata = {
            "step": step,
            # Completed epochs (Keras's restore semantics) and batches into the current one.
            "epoch": self._epoch,
            "batch": in_epoch,
            "weights": name,
            "sha256": digest,
            "model": _model_signature(self.model),
            "time": time.time(),
        }
        atomic_write_text(self._metadata_path, json.dumps(metadata))
        self._verified = True
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


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _model_signature(model):
    """The model's weight paths and shapes (compared on resume) and, when JSON-serialisable, its config."""
    signature = {
        "class": type(model).__name__,
        "weights": [[w.path, [int(d) for d in w.shape]] for w in model.weights],
    }
    try:
        signature["config"] = json.loads(json.dumps(model.get_config()))
    except Exception:  # config not serialisable to JSON: the shapes still identify the model
        pass
    return signature
