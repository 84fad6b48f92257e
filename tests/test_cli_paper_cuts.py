"""The command line's paper cuts (issue 27 §3): missing parents of output paths are created, no TensorFlow
C++ log line reaches the console, one rule for where exports go, a progress line that ends at the steps
run, warnings that read as messages, and `generate` printing the prompt with its completion.

`native_log_lines` and `default_logging_env` are shared with `test_cli_workflow.py`, whose subprocesses
(`train gpt|bert|seq2seq`, `export`, `generate`, `evaluate`) are checked for C++ log lines there; the
subcommands it does not run in a subprocess (`finetune`, `embed`, `plot`) run here in one process.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from keras_tfm import cli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TINY_BERT = os.path.join(HERE, "fixtures", "pretrained", "tiny_bert")
TIMEOUT = 600
TINY_GPT = [
    "--num-layers", "1", "--num-heads", "2", "--d-model", "16", "--d-ff", "32", "--batch-size", "4",
    "--no-jit-compile", "--verbose", "0", "--steps", "2", "--eval-interval", "2", "--eval-iters", "1",
    "--max-length", "8", "--sample-tokens", "0",
]  # fmt: skip

# --------------------------------------------------------------------------- #
# TensorFlow's C++ log lines.
# --------------------------------------------------------------------------- #

#: A line of TensorFlow's C++ logging: absl's prefix (severity, date, time, thread, file:line), absl's
#: notice before its log is initialised, or the known lines whose prefix may be on another line.
NATIVE_LOG_LINE = re.compile(
    r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"
    r"|All log messages before absl::InitializeLog"
    r"|oneDNN|cpu_feature_guard|To enable the following instructions|cuInit|cuda drivers"
)


def native_log_lines(*texts):
    """The lines of `texts` (a command's stdout, stderr) that TensorFlow's C++ logging wrote."""
    return [line for text in texts for line in text.splitlines() if NATIVE_LOG_LINE.search(line)]


def default_logging_env():
    """This process's environment without TensorFlow's log settings (`TF_CPP_*`; CI sets
    TF_CPP_MIN_LOG_LEVEL=2): a subprocess started with it runs with the command's default logging. This
    checkout comes first on PYTHONPATH (the subprocess may run in another folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_CPP_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    return env


def test_native_log_lines_are_recognised():
    """The lines seen on the console before the fix are found; the CLI's own lines are not."""
    seen = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "E0000 00:00:1795649481.834095   22742 util.cc:131] oneDNN supports DT_INT64 only on platforms "
        "with AVX-512. Falling back to the default Eigen-based implementation if present.",
        "I0000 00:00:1795649424.907055   21950 cudart_stub.cc:31] Could not find cuda drivers on your machine.",
        "W0000 00:00:1795649424.907055   21950 op_kernel.cc:1857] OP_REQUIRES failed at strided_slice_op.cc",
    ]
    ours = [
        "3/3 - 2s - 0s/step - accuracy: 0.5833 - loss: 0.6915",
        "keras-tfm finetune: warning: from_pretrained('x'): 2 weight(s) of the classifier model are not in",
        "keras-tfm train gpt: error: --output: cannot write into '/x' (permission denied).",
    ]
    assert native_log_lines("\n".join(seen + ours)) == seen


# --------------------------------------------------------------------------- #
# Output paths: missing parents are created; an unwritable one is one line naming the flag.
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "input.txt").write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n\n" * 20)
    rng = np.random.default_rng(0)
    words = ["quick", "brown", "fox", "funny", "film", "bad", "good", "movie", "lazy", "dog"]
    rows = [f"{i % 2} {' '.join(rng.choice(words, size=3 + i % 5))}" for i in range(40)]
    (root / "train.txt").write_text("\n".join(rows) + "\n")
    (root / "empty.txt").write_text("")
    return root


