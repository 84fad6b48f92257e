"""From training to a served model with the `keras-tfm` command alone (issue 15).

One module-scoped pipeline runs in subprocesses, the three kinds side by side to share the wall time:
`train gpt|bert|seq2seq --output DIR` (GPT and BERT with `--export NAME`, seq2seq exported afterwards
by `keras-tfm export --model DIR`, which picks up the tokenizers saved beside the model), then
`keras-tfm generate` on each SavedModel (generate / translate / classify) and `keras-tfm evaluate` of
the GPT. Every one runs with TensorFlow's default logging (no `TF_CPP_*` variable) and none may print
a TensorFlow C++ log line (`test_no_tensorflow_log_line_on_the_console`). The bad-input cases run
in-process: they fail before any training.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from test_cli_paper_cuts import default_logging_env, native_log_lines

import keras_tfm
from keras_tfm import cli

TIMEOUT = 600
TINY_MODEL = ["--num-layers", "1", "--num-heads", "2", "--d-model", "16", "--d-ff", "32"]
TINY_RUN = ["--batch-size", "4", "--no-jit-compile", "--verbose", "2"]
GPT = [
    "--steps",
    "2",
    "--eval-interval",
    "2",
    "--eval-iters",
    "1",
    "--max-length",
    "8",
    "--sample-tokens",
    "0",
]
BERT = ["--steps", "2", "--eval-interval", "1", "--vocabulary-size", "60", "--max-length", "12"]
BERT += ["--finetune-batch-size", "8"]
SEQ2SEQ = ["--steps", "2", "--eval-interval", "2", "--test-pairs", "8", "--bleu-pairs", "2", "--show", "0"]
SEQ2SEQ += ["--max-words", "6", "--warmup-steps", "2"]


def _write_data(folder):
    lines = ["First Citizen:\nBefore we proceed any further, hear me speak.\n\n", "All:\nSpeak, speak.\n\n"]
    (folder / "input.txt").write_text("".join(lines[i % 2] for i in range(40)))
    sst2 = folder / "sst2"
    sst2.mkdir()
    good = ["a gorgeous , witty film", "a fun and moving story", "good acting and a great script"]
    bad = ["a dull , boring mess", "bad acting and a weak script", "the worst film of the year"]
    for split, n in (("train", 24), ("dev", 8)):
        rows = [f"1 {good[i % 3]}" if i % 2 else f"0 {bad[i % 3]}" for i in range(n)]
        (sst2 / f"stsa.binary.{split}").write_text("\n".join(rows) + "\n")
    pairs = [
        ("Go.", "Ve."),
        ("Hi.", "Hola."),
        ("Run!", "¡Corre!"),
        ("I see.", "Ya veo."),
        ("Thanks.", "Gracias."),
    ]
    (folder / "spa.txt").write_text("".join(f"{en}\t{es}\tCC-BY 2.0\n" for en, es in pairs * 8))


def _start(*argv):
    return subprocess.Popen(
        [sys.executable, "-m", "keras_tfm_console", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=default_logging_env(),  # the command sets its own level
    )


def _finish(procs):
    """{name: (returncode, stdout, stderr)} once every process of `procs` {name: Popen} has ended."""
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
        out[name] = (proc.returncode, stdout, stderr)
    return out


def _ok(result):
    code, stdout, stderr = result
    assert code == 0, (stdout[-2000:], stderr[-3000:])
    return stdout


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    _write_data(root)
    runs = {k: root / k for k in ("gpt", "bert", "seq2seq")}
    trained = _finish(
        {
            "gpt": _start(
                "train", "gpt", "--data", str(root / "input.txt"), "--output", str(runs["gpt"]), "--export",
                "shakespeare", *TINY_MODEL, *TINY_RUN, *GPT,
            ),
            "bert": _start(
                "train", "bert", "--data", str(root / "sst2"), "--output", str(runs["bert"]), "--export", "sst2",
                *TINY_MODEL, *TINY_RUN, *BERT,
            ),
            "seq2seq": _start(
                "train", "seq2seq", "--data", str(root / "spa.txt"), "--output", str(runs["seq2seq"]),
                *TINY_MODEL, *TINY_RUN, *SEQ2SEQ,
            ),
        }
    )  # fmt: skip
    exported = {}
    if trained["seq2seq"][0] == 0:
        served = root / "served" / "deep"  # missing parents are created
        exported = _finish(
            {
                "seq2seq": _start(
                    "export",
                    "--model",
                    str(runs["seq2seq"]),
                    "--name",
                    "mt",
                    "--export-dir",
                    str(served),
                    "--max-beams",
                    "2",  # fewer decoding loops to trace: a faster test
                )
            }
        )
        exported["seq2seq_dir"] = served / "mt"
    generated = _finish(
        {
            **({"gpt": _start("generate", "--model", str(runs["gpt"] / "saved_models" / "shakespeare"), "--prompt",
                              "All:", "--json")} if trained["gpt"][0] == 0 else {}),
            **({"bert": _start("generate", "--model", str(runs["bert"] / "saved_models" / "sst2"), "--prompt",
                               "a fun film", "--prompt", "a dull mess", "--json")} if trained["bert"][0] == 0 else {}),
            **({"seq2seq": _start("generate", "--model", str(exported["seq2seq_dir"]), "--prompt", "I see.",
                                  "--json")} if exported.get("seq2seq", (1,))[0] == 0 else {}),
            **({"evaluate_gpt": _start("evaluate", "--model", str(runs["gpt"]), "--data", str(root / "input.txt"),
                                       "--json")} if trained["gpt"][0] == 0 else {}),
        }
    )  # fmt: skip
    return {"root": root, "runs": runs, "trained": trained, "exported": exported, "generated": generated}


def _check_output_folder(folder, task, tokenizer_files):
    assert sorted(p for p in os.listdir(folder) if p != "saved_models") == sorted(
        ["model.keras", "training.json", *tokenizer_files]
    )
    assert not [p for p in os.listdir(folder.parent) if p.startswith(f".{folder.name}.")]  # no temporary left
    info = json.loads((folder / "training.json").read_text())
    assert info["task"] == task and info["arguments"]["num_layers"] == 1
    seconds = info["seconds"]
    stages = ["train_seconds"] if task != "bert" else ["pretrain_seconds", "finetune_seconds"]
    assert 0 < sum(seconds[s] for s in stages) < TIMEOUT, seconds  # each run's wall time, within the test's
    return info


def test_gpt_train_export_generate(pipeline):
    stdout = _ok(pipeline["trained"]["gpt"])
    # Not a terminal: --verbose 2, one line per epoch ("2/2 - 3s - ... - val_loss: ..."), no ANSI bar.
    assert "\x1b[" not in stdout and re.search(r"^2/2 - .* - val_loss: ", stdout, re.M), stdout
    info = _check_output_folder(pipeline["runs"]["gpt"], "gpt", ["tokenizer.vocab"])
    assert info["metrics"]["steps"] == 2 and info["arguments"]["max_length"] == 8
    # Two steps of a tiny model: still about the loss of a uniform guess over the vocabulary.
    vocabulary = len((pipeline["runs"]["gpt"] / "tokenizer.vocab").read_text(encoding="utf-8").splitlines())
    assert abs(info["metrics"]["val_loss"] - math.log(vocabulary)) < 0.5, (info["metrics"], vocabulary)
    out = json.loads(_ok(pipeline["generated"]["gpt"]))
    # The default --max-new-tokens (64) works for any context: past the 8-character context the served
    # `generate` slides its window (issue 15 §2).
    assert len(out["completions"]) == 1 and out["num_tokens"] == [64]
    assert len(out["completions"][0]) == 64


def test_no_tensorflow_log_line_on_the_console(pipeline):
    """train gpt|bert|seq2seq, export, generate and evaluate, each with the default logging."""
    runs = {
        f"{stage} {name}": result
        for stage in ("trained", "exported", "generated")
        for name, result in pipeline[stage].items()
        if isinstance(result, tuple)
    }
    assert len(runs) == 8 and all(code == 0 for code, _, _ in runs.values()), runs
    noise = {name: native_log_lines(stdout, stderr) for name, (_, stdout, stderr) in runs.items()}
    assert not any(noise.values()), noise


def test_seq2seq_train_export_translate(pipeline):
    _ok(pipeline["trained"]["seq2seq"])
    _check_output_folder(
        pipeline["runs"]["seq2seq"], "seq2seq", ["source_tokenizer.vocab", "target_tokenizer.vocab"]
    )
    version = _ok(pipeline["exported"]["seq2seq"]).strip()
    assert version == str(pipeline["exported"]["seq2seq_dir"] / "1")
    out = json.loads(_ok(pipeline["generated"]["seq2seq"]))
    assert len(out["translations"]) == 1 and isinstance(out["translations"][0], str)


def test_bert_train_export_classify(pipeline):
    stdout = _ok(pipeline["trained"]["bert"])
    assert "1 steps of 4 sentences" in stdout and "1 steps of 8" in stdout  # --steps 2 = the whole run
    info = _check_output_folder(pipeline["runs"]["bert"], "bert", ["tokenizer.vocab"])
    assert info["metrics"]["mlm_steps"] + info["metrics"]["finetune_steps"] == 2
    assert info["labels"] == ["negative", "positive"]
    out = json.loads(_ok(pipeline["generated"]["bert"]))
    assert set(out["labels"]) <= {"negative", "positive"} and len(out["probabilities"]) == 2


def _evaluate(pipeline, kind, data, capsys):
    argv = [
        "evaluate",
        "--model",
        str(pipeline["runs"][kind]),
        "--data",
        str(pipeline["root"] / data),
        "--json",
    ]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["task"] == kind
    return out


def _load(folder, tokenizer="tokenizer.vocab"):
    import keras

    from keras_tfm.tokenizers import load_tokenizer

    return keras.saving.load_model(folder / "model.keras", compile=False), load_tokenizer(folder / tokenizer)


def test_evaluate_gpt_is_the_mean_next_character_loss(pipeline):
    import numpy as np

    _ok(pipeline["trained"]["gpt"])
    out = json.loads(_ok(pipeline["generated"]["evaluate_gpt"]).strip().splitlines()[-1])  # a subprocess
    assert out["task"] == "gpt"
    model, tokenizer = _load(pipeline["runs"]["gpt"])
    assert model.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()  # the .keras file carries it
    ids = tokenizer((pipeline["root"] / "input.txt").read_text()).numpy()
    T = model.max_length
    n = (len(ids) - 1) // T  # the non-overlapping windows
    x = np.stack([ids[i * T : i * T + T] for i in range(n)])
    y = np.stack([ids[i * T + 1 : i * T + T + 1] for i in range(n)])
    logits = np.asarray(model.predict(x, verbose=0), np.float64)
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    loss = -np.take_along_axis(log_probs, y[..., None], -1).mean()
    assert out["characters"] == len(ids)
    assert out["loss"] == pytest.approx(loss, rel=1e-4)
    assert out["perplexity"] == pytest.approx(math.exp(loss), rel=1e-4)


def test_evaluate_bert_is_the_share_of_right_labels(pipeline, capsys):
    import numpy as np

    _ok(pipeline["trained"]["bert"])
    out = _evaluate(pipeline, "bert", "sst2/stsa.binary.dev", capsys)
    model, tokenizer = _load(pipeline["runs"]["bert"])
    assert model.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()  # the .keras file carries it
    rows = [
        line.split(" ", 1)
        for line in (pipeline["root"] / "sst2" / "stsa.binary.dev").read_text().splitlines()
    ]
    ids = tokenizer([sentence for _, sentence in rows]).numpy().astype("int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids != 0).astype("int32")}
    predicted = np.asarray(model.predict(inputs, verbose=0)).argmax(-1)
    assert out["sentences"] == len(rows) == 8
    assert out["accuracy"] == pytest.approx(np.mean(predicted == [int(label) for label, _ in rows]))


def test_evaluate_seq2seq_scores_every_pair(pipeline, capsys):
    _ok(pipeline["trained"]["seq2seq"])
    model, tokenizer = _load(pipeline["runs"]["seq2seq"], "source_tokenizer.vocab")
    assert (
        model.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
    )  # one shared BPE, in the .keras file
    out = _evaluate(pipeline, "seq2seq", "spa.txt", capsys)
    assert out["pairs"] == out["bleu_pairs"] == 40  # every pair of the file is short enough
    # sacreBLEU's figures of one scoring: BLEU = BP · geometric mean of the n-gram precisions (in %).
    p = out["bleu_precisions"]
    bleu = out["brevity_penalty"] * math.exp(sum(map(math.log, p)) / 4) if min(p) > 0 else 0.0
    assert len(p) == 4 and out["bleu"] == pytest.approx(bleu, rel=1e-6, abs=1e-9)
    assert 0.0 <= out["chrf"] <= 100.0 and 0.0 <= out["token_accuracy"] <= 1.0
    assert 0.0 < out["test_loss"] < 2 * math.log(300) and out["num_beams"] == 4


# --------------------------------------------------------------------------- bad input


def _one_line_error(capsys, flag):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and "error" in err[0], err
    return err[0]


def _train_gpt(output, *extra, data="input.txt", root=None):
    argv = ["train", "gpt", "--data", str(root / data), "--output", str(output), *extra, *TINY_MODEL, *GPT]
    argv += ["--batch-size", "4", "--no-jit-compile"]
    return cli.main(argv)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    _write_data(root)
    return root


def test_output_below_a_file(data_root, tmp_path, capsys):
    """A missing parent is created (test_cli_paper_cuts.py); one below a file cannot be."""
    (tmp_path / "no").write_text("x")
    assert _train_gpt(tmp_path / "no" / "such" / "run", root=data_root) == 2
    assert "is a file" in _one_line_error(capsys, "--output")
    assert os.listdir(tmp_path) == ["no"]


def test_output_parent_not_writable(data_root, tmp_path, capsys, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real_access(p, mode)
    )
    assert _train_gpt(tmp_path / "run", root=data_root) == 2
    assert "permission denied" in _one_line_error(capsys, "--output")
    assert os.listdir(tmp_path) == []


def test_output_is_a_file(data_root, tmp_path, capsys):
    (tmp_path / "run").write_text("x")
    assert _train_gpt(tmp_path / "run", root=data_root) == 2
    assert "is a file" in _one_line_error(capsys, "--output")


def test_output_holding_a_model_needs_overwrite(data_root, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.keras").write_text("old")
    assert _train_gpt(run, root=data_root) == 2
    assert "--overwrite" in _one_line_error(capsys, "--output")
    assert (run / "model.keras").read_text() == "old" and sorted(os.listdir(tmp_path)) == ["run"]


def test_overwrite_replaces_the_folder_atomically(data_root, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.keras").write_text("old")
    (run / "stale.txt").write_text("old")
    assert _train_gpt(run, "--overwrite", "--verbose", "0", root=data_root) == 0
    assert sorted(os.listdir(run)) == ["model.keras", "tokenizer.vocab", "training.json"]
    assert os.listdir(tmp_path) == ["run"]  # neither the old folder nor a temporary one is left


def test_failed_run_leaves_nothing(data_root, tmp_path, capsys):
    (data_root / "empty.txt").write_text("")
    assert _train_gpt(tmp_path / "run", data="empty.txt", root=data_root) == 2
    assert "empty" in _one_line_error(capsys, "--data")
    assert os.listdir(tmp_path) == []


def test_export_model_folder_without_tokenizer(pipeline, tmp_path, capsys):
    _ok(pipeline["trained"]["gpt"])
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(pipeline["runs"]["gpt"] / "model.keras", bare / "model.keras")
    served = tmp_path / "served"
    assert cli.main(["export", "--model", str(bare), "--name", "x", "--export-dir", str(served)]) == 2
    assert "--tokenizer" in _one_line_error(capsys, "--model")
    assert not (served / "x").exists() or os.listdir(served / "x") == []


def test_export_model_folder_without_model(tmp_path, capsys):
    assert (
        cli.main(["export", "--model", str(tmp_path), "--name", "x", "--export-dir", str(tmp_path / "s")])
        == 2
    )
    assert "model.keras" in _one_line_error(capsys, "--model")


def test_bert_steps_below_two(data_root, tmp_path, capsys):
    argv = [
        "train",
        "bert",
        "--data",
        str(data_root / "sst2"),
        "--steps",
        "1",
        "--output",
        str(tmp_path / "r"),
    ]
    assert cli.main(argv) == 2
    _one_line_error(capsys, "--steps")


def test_version_is_fast_and_imports_no_tensorflow():
    code = (
        "import sys; from keras_tfm_console import launcher; launcher.main(['--version']); "
        "print('tensorflow' in sys.modules, 'keras_tfm' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["keras-tfm", keras_tfm.__version__, "False", "False"] and proc.stderr == ""


def test_quieting_imports_nothing_of_keras_tfm():
    code = "import sys, keras_tfm_console; print(sorted(m for m in sys.modules if m.startswith(('keras', 'tensorflow'))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['keras_tfm_console']"


def test_console_script_is_the_launcher():
    """pyproject's `keras-tfm` entry point names `keras_tfm_console.launcher:main` (what pip installs)."""
    import importlib

    text = open(os.path.join(os.path.dirname(__file__), os.pardir, "pyproject.toml"), encoding="utf-8").read()
    entry = re.search(r'^keras-tfm = "([\w.]+):(\w+)"$', text, re.M)
    assert entry is not None and entry.groups() == ("keras_tfm_console.launcher", "main")
    module, function = entry.groups()
    assert callable(getattr(importlib.import_module(module), function))


def test_console_script_version_is_fast():
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "keras_tfm_console", "--version"], capture_output=True, text=True, timeout=120
    )
    seconds = time.perf_counter() - start
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (
        0,
        f"keras-tfm {keras_tfm.__version__}",
        "",
    )
    assert seconds < 10, seconds  # no TensorFlow import (that takes seconds)
