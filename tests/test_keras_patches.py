"""The Keras workarounds in keras_tfm.training.keras_patches: still needed, version-guarded, scoped.

Each `test_keras_still_*` test checks the Keras behaviour a workaround exists for; it fails
once Keras changes it, telling whoever upgrades Keras to re-check the workaround and set the
fixed version in its guard. The multi-worker workarounds are exercised end to end by
`tests/test_training.py::test_multi_worker_localhost`.
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tfm.training import keras_patches
from keras_tfm.training.backup import AtomicBackupAndRestore


def _tiny_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


_X, _Y = np.ones((4, 3), "float32"), np.zeros((4, 1), "float32")


def test_keras_still_reduces_multi_worker_scalars_with_axis_0():
    from keras.src.backend.tensorflow import trainer as tf_trainer

    source = inspect.getsource(tf_trainer.reduce_per_replica)
    assert 'strategy.reduce("MEAN", v, axis=0)' in source, (
        f"Keras {keras.version()} changed reduce_per_replica: check whether scalar step outputs under "
        "MultiWorkerMirroredStrategy still fail (tensorflow/tensorflow#72388) and set the fixed version "
        "in keras_patches.MULTI_WORKER_AFFECTED."
    )
    assert keras_patches.multi_worker_reduce_affected()


def test_keras_still_averages_the_symbolic_build_batch():
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    source = inspect.getsource(TensorFlowTrainer._maybe_symbolic_build)
    assert "distribute_strategy.reduce(" in source and '"MEAN"' in source, (
        f"Keras {keras.version()} changed _maybe_symbolic_build: check keras-team/keras#20329 and set the "
        "fixed version in keras_patches.MULTI_WORKER_AFFECTED."
    )


def test_keras_fit_still_takes_and_keeps_initial_epoch_from_the_model():
    class StartAt2(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            keras_patches.set_fit_initial_epoch(self.model, 2)

    model = _tiny_model()
    history = model.fit(_X, _Y, epochs=3, verbose=0, callbacks=[StartAt2()])
    assert history.epoch == [2], "fit no longer reads model._initial_epoch: update keras_patches"
    # Keras never resets it: a later plain fit starts at epoch 2 again (here: runs nothing).
    assert model.fit(_X, _Y, epochs=2, verbose=0).epoch == [], (
        "fit now resets model._initial_epoch: clear_fit_initial_epoch is no longer needed"
    )
    keras_patches.clear_fit_initial_epoch(model)
    assert model.fit(_X, _Y, epochs=2, verbose=0).epoch == [0, 1]


def test_backup_callback_does_not_leak_its_initial_epoch(tmp_path):
    model = _tiny_model()
    first = AtomicBackupAndRestore(str(tmp_path / "b"), save_freq="epoch", delete_checkpoint=False)
    model.fit(_X, _Y, epochs=2, verbose=0, callbacks=[first])
    resumed = AtomicBackupAndRestore(str(tmp_path / "b"), save_freq="epoch", delete_checkpoint=False)
    assert model.fit(_X, _Y, epochs=3, verbose=0, callbacks=[resumed]).epoch == [2]  # resumed at 2
    assert model.fit(_X, _Y, epochs=2, verbose=0).epoch == [0, 1]  # a later fit starts where asked


def test_version_guards():
    assert not keras_patches.multi_worker_reduce_affected("2.15.0")
    assert keras_patches.multi_worker_reduce_affected("3.15.1")
    assert keras_patches.initial_epoch_attribute_used(keras.version())


def _fake_multi_worker_strategy():
    # Only the type matters to the context manager (the patched functions are not called here);
    # a real MultiWorkerMirroredStrategy must be created before any TF op, in its own process.
    cls = tf.distribute.MultiWorkerMirroredStrategy
    return cls.__new__(cls)


def test_multi_worker_workarounds_are_undone_on_exit():
    from keras.src.backend.tensorflow import trainer as tf_trainer

    model = _tiny_model()
    original_reduce = tf_trainer.reduce_per_replica
    with keras_patches.multi_worker_workarounds(model, tf.distribute.get_strategy()):
        assert tf_trainer.reduce_per_replica is original_reduce  # not multi-worker: nothing patched
        assert "_maybe_symbolic_build" not in vars(model)
    with pytest.raises(RuntimeError, match="boom"):
        with keras_patches.multi_worker_workarounds(model, _fake_multi_worker_strategy()):
            assert tf_trainer.reduce_per_replica is not original_reduce
            assert "_maybe_symbolic_build" in vars(model)
            raise RuntimeError("boom")
    assert tf_trainer.reduce_per_replica is original_reduce
    assert "_maybe_symbolic_build" not in vars(model)
