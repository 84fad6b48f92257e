"""The example scripts and the `keras-tfm` CLI, end to end on tiny generated data files.

The examples run in-process (runpy, as `__main__`) to share one TensorFlow start-up; one test
runs the installed console script in a subprocess.
"""

import json
import math
import os
import runpy
import subprocess
import sys

import pytest

from keras_tfm import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

LINES = [
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n",
    "All:\nSpeak, speak.\n\n",
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\n",
]


def _run_example(name, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [name] + list(argv))
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(os.path.join(EXAMPLES, name), run_name="__main__")
    return exit_info.value.code


@pytest.fixture
def shakespeare(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("".join(LINES[i % 3] for i in range(40)))
    return str(path)


@pytest.fixture
def sst2_dir(tmp_path):
    folder = tmp_path / "sst2"
    folder.mkdir()
    good = ["a gorgeous , witty film", "a fun and moving story", "good acting and a great script"]
    bad = ["a dull , boring mess", "bad acting and a weak script", "the worst film of the year"]
    for split, n in (("train", 24), ("dev", 8), ("test", 6)):
        rows = [f"1 {good[i % 3]}" if i % 2 else f"0 {bad[i % 3]}" for i in range(n)]
        (folder / f"stsa.binary.{split}").write_text("\n".join(rows) + "\n")
    return str(folder)


@pytest.fixture
def spa_file(tmp_path):
    pairs = [
        ("Go.", "Ve."),
        ("Hi.", "Hola."),
        ("Run!", "¡Corre!"),
        ("I see.", "Ya veo."),
        ("Thanks.", "Gracias."),
        ("I won!", "¡He ganado!"),
        ("We lost.", "Perdimos."),
        ("Be kind.", "Sé amable."),
    ]
    path = tmp_path / "spa.txt"
    path.write_text(
        "".join(f"{en}\t{es}\tCC-BY 2.0 (France) Attribution: tatoeba.org\n" for en, es in pairs * 6)
    )
    return str(path)


def _flags(**options):
    """argv of `options`: _flags(num_layers=1, d_model=16) == ["--num-layers", "1", "--d-model", "16"]."""
    return [text for name, value in options.items() for text in (f"--{name.replace('_', '-')}", str(value))]


TINY_MODEL = _flags(num_layers=1, num_heads=2, d_model=16, batch_size=4, verbose=0)
TINY_GPT = TINY_MODEL + _flags(
    steps=4, eval_interval=2, eval_iters=1, max_length=8, sample_tokens=5, steps_per_execution=2
)
NO_SAMPLE = _flags(sample_tokens=0)  # after TINY_GPT: no sample, where a test does not check it
#: After TINY_GPT: the train step without XLA, where a test checks something else (the XLA-compiled
#: step of the GPT recipe: test_gpt_example_end_to_end and the recipe's "wsd-learned" case).
NO_XLA = ["--no-jit-compile"]
TINY_BERT = TINY_MODEL + _flags(
    d_ff=32,
    pretrain_steps=3,
    eval_interval=3,
    vocabulary_size=60,
    max_length=12,
    finetune_epochs=1,
    finetune_batch_size=8,
)
TINY_SEQ2SEQ = TINY_MODEL + _flags(
    d_ff=32, steps=3, eval_interval=3, test_pairs=8, bleu_pairs=4, show=2, max_words=6, warmup_steps=2
)


@pytest.mark.parametrize("name", ["gpt_shakespeare.py", "bert_sst2.py", "translate.py", "demo.py"])
def test_example_help(name, monkeypatch, capsys):
    assert _run_example(name, ["--help"], monkeypatch) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--steps" in out


def _run_with_results(name, argv, tmp_path, monkeypatch, capsys):
    """Runs example `name` with `--results`; returns its printed output and the results JSON."""
    results = tmp_path / "results.json"
    assert _run_example(name, [*argv, "--results", str(results)], monkeypatch) == 0
    return capsys.readouterr().out, json.loads(results.read_text())


def test_gpt_example_end_to_end(shakespeare, tmp_path, monkeypatch, capsys):
    argv = ["--data", shakespeare, "--log-dir", str(tmp_path / "logs")] + TINY_GPT
    out, r = _run_with_results("gpt_shakespeare.py", argv, tmp_path, monkeypatch, capsys)
    assert "validation loss" in out and "wall time" in out and "sample" in out
    assert r["steps"] == 4 and len(r["history"]["val_loss"]) == 2
    assert r["val_loss"] == r["val_loss_whole_split"]
    # The final evaluation batches are the last validation of the training history.
    assert r["val_loss_eval_batches"] == pytest.approx(r["history"]["val_loss"][-1], rel=1e-5)
    assert len(r["sample"]) == 5


#: TINY_GPT + NO_SAMPLE as `train_gpt` keyword arguments.
TINY_GPT_OPTIONS = dict(
    num_layers=1, num_heads=2, d_model=16, batch_size=4, verbose=0, steps=4, eval_interval=2, eval_iters=1
)
TINY_GPT_OPTIONS.update(max_length=8, sample_tokens=0, steps_per_execution=2)


@pytest.mark.parametrize(
    "schedule, position, jit_compile", [("wsd", "learned", None), ("cosine", "rope", False)]
)
def test_gpt_recipe_from_python_schedule_position_and_xla_default(
    shakespeare, schedule, position, jit_compile
):
    from keras_tfm import recipes
    from keras_tfm.schedules import WarmupStableDecay

    # No sample (checked by the example tests): one XLA loop less to compile. The second case sets
    # jit_compile=False (the schedule and position do not depend on it): one XLA train step less.
    options = TINY_GPT_OPTIONS if jit_compile is None else dict(TINY_GPT_OPTIONS, jit_compile=jit_compile)
    results = recipes.train_gpt(data=shakespeare, schedule=schedule, position=position, **options)
    model = results["model"]
    lr = model.optimizer._learning_rate
    if schedule == "wsd":
        assert isinstance(lr, WarmupStableDecay) and lr.total_steps == 4 and lr.decay_steps == 1
    else:
        assert type(lr).__name__ == "CosineDecay"
    assert model.blocks[0].position == (None if position == "learned" else position)
    # True: the recipe's default for fixed-shape LM windows.
    assert model.jit_compile is (True if jit_compile is None else jit_compile)
    assert model.max_length == 8 and results["steps"] == 4 and results["sample"] == ""
    assert model.tokenizer is results["tokenizer"]  # attached: saved with the model


@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(decay_fraction=0), ValueError, r"`decay_fraction` must be in \(0.0, 1.0\]; received 0"),
        (dict(max_length=0), ValueError, r"`max_length` must be a positive int; received 0"),
        (dict(max_length="8"), TypeError, r"`max_length` must be a positive int; received '8'"),
        (dict(num_key_value_heads=3), ValueError, r"`num_key_value_heads` must divide `num_heads` \(2\)"),
        (dict(precision="fp8"), ValueError, r"Unknown `precision` 'fp8'"),
        (dict(export="a/b"), ValueError, r"`export` must be a plain folder name"),
        (dict(block_size=8), TypeError, r"unexpected keyword argument 'block_size'"),
    ],
)
def test_gpt_recipe_refuses_bad_options_before_training(shakespeare, options, error, match):
    from keras_tfm import recipes

    with pytest.raises(error, match=match):
        recipes.train_gpt(data=shakespeare, **{**TINY_GPT_OPTIONS, **options})


