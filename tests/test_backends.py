"""The core on every Keras backend: TensorFlow, JAX, PyTorch.

Runs on whatever backend KERAS_BACKEND selects: `.ci/run` runs this file with the default
(TensorFlow) backend, then again with KERAS_BACKEND=jax and with KERAS_BACKEND=torch. The
subprocess tests check what a single backend cannot: importing with TensorFlow hidden, the backend a
keras.json chooses, and a `.keras` file moving between backends.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from model_harness import tiny_bert_classifier, tiny_gpt, tiny_seq2seq

import keras_tfm
from keras_tfm import callbacks, losses, optimizers, schedules, training

BACKEND = keras.backend.backend()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 300  # seconds for a subprocess on a loaded 2-core machine
V, T, B = 40, 8, 4


def _run(code, backend=None, env_extra=None, timeout=TIMEOUT):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"})
    if backend:
        env["KERAS_BACKEND"] = backend
    env.update(env_extra or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Subprocess tests whose result does not depend on the backend of this process run once, in the
# default (TensorFlow) pass, keeping the JAX pass of CI short.
once = pytest.mark.skipif(
    BACKEND != "tensorflow", reason="backend-independent subprocess test: runs in the TensorFlow pass"
)


#: One layer, d_model 16: the harness's tiny models, smaller still.
SMALL = dict(seed=None, num_layers=1, num_heads=2, d_model=16, d_ff=32)


# --------------------------------------------------------------------------- #
# Import without TensorFlow; the user's backend wins
# --------------------------------------------------------------------------- #


@once
def test_core_imports_and_runs_with_tensorflow_hidden_and_keras_json_backend(tmp_path):
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax", "floatx": "float32"}))
    out = _run(
        """
        import json, os, sys
        sys.modules["tensorflow"] = None  # any `import tensorflow` now fails
        import numpy as np
        import keras_tfm, keras
        from keras_tfm import layers, models, losses, metrics, schedules, optimizers, callbacks
        model = models.gpt("tiny", vocabulary_size=40, max_length=8, num_layers=1, d_model=16, num_heads=2)
        logits = model(np.ones((2, 8), "int32"))
        tokens = keras_tfm.generation.generate(model, [[1, 2], [3]], 3)  # generation needs no TensorFlow
        errors = {}
        for name in ("data", "export"):
            try:
                getattr(keras_tfm, name)
            except (ImportError, RuntimeError) as e:
                errors[name] = str(e)
        print(json.dumps({
            "backend": keras.backend.backend(),
            "env": os.environ.get("KERAS_BACKEND"),
            "shape": list(logits.shape),
            "finite": bool(np.isfinite(keras.ops.convert_to_numpy(logits)).all()),
            "errors": errors,
            "tokens": list(tokens.shape),
        }))
        """,
        env_extra={"KERAS_HOME": str(tmp_path)},
    )
    assert out["backend"] == "jax" and out["env"] is None  # keras.json decides; keras_tfm sets nothing
    assert out["shape"] == [2, 8, 40] and out["finite"]
    assert set(out["errors"]) == {"data", "export"} and out["tokens"] == [2, 3]
    assert all("needs TensorFlow" in message for message in out["errors"].values())


def test_subpackages_are_reachable_after_import_keras_tfm():
    # A lazy name is imported by the package's __getattr__ on first access.
    assert keras_tfm.__getattr__("checks") is sys.modules["keras_tfm.checks"]
    assert "export" in dir(keras_tfm)
    with pytest.raises(AttributeError, match="nope"):
        keras_tfm.nope  # noqa: B018


# --------------------------------------------------------------------------- #
# Numerics on the current backend against NumPy references
# --------------------------------------------------------------------------- #


def test_masked_label_smoothed_loss_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7)).astype("float32")
    labels = rng.integers(0, 7, size=(2, 5)).astype("int32")
    labels[0, 3:] = 0  # padding
    alpha = 0.1
    loss = losses.MaskedSparseCategoricalCrossentropy(from_logits=True, label_smoothing=alpha, ignore_index=0)
    got = float(keras.ops.convert_to_numpy(loss(labels, logits)))
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    target = np.eye(7)[labels] * (1 - alpha) + alpha / 7
    per_token = -(target * logp).sum(-1)
    mask = labels != 0
    np.testing.assert_allclose(got, per_token[mask].mean(), rtol=1e-5)


def test_vaswani_schedule_matches_formula():
    schedule = schedules.TransformerSchedule(d_model=64, warmup_steps=10)
    steps = np.array([0, 1, 9, 10, 100])
    got = [float(keras.ops.convert_to_numpy(schedule(s))) for s in steps]
    s = steps + 1.0
    want = 64**-0.5 * np.minimum(s**-0.5, s * 10**-1.5)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# --------------------------------------------------------------------------- #
# model.fit of the builders on the current backend
# --------------------------------------------------------------------------- #


def _lm_data(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, V, size=(2 * B, T + 1)).astype("int32")
    ids[0, -3:] = 0  # padded tail: masked out of the loss
    return ids[:, :-1], ids[:, 1:]


def _bert_data(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, V, size=(2 * B, T)).astype("int32")
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    return x, rng.integers(0, 2, size=(2 * B,)).astype("int32")


def _s2s_data(seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, V, size=(2 * B, T)).astype("int32")
    tgt = rng.integers(1, V, size=(2 * B, T + 1)).astype("int32")
    return {"encoder_token_ids": src, "decoder_token_ids": tgt[:, :-1]}, tgt[:, 1:]


def _generator(x, y, batches):
    def gen():
        for i in range(batches):
            rows = slice((i % 2) * B, (i % 2 + 1) * B)
            xb = {k: v[rows] for k, v in x.items()} if isinstance(x, dict) else x[rows]
            yield xb, y[rows]

    return gen()


def _weights(model):
    return [np.array(keras.ops.convert_to_numpy(w)) for w in model.trainable_weights]


def _changed(before, model):
    return any(not np.allclose(a, b) for a, b in zip(before, _weights(model)))


def _fit_all():
    """Fits GPT, BERT and seq2seq from arrays and from a generator; returns what the tests check."""
    # jax.jit on JAX (issue 17); TensorFlow's graph mode here (its XLA path is covered by
    # test_models/test_training and costs minutes of compiling on 2 cores); PyTorch eagerly.
    jit = keras.backend.backend() == "jax"
    results = {}
    # GPT: Vaswani schedule, masked loss with label smoothing, gradient accumulation.
    gpt = tiny_gpt(**SMALL, vocabulary_size=V, max_length=T)
    optimizer = optimizers.vaswani_adam(d_model=16, warmup_steps=4, gradient_accumulation_steps=2)
    training.compile_for_lm(gpt, optimizer, label_smoothing=0.1, jit_compile=jit)
    x, y = _lm_data()
    gpt.fit(x[:B], y[:B], batch_size=B, epochs=1, verbose=0)  # one micro-batch: no update yet
    before = _weights(gpt)
    history = gpt.fit(x, y, batch_size=B, epochs=2, verbose=0)
    diagnostics = [callbacks.AttentionEntropyMonitor(x[:2]), callbacks.LossSpikeDetector(warn=False)]
    generated = gpt.fit(_generator(x, y, 4), steps_per_epoch=4, epochs=1, verbose=0, callbacks=diagnostics)
    results["gpt"] = {
        "losses": history.history["loss"] + generated.history["loss"],
        "entropy": generated.history["attention_entropy/mean"],
        "batch_losses": len(diagnostics[1].losses),
        "changed": _changed(before, gpt),
        "iterations": int(keras.ops.convert_to_numpy(gpt.optimizer.iterations)),
    }
    # Gradient accumulation: the first micro-batch alone left the weights as built.
    fresh = tiny_gpt(**SMALL, vocabulary_size=V, max_length=T)
    fresh_opt = optimizers.vaswani_adam(d_model=16, warmup_steps=4, gradient_accumulation_steps=2)
    training.compile_for_lm(fresh, fresh_opt, jit_compile=False)  # two steps: not worth compiling
    fresh(x[:1])
    initial = _weights(fresh)
    fresh.fit(x[:B], y[:B], batch_size=B, epochs=1, verbose=0)
    after_one = not _changed(initial, fresh)
    fresh.fit(x[B:], y[B:], batch_size=B, epochs=1, verbose=0)
    results["accumulation"] = {
        "unchanged_after_one": after_one,
        "changed_after_two": _changed(initial, fresh),
    }
    # BERT classifier.
    bert = tiny_bert_classifier(**SMALL, num_classes=2, vocabulary_size=V, max_length=T)
    training.compile_for_classification(bert, learning_rate=1e-3, jit_compile=jit)
    bx, by = _bert_data()
    before = _weights(bert)
    h1 = bert.fit(bx, by, batch_size=B, epochs=1, verbose=0)
    h2 = bert.fit(_generator(bx, by, 2), steps_per_epoch=2, epochs=1, verbose=0)
    results["bert"] = {"losses": h1.history["loss"] + h2.history["loss"], "changed": _changed(before, bert)}
    # Encoder–decoder Transformer.
    s2s = tiny_seq2seq(**SMALL, vocabulary_size=V, max_length=T + 1)
    training.compile_for_lm(s2s, "vaswani", warmup_steps=4, label_smoothing=0.1, jit_compile=jit)
    sx, sy = _s2s_data()
    before = _weights(s2s)
    h1 = s2s.fit(sx, sy, batch_size=B, epochs=1, verbose=0)
    h2 = s2s.fit(_generator(sx, sy, 2), steps_per_epoch=2, epochs=1, verbose=0)
    results["seq2seq"] = {"losses": h1.history["loss"] + h2.history["loss"], "changed": _changed(before, s2s)}
    results["grad_norm"] = _grad_norm_check()
    return results


def _grad_norm_check():
    """GradientNormMonitor on a linear model: ‖∇ MSE‖ = ‖2/N·Xᵀ(Xw − y)‖ in NumPy."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3)).astype("float32")
    y = rng.normal(size=(6, 1)).astype("float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False)])
    model.compile(optimizer="sgd", loss="mse")
    w = np.array(keras.ops.convert_to_numpy(model.layers[0].kernel))
    want = float(np.linalg.norm(2.0 / len(x) * x.T @ (x @ w - y)))
    monitor = callbacks.GradientNormMonitor((x, y), every_n_steps=1)
    monitor.set_model(model)
    return {"got": monitor.measure()["grad_norm"], "want": want}


def _check_fit_results(results):
    for name in ("gpt", "bert", "seq2seq"):
        assert np.isfinite(results[name]["losses"]).all(), (name, results[name])
        assert results[name]["changed"], f"{name}: fit did not change the weights"
    # 1 + 2·2 + 4 micro-batches, one optimizer update per 2: Keras counts the updates.
    assert results["gpt"]["iterations"] in (4, 9)
    assert results["accumulation"] == {"unchanged_after_one": True, "changed_after_two": True}
    assert results["gpt"]["losses"][1] < results["gpt"]["losses"][0] + 0.5
    # Diagnostics callbacks ran: entropy of softmax rows over ≤ T keys lies in [0, log T].
    assert 0 < results["gpt"]["entropy"][0] <= np.log(T) + 1e-5
    assert results["gpt"]["batch_losses"] == 4
    np.testing.assert_allclose(results["grad_norm"]["got"], results["grad_norm"]["want"], rtol=1e-5)


@pytest.fixture(scope="module")
def fit_results():
    return _fit_all()


def test_builders_fit_from_arrays_and_generators(fit_results):
    _check_fit_results(fit_results)


# --------------------------------------------------------------------------- #
# A .keras file saved on one backend loads on another with equal outputs
# --------------------------------------------------------------------------- #


def test_keras_file_moves_between_backends(tmp_path):
    other = "jax" if BACKEND == "tensorflow" else "tensorflow"
    gpt = tiny_gpt(**SMALL, vocabulary_size=V, max_length=T)
    s2s = tiny_seq2seq(**SMALL, vocabulary_size=V, max_length=T + 1)
    x, _ = _lm_data()
    sx, _ = _s2s_data()
    expected = {}
    for name, model, inputs in (("gpt", gpt, x), ("seq2seq", s2s, sx)):
        model.save(tmp_path / f"{name}.keras")
        expected[name] = keras.ops.convert_to_numpy(model(inputs, training=False))
    np.savez(tmp_path / "inputs.npz", x=x, **{f"s_{k}": v for k, v in sx.items()})
    out = _run(
        f"""
        import json
        import numpy as np, keras
        import keras_tfm
        data = np.load({str(tmp_path / "inputs.npz")!r})
        inputs = {{"gpt": data["x"], "seq2seq": {{k[2:]: data[k] for k in data.files if k.startswith("s_")}}}}
        result = {{"backend": keras.backend.backend()}}
        for name in ("gpt", "seq2seq"):
            model = keras.saving.load_model({str(tmp_path)!r} + f"/{{name}}.keras")
            out = keras.ops.convert_to_numpy(model(inputs[name], training=False))
            np.save({str(tmp_path)!r} + f"/{{name}}.npy", out)
            result[name] = type(model).__name__
        print(json.dumps(result))
        """,
        backend=other,
    )
    assert out["backend"] == other
    assert out["gpt"] == type(gpt).__name__ and out["seq2seq"] == type(s2s).__name__
    for name in ("gpt", "seq2seq"):
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), expected[name], rtol=1e-5, atol=1e-5)


def test_text_generation_on_this_backend():
    """`model.tokenizer` attaches on every backend (on PyTorch a Keras layer assigned to a
    module attribute would otherwise become a submodule) and the text path of `generate` /
    `beam_search` runs: the prompt comes back first, ids equal the ids path."""
    import keras_tfm.generation  # noqa: F401  (registers the text methods off TensorFlow)
    from keras_tfm import generation
    from keras_tfm.tokenizers import CharTokenizer

    keras.utils.set_random_seed(0)
    model = keras_tfm.models.gpt("tiny", vocabulary_size=40, max_length=32)
    model.tokenizer = CharTokenizer.from_corpus("hello world")
    assert model.tokenizer is not None and model.tokenizer not in model.layers
    text = model.generate("hello", max_new_tokens=4, eos_id=None)
    assert isinstance(text, str) and text.startswith("hello")
    ids = model.tokenizer.tokenize(["hello"]).to_list()
    np.testing.assert_array_equal(
        model.generate(ids, max_new_tokens=4), generation.generate(model, ids, max_new_tokens=4)
    )
    best = model.beam_search(["hello", "world"], max_new_tokens=3, num_beams=2)
    assert [b[:5] for b in best] == ["hello", "world"]
