"""PNG pictures and the `plot` subcommand."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_gpt

from keras_tfm.analysis import plotting
from keras_tfm.schedules import TransformerSchedule, WarmupStableDecay, nanogpt_schedule


def assert_png(path, min_kb=5):
    assert os.path.isfile(path), path
    with open(path, "rb") as f:
        head = f.read(8)
    assert head == plotting.PNG_SIGNATURE
    assert os.path.getsize(path) > min_kb * 1024


@pytest.fixture(scope="module")
def model():
    return tiny_gpt()


def test_plot_attention_heads(tmp_path, model):
    x = np.arange(1, 9, dtype="int32")[None]
    tokens = list("abcdefgh")
    for layer in ("decoder_block_1", 0, -1, "1"):
        path = plotting.plot_attention_heads(model, x, layer, tokens=tokens, path=tmp_path / f"a_{layer}.png")
        assert_png(path)
    with pytest.raises(ValueError, match="Unknown `layer` 'decoder_block_7'.*decoder_block_0"):
        plotting.plot_attention_heads(model, x, "decoder_block_7", path=tmp_path / "bad.png")
    with pytest.raises(ValueError, match="`layer` index 5"):
        plotting.plot_attention_heads(model, x, 5, path=tmp_path / "bad.png")
    with pytest.raises(ValueError, match="`tokens`"):
        plotting.plot_attention_heads(model, x, 0, tokens=["a"], path=tmp_path / "bad.png")
    with pytest.raises(ValueError, match="`example`"):
        plotting.plot_attention_heads(model, x, 0, example=3, path=tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()


def test_positional_encoding_pictures(tmp_path):
    assert_png(plotting.plot_positional_encoding(64, 32, tmp_path / "pe.png"))
    assert_png(plotting.plot_position_similarity(64, 32, tmp_path / "sim.png"))
    sim = plotting.position_similarity(16, 32)
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-6)
    # depends on |p - q| only (Toeplitz)
    np.testing.assert_allclose(sim[3, 5], sim[7, 9], atol=1e-5)
    for bad, error in (
        (dict(length=0, d_model=8), ValueError),
        (dict(length=8, d_model=-1), ValueError),
        (dict(length=2.5, d_model=8), TypeError),
    ):
        name = "length" if bad["length"] != 8 else "d_model"
        with pytest.raises(error, match=f"`{name}`"):
            plotting.plot_positional_encoding(path=tmp_path / "x.png", **bad)
        with pytest.raises(error, match=f"`{name}`"):
            plotting.plot_position_similarity(path=tmp_path / "x.png", **bad)
    # NumPy integers count as ints (e.g. a length read from an array's shape).
    np.testing.assert_allclose(
        plotting.position_similarity(np.int64(4), np.int32(8)), plotting.position_similarity(4, 8)
    )


def test_plot_lr_schedule(tmp_path):
    schedule = TransformerSchedule(64, warmup_steps=50)
    lr = plotting.learning_rates(schedule, 200)
    assert int(np.argmax(lr)) == 49
    assert_png(plotting.plot_lr_schedule(schedule, 200, tmp_path / "lr.png"))
    assert_png(
        plotting.plot_lr_schedule(nanogpt_schedule(1e-3, 100, warmup_steps=10), 120, tmp_path / "lr2.png")
    )
    wsd = plotting.learning_rates(WarmupStableDecay(1e-3, 100, warmup_steps=10), 120)
    np.testing.assert_allclose(
        wsd[[0, 5, 10, 79, 90, 100, 119]], [0, 5e-4, 1e-3, 1e-3, 5.5e-4, 1e-4, 1e-4], rtol=1e-5, atol=1e-9
    )
    assert_png(
        plotting.plot_lr_schedule(lambda step: 1e-3 * keras.ops.ones_like(step), 10, tmp_path / "c.png"),
        min_kb=3,
    )
    with pytest.raises(ValueError, match="`steps`"):
        plotting.plot_lr_schedule(schedule, 0, tmp_path / "x.png")
    with pytest.raises(ValueError, match="`schedule`"):
        plotting.plot_lr_schedule("adam", 10, tmp_path / "x.png")


def test_plot_training_curves_from_history_dict_json_and_tensorboard(tmp_path):
    history = {"loss": [2.0, 1.5, 1.2], "val_loss": [2.1, 1.7, 1.6], "grad_norm": [3.0, 2.0, 1.0]}
    assert_png(plotting.plot_training_curves(history, tmp_path / "h.png"))
    h = keras.callbacks.History()
    h.history = history
    assert_png(plotting.plot_training_curves(h, tmp_path / "h2.png", keys=["loss"]))
    with open(tmp_path / "history.json", "w") as f:
        json.dump(history, f)
    assert_png(plotting.plot_training_curves(str(tmp_path / "history.json"), tmp_path / "h3.png"))
    with pytest.raises(ValueError, match="Unknown curve key.*'accuracy'.*`keys`"):
        plotting.plot_training_curves(history, tmp_path / "x.png", keys=["accuracy"])

    # A Keras-style TensorBoard log dir: train/ and validation/ with epoch_ tags.
    logdir = tmp_path / "tb"
    for sub, offset in (("train", 0.0), ("validation", 0.2)):
        writer = tf.summary.create_file_writer(str(logdir / sub))
        with writer.as_default():
            for step in range(4):
                tf.summary.scalar("epoch_loss", 2.0 - 0.3 * step + offset, step=step)
        writer.flush()
    scalars = plotting.read_tensorboard_scalars(logdir)
    assert set(scalars) == {"loss", "val_loss"}
    np.testing.assert_allclose(scalars["val_loss"][1], [2.2, 1.9, 1.6, 1.3], atol=1e-6)
    assert_png(plotting.plot_training_curves(logdir, tmp_path / "tb.png"))

    with pytest.raises(FileNotFoundError, match="history_or_logdir"):
        plotting.plot_training_curves(tmp_path / "missing", tmp_path / "x.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no TensorBoard event file"):
        plotting.plot_training_curves(tmp_path / "empty", tmp_path / "x.png")


def test_plot_subcommand(tmp_path, model, capsys):
    from keras_tfm import cli

    def run(*argv):
        return cli.main(["plot", *map(str, argv)])

    def error(*argv):
        """The one line `keras-tfm plot ARGV` ends with (exit status 2)."""
        capsys.readouterr()
        assert run(*argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("keras-tfm plot "), err
        return err[0]

    assert run("pe", "--length", 32, "--d-model", 16, "--output", tmp_path / "pe.png") == 0
    assert_png(tmp_path / "pe.png")
    assert run("similarity", "--length", 32, "--d-model", 16, "--output", tmp_path / "sim.png") == 0
    assert_png(tmp_path / "sim.png")
    assert (
        run(
            "lr",
            "--schedule",
            "transformer",
            "--d-model",
            64,
            "--warmup-steps",
            10,
            "--steps",
            100,
            "--output",
            tmp_path / "lr.png",
        )
        == 0
    )
    assert_png(tmp_path / "lr.png")
    assert (
        run(
            "lr",
            "--schedule",
            "nanogpt",
            "--steps",
            100,
            "--warmup-steps",
            10,
            "--output",
            tmp_path / "lr2.png",
        )
        == 0
    )
    assert (
        run("lr", "--schedule", "wsd", "--steps", 100, "--warmup-steps", 10, "--output", tmp_path / "lr3.png")
        == 0
    )
    assert_png(tmp_path / "lr3.png")
    with open(tmp_path / "h.json", "w") as f:
        json.dump({"loss": [3.0, 2.0], "accuracy": [0.1, 0.3]}, f)
    assert run("curves", tmp_path / "h.json", "--keys", "loss", "--output", tmp_path / "c.png") == 0
    assert_png(tmp_path / "c.png")
    model.save(tmp_path / "m.keras")
    assert (
        run(
            "attention",
            "--model",
            tmp_path / "m.keras",
            "--ids",
            "1,2,3,4,5",
            "--layer",
            "decoder_block_1",
            "--output",
            tmp_path / "att.png",
        )
        == 0
    )
    assert_png(tmp_path / "att.png")
    assert str(tmp_path / "att.png") in capsys.readouterr().out

    assert "--length must be" in error("pe", "--length", 0, "--output", tmp_path / "x.png")
    assert "--d-model must be" in error("similarity", "--d-model", -4, "--output", tmp_path / "x.png")
    line = error("attention", "--model", tmp_path / "m.keras", "--ids", "1 2", "--layer", "block_9")
    assert "Unknown --layer 'block_9'" in line
    assert "--model: " in error("attention", "--model", tmp_path / "nope.keras", "--ids", "1")
    assert "--ids must be integers" in error("attention", "--model", tmp_path / "m.keras", "--ids", "a,b")
    assert "--tokenizer" in error("attention", "--model", tmp_path / "m.keras", "--text", "hello")
    line = error("curves", tmp_path / "h.json", "--keys", "bleu", "--output", tmp_path / "x.png")
    assert "Unknown curve key(s) ['bleu'] in --keys" in line
    assert "SOURCE" in error("curves", tmp_path / "nope", "--output", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(SystemExit):
        run("heatmap")


def _load_example(name):
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), os.pardir, "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lab_analysis_end_to_end(tmp_path, capsys):
    lab = _load_example("lab_analysis")
    rng = np.random.default_rng(0)
    words = ["to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis", "nobler"]
    text = "\n".join(" ".join(rng.choice(words, 8)) for _ in range(60))
    data = tmp_path / "input.txt"
    data.write_text(text)
    out = tmp_path / "lab"
    small = ["--max-length", "16", "--d-model", "32", "--num-heads", "2", "--batch-size", "4"]
    assert lab.main(["--data", str(data), "--output", str(out), "--steps", "3", "--eager", *small]) == 0
    printed = capsys.readouterr().out
    expected = [f"attention_decoder_block_{i}.png" for i in range(4)] + [
        "positional_encoding.png",
        "position_similarity.png",
        "lr_schedule.png",
        "training_curves.png",
    ]
    for name in expected:
        assert_png(out / name, min_kb=3)
    history = json.loads((out / "history.json").read_text())
    assert history["loss"]["step"] == [1, 2, 3] and len(history["grad_norm"]["value"]) == 4
    stats = json.loads((out / "head_stats.json").read_text())
    assert set(stats) == {f"decoder_block_{i}" for i in range(4)}
    assert len(stats["decoder_block_0"]["previous_token"]) == 2
    assert "decoder_block_3" in printed and "entropy" in printed

    # load the saved model instead of training
    out2 = tmp_path / "lab2"
    assert (
        lab.main(["--data", str(data), "--output", str(out2), "--model", str(out / "char_gpt.keras"), *small])
        == 0
    )
    for name in expected:
        assert_png(out2 / name, min_kb=3)
    with pytest.raises(FileNotFoundError, match="--data"):
        lab.main(["--data", str(tmp_path / "nope.txt"), "--output", str(out2)])
    with pytest.raises(ValueError, match="--steps"):
        lab.main(["--data", str(data), "--output", str(out2), "--steps", "0"])


def test_keras_tfm_cli_has_plot_subcommand(tmp_path):
    """The installed CLI (`keras_tfm.cli.main`) reaches the plot subcommand."""
    from keras_tfm import cli

    out = tmp_path / "pe_cli.png"
    assert cli.main(["plot", "pe", "--length", "16", "--d-model", "8", "--output", str(out)]) == 0
    assert_png(out)
    with pytest.raises(SystemExit):
        cli.main(["plot", "no-such-picture"])