def test_gpt_recipe_llama_preset_and_layout_options(shakespeare):
    from keras_tfm import recipes

    tiny = dict(data=shakespeare, jit_compile=False, num_layers=1, num_heads=2, d_model=16, max_length=8)
    tiny.update(batch_size=4, sample_tokens=0, steps=2, eval_interval=2, eval_iters=1, verbose=0)
    model = recipes.train_gpt(**tiny, preset="llama_tiny", num_key_value_heads=1)["model"]
    assert model.config["norm"] == "rms" and model.config["activation"] == "swiglu" and model.head is not None
    assert model.num_key_value_heads == 1 and model.config["position"] == "rope"
    # Without a preset: nanoGPT's layout with one option changed.
    assert recipes.GPTOptions(**tiny, norm="rms").layout() == dict(
        position="learned", activation="gelu", norm="rms", use_bias=False
    )
    assert recipes.GPTOptions(**tiny, preset="llama_tiny", norm="layer").layout() == dict(norm="layer")


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--decay-fraction", "0"], "--decay-fraction must be in (0.0, 1.0]; received 0.0."),
        (["--num-key-value-heads", "3"], "--num-key-value-heads must divide --num-heads (2); received 3."),
        (["--export", ".."], "--export must be a plain folder name (the model's name); received '..'."),
    ],
)
def test_cli_reports_a_recipe_error_as_its_flag(shakespeare, argv, line, capsys):
    status = cli.main(["train", "gpt", "--data", shakespeare, *argv] + TINY_GPT)
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err == [f"keras-tfm train gpt: error: {line}"]


