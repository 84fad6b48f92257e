"""Training utilities: strategies, mixed precision, XLA, gradient accumulation, atomic resumable backups.

The tests that need a fresh TensorFlow (logical CPU devices, multi-worker collectives, SIGKILL)
run a small worker script in subprocesses, always with a timeout.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import (
    bert_inputs,
    tiny_bert_classifier,
    tiny_bert_masked_lm,
    tiny_gpt,
    tiny_seq2seq,
    to_numpy,
    token_ids,
)

from keras_tfm import training
from keras_tfm.atomic_files import atomic_write_text
from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.training.loop import _segments
from keras_tfm.training.standard_callbacks import tensorboard_available

TIMEOUT = 240  # seconds for any subprocess (the machine may be loaded)

# --------------------------------------------------------------------------- #
# Worker script (written to tmp_path and run with the same interpreter)
# --------------------------------------------------------------------------- #

WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    mode = sys.argv[1]
    import tensorflow as tf
    if mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    if mode == "multi_worker":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()   # before any other op
    import keras
    import numpy as np
    from keras_tfm import models, training

    STREAM = tf.constant(np.random.RandomState(0).randint(1, 64, size=4000).astype("int32"))

    def batch_fn(seed, batch=8, length=16):
        ix = tf.random.stateless_uniform([batch], seed, 0, 4000 - length - 1, dtype=tf.int32)
        w = tf.gather(STREAM, ix[:, None] + tf.range(length + 1)[None])
        return w[:, :-1], w[:, 1:]

    def data(start):
        return training.indexed_batches(batch_fn, start_step=start)

    def build(weights=None):
        keras.utils.set_random_seed(0)
        model = models.gpt("tiny", max_length=16, num_layers=1)
        if weights is not None:
            model.set_weights(weights)
        return training.compile_for_lm(model, keras.optimizers.Adam(1e-2), ignore_index=None, jit_compile=False)

    if mode == "mirrored":
        init = build().get_weights()
        out = {}
        for name in ("default", "mirrored"):
            strategy = (training.distribution_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
                        if name == "mirrored" else training.distribution_strategy("default"))
            r = training.train(lambda: build(init), data, steps=6, steps_per_epoch=1, strategy=strategy, verbose=0)
            out[name] = {"replicas": strategy.num_replicas_in_sync, "loss": r.history["loss"],
                         "weights": [float(np.sum(np.abs(w))) for w in r.model.get_weights()]}
        print("RESULT " + json.dumps(out), flush=True)

    elif mode == "multi_worker":
        r = training.train(build, data, steps=4, steps_per_epoch=2, strategy=strategy, verbose=0)
        print("RESULT " + json.dumps({"replicas": strategy.num_replicas_in_sync, "loss": r.history["loss"],
                                      "chief": training.is_chief(strategy)}), flush=True)

    elif mode == "resume":
        backup_dir, steps, save_freq, delay = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
        backup = training.AtomicBackupAndRestore(backup_dir, save_freq=save_freq, delete_checkpoint=False)
        meta = backup.read_metadata()
        print("START %d" % (meta["step"] if meta else 0), flush=True)

        class Progress(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                print("STEP %d" % backup.step, flush=True)
                time.sleep(delay)

        r = training.train(build, data, steps=steps, steps_per_epoch=10, callbacks=[backup, Progress()], verbose=0)
        print("DONE %d start=%d" % (r.steps, r.start_step), flush=True)
    """
)


def _env():
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["CUDA_VISIBLE_DEVICES"] = "-1"
    env.pop("TF_CONFIG", None)
    return env


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "worker.py"
    path.write_text(WORKER)
    return str(path)


def _result(stdout):
    lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, stdout
    return json.loads(lines[-1][len("RESULT ") :])


# --------------------------------------------------------------------------- #
# Strategies
# --------------------------------------------------------------------------- #