def test_train_creates_the_missing_parents_of_every_output_path(data, tmp_path, capsys):
    """README's `keras-tfm train gpt --data input.txt --output runs/gpt` on a fresh checkout: `runs` is
    created; so are the parents of --results, --log-dir and --backup-dir."""
    paths = {
        "--output": tmp_path / "runs" / "deep" / "gpt",
        "--results": tmp_path / "results" / "deep" / "gpt.json",
        "--log-dir": tmp_path / "logs" / "deep" / "gpt",
        "--backup-dir": tmp_path / "backups" / "deep" / "gpt",
    }
    argv = ["train", "gpt", "--data", str(data / "input.txt"), *TINY_GPT]
    assert cli.main(argv + [str(a) for pair in paths.items() for a in pair]) == 0, capsys.readouterr().err
    assert sorted(os.listdir(paths["--output"])) == ["model.keras", "tokenizer.vocab", "training.json"]
    assert json.loads(paths["--results"].read_text())["steps"] == 2
    assert paths["--log-dir"].is_dir() and paths["--backup-dir"].parent.is_dir()


def test_a_failed_run_creates_no_parent(data, tmp_path, capsys):
    """Parents are created when the run writes, not before: a run that fails leaves nothing."""
    argv = ["train", "gpt", "--data", str(data / "empty.txt"), "--output", str(tmp_path / "runs" / "gpt")]
    assert cli.main(argv + TINY_GPT) == 2
    assert "--data" in capsys.readouterr().err and os.listdir(tmp_path) == []


def _argv(data, target):
    """{case: (argv writing to `target`, the flag named)} for every output path flag of every subcommand."""
    gpt = ["train", "gpt", "--data", str(data / "input.txt"), *TINY_GPT]
    finetune = ["finetune", "--checkpoint", TINY_BERT, "--data", str(data / "train.txt"), "--steps", "1"]
    return {
        "train-output": ([*gpt, "--output", target], "--output"),
        "train-results": ([*gpt, "--results", os.path.join(target, "r.json")], "--results"),
        "train-log-dir": ([*gpt, "--log-dir", target], "--log-dir"),
        "train-backup-dir": ([*gpt, "--backup-dir", target], "--backup-dir"),
        "train-export-dir": ([*gpt, "--export", "x", "--export-dir", target], "--export-dir"),
        "finetune-output": ([*finetune, "--output", target], "--output"),
        "finetune-export-dir": ([*finetune, "--export", "x", "--export-dir", target], "--export-dir"),
        "export-export-dir": (["export", "--model", str(data), "--name", "x", "--export-dir", target], "--export-dir"),
        "plot-output": (["plot", "pe", "--output", os.path.join(target, "pe.png")], "--output"),
    }  # fmt: skip


CASES = list(_argv(pathlib.Path("data"), "target"))


@pytest.mark.parametrize("case", CASES)
def test_an_unwritable_parent_is_one_line_naming_the_flag(case, data, tmp_path, capsys, monkeypatch):
    """The nearest existing folder of the path cannot be written: one line naming the flag, exit status 2,
    nothing written (the check runs before any training or loading)."""
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real_access(p, mode)
    )
    argv, flag = _argv(data, str(tmp_path / "new" / "deep"))[case]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and f"error: {flag}: cannot write into" in err[0] and "permission denied" in err[0]
    ), err
    assert os.listdir(tmp_path) == []