def test_bert_example_end_to_end(sst2_dir, tmp_path, monkeypatch, capsys):
    out, r = _run_with_results(
        "bert_sst2.py", ["--data", sst2_dir] + TINY_BERT, tmp_path, monkeypatch, capsys
    )
    assert "SST-2 dev accuracy" in out
    # Shares of right labels among the 8 dev and 6 test sentences of `sst2_dir`.
    assert r["dev_accuracy"] * 8 == pytest.approx(round(r["dev_accuracy"] * 8), abs=1e-4)
    assert r["test_accuracy"] * 6 == pytest.approx(round(r["test_accuracy"] * 6), abs=1e-4)
    assert r["mlm_steps"] == 3 and r["finetune_steps"] == 3


def test_translate_example_end_to_end(spa_file, tmp_path, monkeypatch, capsys):
    out, r = _run_with_results(
        "translate.py", ["--data", spa_file] + TINY_SEQ2SEQ, tmp_path, monkeypatch, capsys
    )
    assert "sacreBLEU" in out and "chrF" in out and "beam 4" in out and "translation:" in out
    # sacreBLEU's figures of one scoring: BLEU = BP · geometric mean of the n-gram precisions (in %).
    p = r["bleu_precisions"]
    bleu = r["brevity_penalty"] * math.exp(sum(map(math.log, p)) / 4) if min(p) > 0 else 0.0
    assert len(p) == 4 and r["bleu"] == pytest.approx(bleu, rel=1e-6, abs=1e-9)
    assert 0.0 <= r["chrf"] <= 100.0 and 0.0 <= r["token_accuracy"] <= 1.0
    assert len(r["examples"]) == 2 and r["unknown_share"] == 0.0  # byte-level BPE: nothing is unknown
    assert "case:mixed" in r["bleu_signature"]


def test_demo_end_to_end(shakespeare, tmp_path, monkeypatch, capsys):
    """The demo's own part: the export and the sample from it (its training and in-process sample
    are the GPT recipe's, run with XLA and checked in test_gpt_example_end_to_end)."""
    argv = ["--data", shakespeare, "--export-dir", str(tmp_path / "saved_models")] + TINY_GPT
    argv += NO_SAMPLE + NO_XLA
    assert _run_example("demo.py", argv, monkeypatch) == 0
    out = capsys.readouterr().out
    assert "exported the SavedModel to" in out and "sample from the exported SavedModel" in out
    assert os.listdir(tmp_path / "saved_models" / "gpt_shakespeare") == ["1"]


def test_cli_train_gpt_with_backup_and_logs(shakespeare, tmp_path, capsys):
    backup = tmp_path / "backup"
    status = cli.main(
        [
            "train",
            "gpt",
            "--data",
            shakespeare,
            "--backup-dir",
            str(backup),
            "--save-freq",
            "2",
            "--log-dir",
            str(tmp_path / "tb"),
        ]
        + TINY_GPT
        + NO_SAMPLE
        + NO_XLA
    )
    assert status == 0
    assert "validation loss" in capsys.readouterr().out
    assert not backup.exists()  # removed once training completed


def test_cli_errors_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "gpt", "--no-such-option"])
    assert e.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "llama"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2
    for argv in (
        ["--help"],
        ["train", "--help"],
        ["train", "bert", "--help"],
        ["train", "seq2seq", "--help"],
    ):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 0
    out = capsys.readouterr().out
    assert "train" in out and "--pretrain-steps" in out and "--label-smoothing" in out
    for command in ("evaluate", "export", "generate", "plot", "finetune", "embed"):
        assert command in out, command


def test_every_subcommand_module_registers_itself():
    """One way to add a subcommand: a module with `register(subparsers)` listed in `SUBCOMMANDS`."""
    import argparse

    from keras_tfm.cli import SUBCOMMANDS

    names = []
    for module in SUBCOMMANDS:
        subparsers = argparse.ArgumentParser().add_subparsers(dest="command")
        module.register(subparsers)
        names += list(subparsers.choices)
    assert names == ["train", "evaluate", "export", "generate", "finetune", "embed", "plot"]