def test_distribution_strategy_names():
    assert training.distribution_strategy("default") is tf.distribute.get_strategy()
    with pytest.raises(ValueError, match="Unknown strategy"):
        training.distribution_strategy("tpu")
    with pytest.raises(ValueError, match="devices"):
        training.distribution_strategy("default", devices=["/cpu:0"])
    assert training.is_chief()


def test_mirrored_two_cpus_matches_default(worker):
    proc = subprocess.run(
        [sys.executable, worker, "mirrored"], capture_output=True, text=True, timeout=TIMEOUT, env=_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = _result(proc.stdout)
    assert out["default"]["replicas"] == 1 and out["mirrored"]["replicas"] == 2
    np.testing.assert_allclose(out["mirrored"]["loss"], out["default"]["loss"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["mirrored"]["weights"], out["default"]["weights"], rtol=1e-4, atol=1e-5)
    assert len(out["default"]["loss"]) == 6 and np.isfinite(out["default"]["loss"]).all()


def _free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_multi_worker_localhost(worker):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    try:
        for index in range(2):
            env = _env()
            env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            procs.append(
                subprocess.Popen(
                    [sys.executable, worker, "multi_worker"],
                    env=env,
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    results = [_result(out) for out, _ in outs]
    assert [r["replicas"] for r in results] == [2, 2]
    assert [r["chief"] for r in results] == [True, False]
    assert all(np.isfinite(r["loss"]).all() and len(r["loss"]) == 2 for r in results)
    np.testing.assert_allclose(results[0]["loss"], results[1]["loss"], rtol=1e-5)


# --------------------------------------------------------------------------- #
# SIGKILL mid-epoch, restart, resume from the backup step
# --------------------------------------------------------------------------- #


def test_sigkill_then_resume_from_backup(worker, tmp_path):
    backup_dir = str(tmp_path / "backup")
    steps, save_freq = 30, 4
    cmd = [sys.executable, worker, "resume", backup_dir, str(steps), str(save_freq)]
    proc = subprocess.Popen(
        cmd + ["0.15"], env=_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    seen = []
    deadline = time.monotonic() + TIMEOUT
    try:
        for line in proc.stdout:
            if line.startswith("STEP "):
                seen.append(int(line.split()[1]))
                if seen[-1] >= 14:  # mid-epoch (epochs are 10 steps), after backups at 4, 8, 10, 12
                    break
            assert time.monotonic() < deadline, "worker too slow"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert seen and seen[0] == 1 and seen[-1] >= 14

    # What was committed is complete: metadata names an existing, loadable weights file.
    backup = training.AtomicBackupAndRestore(backup_dir, save_freq=save_freq)
    meta = backup.read_metadata()
    assert meta is not None and 12 <= meta["step"] < steps
    # (a kill during a save may leave a `.tmp-*` file; it is never read and never named by the metadata)

    resumed = subprocess.run(cmd + ["0"], env=_env(), text=True, capture_output=True, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = resumed.stdout.splitlines()
    assert lines[0] == f"START {meta['step']}"
    progress = [int(l.split()[1]) for l in lines if l.startswith("STEP ")]
    assert progress[0] == meta["step"] + 1  # not 1: resumed mid-epoch at the backup step
    assert progress[-1] == steps and len(progress) == steps - meta["step"]
    assert lines[-1] == f"DONE {steps} start={meta['step']}"


# --------------------------------------------------------------------------- #
# In-process: exact resumption, atomic files, TensorBoard
# --------------------------------------------------------------------------- #

_STREAM = np.random.RandomState(1).randint(1, 64, size=3000).astype("int32")


def _batch_fn(seed, batch=4, length=16):
    stream = tf.constant(_STREAM)
    ix = tf.random.stateless_uniform([batch], seed, 0, len(_STREAM) - length - 1, dtype=tf.int32)
    w = tf.gather(stream, ix[:, None] + tf.range(length + 1)[None])
    return w[:, :-1], w[:, 1:]


def _data(start):
    return training.indexed_batches(_batch_fn, start_step=start)


def _tiny_gpt(optimizer=None, **compile_kwargs):
    """The tiny GPT with one layer (what these tests check does not depend on the depth)."""
    return training.compile_for_lm(
        tiny_gpt(max_length=16, num_layers=1),
        optimizer or keras.optimizers.Adam(1e-2),
        ignore_index=None,
        jit_compile=False,
        **compile_kwargs,
    )


class _Interrupt(keras.callbacks.Callback):
    def __init__(self, backup, at):
        super().__init__()
        self.backup, self.at = backup, at

    def on_train_batch_end(self, batch, logs=None):
        if self.backup.step >= self.at:
            raise KeyboardInterrupt


def test_resume_is_exact_and_writes_are_atomic(tmp_path):
    reference = training.train(_tiny_gpt(), _data, steps=13, steps_per_epoch=5, verbose=0)

    backup_dir = str(tmp_path / "backup")
    backup = training.AtomicBackupAndRestore(backup_dir, save_freq=3)
    with pytest.raises(KeyboardInterrupt):
        training.train(
            _tiny_gpt(),
            _data,
            steps=13,
            steps_per_epoch=5,
            callbacks=[backup, _Interrupt(backup, 9)],
            verbose=0,
        )
    meta = backup.read_metadata()
    assert meta["step"] == 8  # backups at 3, 5 (epoch end), 8; interrupted at 9 (mid-epoch)
    files = sorted(os.listdir(backup_dir))
    assert files == ["ckpt-8.weights.h5", "training_metadata.json"], files  # no temp files, old ckpt removed

    log_dir = str(tmp_path / "logs")
    resumed = training.train(
        _tiny_gpt(),
        _data,
        steps=13,
        steps_per_epoch=5,
        backup_dir=backup_dir,
        save_freq=3,
        log_dir=log_dir,
        verbose=0,
    )
    assert resumed.start_step == 8 and resumed.steps == 13
    assert resumed.epochs == [1, 2]  # the rest of epoch 1 (steps 8, 9), then epoch 2 (10..12)
    for a, b in zip(resumed.model.get_weights(), reference.model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not os.path.exists(backup_dir)  # deleted once training completed
    if tensorboard_available():
        events = [f for root, _, fs in os.walk(log_dir) for f in fs if "tfevents" in f]
        assert events


def test_atomic_write_text_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = str(tmp_path / "meta.json")
    atomic_write_text(path, '{"step": 1}')

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(path, '{"step": 2}')
    assert open(path).read() == '{"step": 1}'
    assert os.listdir(tmp_path) == ["meta.json"]


def test_segments_cover_resume_points():
    assert _segments(0, 10, 5) == [(0, 2, 5, 0)]
    assert _segments(6, 13, 5) == [(1, 1, 4, 6), (2, 1, 3, 10)]
    assert _segments(5, 17, 5) == [(1, 2, 5, 5), (3, 1, 2, 15)]
    with pytest.raises(ValueError):
        training.train(_tiny_gpt(), _data, steps=0)


# --------------------------------------------------------------------------- #
# compile_for_lm / compile_for_classification; the optimizer state in a .keras file
# --------------------------------------------------------------------------- #


def test_compile_helpers():
    model = tiny_gpt()
    training.compile_for_lm(model, optimizer="vaswani", warmup_steps=10, label_smoothing=0.1)
    assert isinstance(model.loss, MaskedSparseCategoricalCrossentropy) and model.loss.label_smoothing == 0.1
    assert model.optimizer.beta_2 == 0.98
    lr0 = float(model.optimizer.learning_rate)
    assert lr0 == pytest.approx(32**-0.5 * 1 * 10**-1.5, rel=1e-5)
    assert model.jit_compile is True  # XLA by default (the fast path), outside tf.distribute
    training.compile_for_lm(model, jit_compile=False, steps_per_execution=4)
    assert not model.jit_compile and model.steps_per_execution == 4
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = training.compile_for_lm(tiny_gpt())
    assert mirrored.jit_compile is False
    with pytest.raises(TypeError, match="jit_compile"):
        training.compile_for_lm(model, jit_compile="yes")
    with pytest.raises(ValueError, match="learning_rate"):
        training.compile_for_lm(model, optimizer="vaswani", learning_rate=1e-3)
    with pytest.raises(TypeError):
        training.compile_for_lm(model, optimizer=3)


def _optimizer_state(model):
    return [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]


def _train_steps(model, x, y, steps):
    return [float(model.train_on_batch(x, y, return_dict=True)["loss"]) for _ in range(steps)]


@pytest.mark.parametrize("kind", ["gpt", "bert_classifier"])
def test_keras_file_keeps_the_optimizer_state(tmp_path, kind):
    if kind == "gpt":
        model = training.compile_for_lm(
            tiny_gpt(seed=4, position="alibi"), optimizer="vaswani", warmup_steps=5, run_eagerly=True
        )
        ids = token_ids(4, 9, low=0)
        x, y = ids[:, :-1], ids[:, 1:]
    else:
        model = training.compile_for_classification(
            tiny_bert_classifier(seed=4, pooling="max"), optimizer="adamw", run_eagerly=True
        )
        x, y = bert_inputs(4, 8), np.array([0, 1, 2, 1])
    _train_steps(model, x, y, 2)
    model.save(tmp_path / f"{kind}.keras")
    loaded = keras.saving.load_model(tmp_path / f"{kind}.keras")
    assert int(loaded.optimizer.iterations) == 2
    for a, b in zip(_optimizer_state(loaded), _optimizer_state(model)):
        np.testing.assert_allclose(a, b, atol=1e-7)
    # Identical state ⇒ identical next step.
    assert _train_steps(model, x, y, 1) == pytest.approx(_train_steps(loaded, x, y, 1), rel=1e-5)
    if kind == "gpt":
        # The tie survives loading: the output projection *is* the embedding.
        table = loaded.token_embedding.embeddings
        before = to_numpy(loaded(x))
        table.assign(table * 2.0)
        assert not np.allclose(to_numpy(loaded(x)), before)
        assert len(loaded.weights) == len({id(w) for w in loaded.weights})


# --------------------------------------------------------------------------- #
# Precision, XLA, label smoothing, clipping, gradient accumulation
# --------------------------------------------------------------------------- #


def _tiny_model_and_batch(kind):
    """A one-layer tiny model of `kind` and a batch: every layer type of the model is there (the
    precision and XLA checks do not depend on the depth), and its XLA train step compiles faster."""
    rng = np.random.RandomState(0)
    if kind == "gpt":
        model = tiny_gpt(seed=None, max_length=16, num_layers=1)
        x = rng.randint(1, 64, size=(4, 16)).astype("int32")
        return model, x, np.roll(x, -1, axis=1), None
    if kind == "bert":
        model = tiny_bert_masked_lm(seed=None, num_layers=1)
        ids = rng.randint(7, 64, size=(4, 16)).astype("int32")
        x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
        return model, x, ids, (rng.rand(4, 16) < 0.3).astype("float32")
    model = tiny_seq2seq(seed=None, num_layers=1)
    src = rng.randint(3, 32, size=(4, 12)).astype("int32")
    tgt = rng.randint(3, 32, size=(4, 10)).astype("int32")
    return model, {"encoder_token_ids": src, "decoder_token_ids": tgt}, np.roll(tgt, -1, axis=1), None


@pytest.mark.parametrize("kind", ["gpt", "bert", "seq2seq"])
@pytest.mark.parametrize("precision,jit", [("mixed_float16", False), ("mixed_bfloat16", True)])
def test_precision_and_xla_train(kind, precision, jit):
    previous = training.set_precision(precision)
    try:
        keras.utils.set_random_seed(0)
        model, x, y, w = _tiny_model_and_batch(kind)
        training.compile_for_lm(
            model,
            keras.optimizers.Adam(1e-3, clipnorm=1.0),
            label_smoothing=0.1,
            ignore_index=None,
            jit_compile=jit,
        )
        if precision == "mixed_float16":
            assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert model.get_layer("logits").compute_dtype == "float32"
        losses = [
            float(model.train_on_batch(x, y, sample_weight=w, return_dict=True)["loss"]) for _ in range(2)
        ]
        assert np.all(np.isfinite(losses)), losses
    finally:
        training.set_precision(previous)


def test_set_precision_rejects_unknown():
    with pytest.raises(ValueError, match="Unknown precision"):
        training.set_precision("float8")


def test_gradient_accumulation_matches_big_batch():
    x = np.random.RandomState(2).randint(1, 64, size=(8, 16)).astype("int32")
    y = np.roll(x, -1, axis=1)

    keras.utils.set_random_seed(0)
    acc = _tiny_gpt(keras.optimizers.SGD(0.5, gradient_accumulation_steps=2))
    keras.utils.set_random_seed(0)
    big = _tiny_gpt(keras.optimizers.SGD(0.5))
    init = [w.copy() for w in acc.get_weights()]
    big.set_weights(init)

    acc.train_on_batch(x[:4], y[:4])
    for a, b in zip(acc.get_weights(), init):
        np.testing.assert_array_equal(a, b)  # no update after the first micro-batch
    acc.train_on_batch(x[4:], y[4:])
    big.train_on_batch(x, y)
    changed = any(not np.allclose(a, b) for a, b in zip(acc.get_weights(), init))
    assert changed
    for a, b in zip(acc.get_weights(), big.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_train_with_clipnorm_label_smoothing_and_steps_per_execution():
    model = _tiny_gpt(
        keras.optimizers.Adam(1e-2, global_clipnorm=1.0), steps_per_execution=3, label_smoothing=0.1
    )
    result = training.train(
        model, _data, steps=8, steps_per_epoch=4, validation_data=_data(10**6).take(2), verbose=0
    )
    assert result.epochs == [0, 1] and set(result.history) >= {"loss", "val_loss", "accuracy"}
    assert np.isfinite(result.history["loss"]).all()


def test_time_budget_stops_training_and_reports_the_steps_reached():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    class Slow(keras.callbacks.Callback):  # 50 ms per batch: the budget of 0.3 s ends near step 6
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.05)

    ds = tf.data.Dataset.from_tensors((np.ones((2, 4), "float32"), np.ones((2, 1), "float32"))).repeat()
    result = training.train(
        model, ds, steps=1000, steps_per_epoch=4, callbacks=[Slow()], time_budget=0.3, verbose=0
    )
    assert (
        1 <= result.steps < 1000
    )  # stopped early (the first batch may itself outlast the budget under load)
    assert result.steps == int(model.optimizer.iterations.numpy())
    assert result.seconds < 20  # 1000 steps of 50 ms would take 50 s
    with pytest.raises(ValueError, match="seconds"):
        training.train(model, ds, steps=10, time_budget=0, verbose=0)


def test_process_time_budget_counts_cpu_seconds_not_sleep():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    class Busy(keras.callbacks.Callback):  # 30 ms of sleep (no CPU) and ~30 ms of CPU per batch
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.03)
            end = time.process_time() + 0.03
            while time.process_time() < end:
                pass

    ds = tf.data.Dataset.from_tensors((np.ones((2, 4), "float32"), np.ones((2, 1), "float32"))).repeat()
    budget = training.TimeBudget(0.3, clock="process")
    start = time.perf_counter()
    result = training.train(model, ds, steps=1000, steps_per_epoch=4, callbacks=[Busy(), budget], verbose=0)
    assert budget.reached and result.steps < 1000
    assert time.perf_counter() - start >= 0.3  # the sleeps were not counted against the budget
    with pytest.raises(ValueError, match="clock"):
        training.TimeBudget(1.0, clock="gpu")