def test_a_parent_that_is_a_file_is_one_line_naming_the_flag(data, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert cli.main(["plot", "pe", "--output", str(tmp_path / "f" / "pe.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error: --output: " in err[0] and "f' is a file" in err[0], err
    assert os.listdir(tmp_path) == ["f"]


# --------------------------------------------------------------------------- #
# finetune, embed and plot with the default logging, in one process.
# --------------------------------------------------------------------------- #

#: Runs each command of argv[1] (a JSON list of argument lists) through the console script's launcher, in
#: one process to share TensorFlow's import (the quieting is per process; the log lines of a command's
#: ops at run time are what differ), with a marker line between them on stdout and stderr.
DRIVER = """
import json, sys
from keras_tfm_console.launcher import main
for argv in json.loads(sys.argv[1]):
    for stream in (sys.stdout, sys.stderr):
        print("=== " + argv[0], file=stream, flush=True)
    status = main(argv)
    sys.stdout.flush(); sys.stderr.flush()
    print(f"=== status {status}", flush=True)
"""


def _split(text):
    """{command: its lines} of the driver's output."""
    parts, name = {}, None
    for line in text.splitlines():
        if line.startswith("=== status"):
            continue
        if line.startswith("=== "):
            name = line[4:]
            parts[name] = []
        elif name is not None:
            parts[name].append(line)
    return parts


@pytest.fixture(scope="module")
def console(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("console")
    commands = [
        # --steps 3 of 5 batches: the progress line must say 3/3; not a terminal: --verbose 2.
        ["finetune", "--checkpoint", TINY_BERT, "--data", str(data / "train.txt"), "--steps", "3",
         "--batch-size", "8", "--output", str(root / "runs" / "deep" / "ft")],
        ["embed", "--checkpoint", TINY_BERT, "a funny film"],
        ["plot", "pe", "--length", "8", "--d-model", "8", "--output", str(root / "pictures" / "pe.png")],
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(commands)],
        capture_output=True,
        text=True,
        env=default_logging_env(),
        cwd=root,
        timeout=TIMEOUT,
    )
    return {"root": root, "proc": proc, "out": _split(proc.stdout), "err": _split(proc.stderr)}


def test_no_tensorflow_log_line_on_the_console(console):
    proc = console["proc"]
    assert proc.returncode == 0 and proc.stdout.count("=== status 0") == 3, (proc.stdout, proc.stderr[-3000:])
    assert not native_log_lines(proc.stdout, proc.stderr)
    assert set(console["out"]) == {"finetune", "embed", "plot"}


def test_finetune_creates_the_parents_of_its_output(console):
    ft = console["root"] / "runs" / "deep" / "ft"
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(ft))
    assert f"checkpoint: {ft}" in console["out"]["finetune"]


def test_finetune_progress_ends_at_the_steps_run(console):
    lines = console["out"]["finetune"]
    progress = [line for line in lines if re.match(r"^\d+/\d+ ", line)]
    assert len(progress) == 1 and progress[0].startswith("3/3 - "), lines  # an epoch has 5 batches
    assert "fine-tuned 3 steps" in "\n".join(lines)


def test_finetune_warning_reads_as_a_message(console):
    """The untrained classifier head is one line, `PROG: warning: ...`: no file, line number or source line."""
    err = console["err"]["finetune"]
    assert err and all(
        line.startswith("keras-tfm finetune: warning: BertClassifier.from_preset(") for line in err
    ), err
    head = [line for line in err if "not in the checkpoint" in line]
    assert len(head) == 1 and "['classifier.weight', 'classifier.bias']" in head[0]


def test_embed_and_plot_ran(console):
    (line,) = console["out"]["embed"]
    assert json.loads(line)["text"] == "a funny film"
    assert all(line.startswith("keras-tfm embed: warning: ") for line in console["err"]["embed"])
    assert (console["root"] / "pictures" / "pe.png").read_bytes().startswith(b"\x89PNG")


def test_finetune_from_python_warns_exports_under_output_and_its_bar_counts_the_steps_run(
    data, tmp_path, capsys, monkeypatch
):
    """`finetune --output DIR --export NAME` exports to DIR/saved_models/NAME like `train` (the export
    itself is `keras-tfm train bert --export`'s, tested in test_cli_workflow.py: recorded here). Only the
    command line shows a warning as a message: `finetune_checkpoint` still warns. With --verbose 1
    (Keras's bar, a terminal's default) and 7 steps of 5-batch epochs, the first epoch's bar counts to 5
    and the second's to 2 (Keras's own counts to 5 and ends at "5/5")."""
    import keras_tfm.export
    from keras_tfm import recipes

    targets = []
    monkeypatch.setattr(
        keras_tfm.export,
        "export_for_serving",
        lambda model, target, **kwargs: targets.append(target) or os.path.join(target, "1"),
    )
    output = tmp_path / "runs" / "deep" / "ft"
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match="not in the checkpoint"):
        results = recipes.finetune_checkpoint(
            checkpoint=TINY_BERT, data=str(data / "train.txt"), steps=7, batch_size=8, verbose=1,
            output=str(output), export="sst2",
        )  # fmt: skip
    assert results["steps"] == 7
    assert targets == [str(output / "saved_models" / "sst2")] and "config.json" in os.listdir(output)
    assert results["export_path"] == str(output / "saved_models" / "sst2" / "1")
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # without the bar's colours
    first, second = out.split("Epoch 2/2")
    assert {total for _, total in re.findall(r"(\d+)/(\d+) ", first.split("Epoch 1/2")[1])} == {"5"}, out
    counts = re.findall(r"(\d+)/(\d+) ", second)
    assert {total for _, total in counts} == {"2"} and counts[-1] == ("2", "2"), out


def test_one_rule_for_where_exports_go():
    from keras_tfm.recipes import FinetuneOptions, GPTOptions
    from keras_tfm.recipes.output import export_base

    for options in (GPTOptions, lambda **kw: FinetuneOptions(checkpoint="c", data="d", **kw)):
        assert export_base(options(output="runs/x", export="m")) == os.path.abspath("runs/x/saved_models")
        assert export_base(options(output="runs/x", export="m", export_dir="e")) == "e"
        assert export_base(options(export="m")) == "saved_models"


# --------------------------------------------------------------------------- #
# generate: the prompt followed by its completion; --completion-only for scripts.
# --------------------------------------------------------------------------- #

#: What each fake signature answers for the prompts ["ROMEO:", "All:"].
ANSWERS = {
    "generate": {"completions": [" Speak.", " Aye."], "num_tokens": [7, 5]},
    "beam_search": {"completions": [" Peace!", " No."], "scores": [-1.0, -2.0]},
    "translate": {"translations": ["Ya veo.", "Hola."]},
    "classify": {"labels": ["positive", "negative"], "probabilities": [[0.1, 0.9], [0.8, 0.2]]},
    "fill_mask": {"filled": ["romeo is here", "all is well"]},
}


@pytest.fixture
def served(monkeypatch):
    """`keras-tfm generate` against a fake export: {"signatures": the names it has, "calls": the calls}."""
    from keras_tfm.export import client, trusted_ops

    state = {"signatures": ["generate"], "calls": []}

    class Loaded:
        @property
        def signatures(self):
            return dict.fromkeys(state["signatures"])

    def call_signature(loaded, name, **inputs):
        state["calls"].append(name)
        return {
            k: np.asarray(v, dtype=object if isinstance(v[0], str) else None)
            for k, v in ANSWERS[name].items()
        }

    monkeypatch.setattr(client, "resolve_version_dir", lambda path, version=None: str(path))
    monkeypatch.setattr(client, "load_served", lambda path, version=None: Loaded())
    monkeypatch.setattr(client, "call_signature", call_signature)
    monkeypatch.setattr(trusted_ops, "check_saved_model_ops", lambda directory: None)  # no saved_model.pb
    return state


def _generate(capsys, *flags):
    status = cli.main(["generate", "--model", "m", "--prompt", "ROMEO:", "--prompt", "All:", *flags])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.strip().splitlines()


@pytest.mark.parametrize(
    "signatures, flags, expected",
    [
        (["generate"], [], ["ROMEO: Speak.", "All: Aye."]),
        (["generate"], ["--completion-only"], [" Speak.", " Aye."]),
        (["generate", "beam_search"], ["--num-beams", "2"], ["ROMEO: Peace!", "All: No."]),
        (["generate", "beam_search"], ["--num-beams", "2", "--completion-only"], [" Peace!", " No."]),
        (["translate"], [], ["Ya veo.", "Hola."]),  # a translation does not continue its source
        (["classify"], [], ["positive", "negative"]),
        (["fill_mask"], [], ["romeo is here", "all is well"]),  # the whole text already
    ],
)
def test_generate_prints_the_prompt_and_its_completion(served, capsys, signatures, flags, expected):
    served["signatures"] = signatures
    assert _generate(capsys, *flags) == (0, expected, [])


def test_generate_json_is_unchanged(served, capsys):
    status, out, _ = _generate(capsys, "--json")
    assert status == 0 and json.loads(out[0])["completions"] == [" Speak.", " Aye."]


@pytest.mark.parametrize(
    "signatures, flags, message",
    [
        (["translate"], ["--completion-only"], "'translate' signature prints its output alone already"),
        (["classify"], ["--completion-only"], "'classify' signature prints its output alone already"),
        (["generate"], ["--completion-only", "--json"], "--json prints the completions alone already"),
    ],
)
def test_completion_only_where_there_is_no_prompt_is_refused(served, capsys, signatures, flags, message):
    served["signatures"] = signatures
    status, out, err = _generate(capsys, *flags)
    assert (status, out, served["calls"]) == (2, [], [])
    assert (
        len(err) == 1
        and err[0].startswith("keras-tfm generate: error: --completion-only: ")
        and message in err[0]
    )