def test_console_help_in_a_subprocess():
    """`python -m keras_tfm_console` (the console script's launcher) in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-m", "keras_tfm_console", "train", "gpt", "--help"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--manual-dir" in proc.stdout and "--max-length" in proc.stdout and proc.stderr == ""


@pytest.mark.parametrize("name", ["gpt", "bert", "seq2seq"])
def test_one_vocabulary_of_flags_and_keyword_arguments(name):
    """Every option of a recipe is a flag spelled like its keyword argument, with the same default."""
    import argparse
    import dataclasses

    from keras_tfm import recipes
    from keras_tfm.cli import train

    recipe = recipes.RECIPES[name]
    fields = {f.name: f for f in dataclasses.fields(recipe.options)}
    assert set(train.RECIPE_FLAGS[name]) <= set(fields)  # no flag without its option
    parser = argparse.ArgumentParser()
    train.add_recipe_options(parser, name)
    required = ["--data", "x"] if fields["data"].default is dataclasses.MISSING else []
    parsed = vars(parser.parse_args(required))
    assert set(parsed) == set(fields)
    for field in fields.values():
        if field.default is not dataclasses.MISSING:
            assert parsed[field.name] == field.default, field.name
    spellings = {s for action in parser._actions for s in action.option_strings}
    assert {
        "--d-model",
        "--num-layers",
        "--num-heads",
        "--d-ff",
        "--steps",
        "--output",
        "--export",
    } <= spellings
    assert ("--max-length" in spellings) == (name != "seq2seq")
    old = {
        "--block-size",
        "--sequence-length",
        "--kv-heads",
        "--n-embd",
        "--n-layer",
        "--n-head",
        "--data-dir",
    }
    assert not old & spellings


def test_gpt_sample_text_runs_past_the_context():
    from keras_tfm import models, recipes

    model = models.gpt(vocabulary_size=11, max_length=8, num_layers=1, num_heads=2, d_model=16)
    ids = recipes.sample_text(model, [3, 4, 5], 21, max_length=8, temperature=0.0)
    assert len(ids) == 21 and all(0 <= t < 11 for t in ids)
    assert ids == recipes.sample_text(model, [3, 4, 5], 21, max_length=8, temperature=0.0)
    # Greedy: 5 tokens fill the context, the 6th is chosen from all 8; then the window restarts from
    # the last 4 ids (generation.sliding_window).
    head = recipes.sample_text(model, [3, 4, 5], 6, max_length=8, temperature=0.0)
    assert ids[:6] == head
    assert ids[6:10] == recipes.sample_text(model, ([3, 4, 5] + head)[-4:], 4, max_length=8, temperature=0.0)


def test_nanogpt_init_scales_residual_projections_and_freezes_norm_offsets():
    import numpy as np

    from keras_tfm import models, recipes

    model = models.gpt(
        vocabulary_size=11, max_length=8, num_layers=2, num_heads=2, d_model=64, use_bias=False
    )
    before = model.blocks[0].self_attention_layer.query_dense.kernel.numpy().copy()
    recipes.nanogpt_init(model, 2, seed=0)
    for block in model.blocks:
        for dense in (block.self_attention_layer.output_dense, block.feed_forward.output_dense):
            assert abs(float(np.std(dense.kernel.numpy())) - 0.01) < 0.002  # 0.02 / sqrt(2 * 2)
        assert not block.self_attention_norm.beta.trainable and block.feed_forward_norm.gamma.trainable
    assert not model.final_norm.beta.trainable
    np.testing.assert_array_equal(model.blocks[0].self_attention_layer.query_dense.kernel.numpy(), before)


def test_vit_digits_example_data_errors(tmp_path):
    import numpy as np

    example = runpy.run_path(os.path.join(EXAMPLES, "vit_digits.py"), run_name="example_vit_digits")
    with pytest.raises(FileNotFoundError, match="--data"):
        example["find_digits_csv"](str(tmp_path / "missing.csv.gz"))
    # a tiny digits-format CSV (64 pixels in 0..16, then the label) loads as 8×8×1 images
    rows = np.concatenate(
        [np.random.default_rng(0).integers(0, 17, (20, 64)), np.arange(20)[:, None] % 10], axis=1
    )
    np.savetxt(tmp_path / "digits.csv", rows, fmt="%d", delimiter=",")
    images, labels = example["load_digits"](str(tmp_path / "digits.csv"))
    assert images.shape == (20, 8, 8, 1) and list(labels[:3]) == [0, 1, 2]
    np.testing.assert_allclose(images.reshape(20, 64) * 16, rows[:, :64], atol=1e-5)  # pixels / 16
    train, test = example["stratified_split"](labels, 0.5)
    assert len(set(train) & set(test)) == 0 and len(train) + len(test) == 20
