"""The bad-input table of the command line, the recipes and the files they write (issue 26, part C).

Each case is a bad input and the clear error it must give (exception type + a regex on the message
naming the flag, argument or file), or, marked RECOVERS, a documented recovery the case checks itself.
`keras-tfm` cases run in process (`_line`: one line on stderr, exit status 2) unless a real process
has to be killed (SIGKILL mid-save) or limited (RLIMIT_FSIZE: writes fail with EFBIG). Tiny models,
exports and files are built once for the module (`env`). Run alone:

    python -m pytest tests/test_bad_input_cli.py -q -n 0
"""

import contextlib
import functools
import glob
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from bad_input_table import RECOVERS, Table, interactive_sigint, run_case
from model_harness import tiny_bert_classifier, tiny_gpt, tiny_seq2seq

from keras_tfm import checks

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TINY_BERT = os.path.join(HERE, "fixtures", "pretrained", "tiny_bert")  # 24 positions
TEXT = "hello world, this is a tiny corpus! yes."
WORDS = "the cat sat on a mat dog ran far good bad movie".split()
TINY_GPT_RUN = [
    "--num-layers", "1", "--num-heads", "2", "--d-model", "16", "--d-ff", "32", "--batch-size", "4",
    "--no-jit-compile", "--verbose", "0", "--steps", "1", "--eval-interval", "1", "--eval-iters", "1",
    "--max-length", "8", "--sample-tokens", "0",
]  # fmt: skip
SUBPROCESS_TIMEOUT = 300


# --------------------------------------------------------------------------- #
# Shared objects, built once for the module (lazily: a case builds what it uses).
# --------------------------------------------------------------------------- #


class Env:
    def __init__(self, root):
        self.root = root

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    @functools.cached_property
    def shakespeare(self):
        lines = [
            "First Citizen:\nBefore we proceed any further, hear me speak.\n\n",
            "All:\nSpeak, speak.\n\n",
        ]
        path = self.path("input.txt")
        with open(path, "w") as f:
            f.write("".join(lines[i % 2] for i in range(40)))
        return path

    @functools.cached_property
    def labelled(self):
        path = self.path("labelled.txt")
        with open(path, "w") as f:
            f.write("".join(f"{i % 2} a {'good' if i % 2 else 'bad'} film\n" for i in range(16)))
        return path

    @functools.cached_property
    def a_file(self):
        path = self.path("a_file")
        with open(path, "w") as f:
            f.write("not a folder\n")
        return path

    @functools.cached_property
    def char_tokenizer(self):
        from keras_tfm.tokenizers import CharTokenizer

        return CharTokenizer.from_corpus(TEXT)

    @functools.cached_property
    def gpt(self):
        return tiny_gpt(vocabulary_size=self.char_tokenizer.vocabulary_size, max_length=8)

    @functools.cached_property
    def gpt_folder(self):
        """A training output folder of a tiny GPT (model.keras + tokenizer.vocab)."""
        folder = self.path("gpt_run")
        os.makedirs(folder)
        self.gpt.save(os.path.join(folder, "model.keras"))
        self.char_tokenizer.save_vocabulary(os.path.join(folder, "tokenizer.vocab"))
        return folder

    @functools.cached_property
    def truncated_folder(self):
        folder = self.path("truncated_run")
        shutil.copytree(self.gpt_folder, folder)
        model = os.path.join(folder, "model.keras")
        data = open(model, "rb").read()
        open(model, "wb").write(data[: len(data) // 2])
        return folder

    def export(self, name, model, tokenizer, **kwargs):
        from keras_tfm.export import export_for_serving

        return export_for_serving(
            model, self.path("exports", name), tokenizer=tokenizer, warmup=False, jit_compile=False, **kwargs
        )

    @functools.cached_property
    def gpt_export(self):
        return self.export(
            "gpt",
            self.gpt,
            self.char_tokenizer,
            max_prompt_length=8,
            max_new_tokens_limit=2,
            signatures="all",
        )

    @functools.cached_property
    def translate_export(self):
        from keras_tfm.tokenizers import WordTokenizer

        tok = WordTokenizer(WORDS)
        model = tiny_seq2seq(seed=2, vocabulary_size=tok.vocabulary_size, num_layers=1)
        return self.export("s2s", model, tok, max_beams=2, max_new_tokens_limit=2)

    @functools.cached_property
    def classify_export(self):
        from keras_tfm.tokenizers import WordTokenizer

        tok = WordTokenizer(WORDS)
        model = tiny_bert_classifier(seed=3, num_classes=2, vocabulary_size=tok.vocabulary_size, max_length=8)
        return self.export("clf", model, tok, label_names=["neg", "pos"])

    @functools.cached_property
    def gpt_carrying_tokenizer_folder(self):
        """A training output folder whose model.keras carries its tokenizer (no vocabulary file beside)."""
        folder = self.path("gpt_with_tokenizer")
        os.makedirs(folder)
        model = tiny_gpt(vocabulary_size=self.char_tokenizer.vocabulary_size, max_length=8, num_layers=1)
        model.tokenizer = self.char_tokenizer
        model.save(os.path.join(folder, "model.keras"))
        return folder

    def foreign_saved_model(self, name, writes):
        """A SavedModel with the inputs of a GPT export's `generate` signature whose graph also runs
        `writes(target, prompts)`; returns (its folder, the target path)."""
        import tensorflow as tf

        target = self.path(f"{name}_written")
        scalars = [("max_new_tokens", tf.int32), ("temperature", tf.float32), ("top_k", tf.int32)]
        scalars += [("top_p", tf.float32), ("seed", tf.int32)]
        specs = [tf.TensorSpec([None], tf.string, name="prompts")]
        specs += [tf.TensorSpec([], dtype, name=n) for n, dtype in scalars]

        class Foreign(tf.Module):
            @tf.function(input_signature=specs)
            def generate(self, prompts, max_new_tokens, temperature, top_k, top_p, seed):
                with tf.control_dependencies([writes(target, prompts)]):
                    completions = tf.identity(prompts)
                return {"completions": completions, "num_tokens": tf.zeros(tf.shape(prompts), tf.int32)}

        module = Foreign()
        folder = self.path(name)
        tf.saved_model.save(module, os.path.join(folder, "1"), signatures={"generate": module.generate})
        return folder, target

    @functools.cached_property
    def nan_checkpoint(self):
        """The tiny BERT checkpoint with a finite weight so large that the embeddings overflow to
        inf and NaN (a NaN weight itself is refused when the checkpoint loads)."""
        from safetensors.numpy import load_file, save_file

        folder = self.path("nan_bert")
        shutil.copytree(TINY_BERT, folder)
        weights = os.path.join(folder, "model.safetensors")
        tensors = load_file(weights)
        name = next(
            n for n in sorted(tensors) if "embeddings.LayerNorm.weight" in n or "LayerNorm.gamma" in n
        )
        tensors[name] = np.full_like(tensors[name], np.finfo(np.float32).max)
        save_file(tensors, weights, metadata={"format": "pt"})
        return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return Env(str(tmp_path_factory.mktemp("bad_input_cli")))


TABLE = Table()
case, simple, CASES = TABLE.case, TABLE.simple, TABLE.cases


def _line(*argv):
    """`keras-tfm ARGV` in process: exit status 2 after ONE error line on stderr (warnings aside), no
    traceback, raised as a ValueError (the table matches its text). argparse's own errors (SystemExit 2,
    usage + one error line) count too."""
    from keras_tfm.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main([str(a) for a in argv])
        except SystemExit as exit_:
            status = exit_.code
    lines = [  # a warning is a line `keras-tfm COMMAND: warning: ...` (keras_tfm.cli.usage)
        line
        for line in err.getvalue().splitlines()
        if line.startswith("keras-tfm") and ": warning: " not in line
    ]
    assert status == 2, f"exit status {status}; stderr:\n{err.getvalue()[-3000:]}"
    assert len(lines) == 1 and "Traceback" not in err.getvalue(), (
        f"expected one error line:\n{err.getvalue()[-3000:]}"
    )
    raise ValueError(lines[0])


def _main(*argv):
    """`keras-tfm ARGV` in process: its exit status."""
    from keras_tfm.cli import main

    return main([str(a) for a in argv])


def _interrupted(*argv):
    """`keras-tfm ARGV` in process, stopped by Ctrl-C: exit status 130 after ONE line on stderr, no
    traceback; raised as a ValueError (the table matches its text)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = _main(*argv)
    lines = [line for line in err.getvalue().splitlines() if line.startswith("keras-tfm")]
    assert status == 130, f"exit status {status}; stderr:\n{err.getvalue()[-3000:]}"
    assert len(lines) == 1 and "Traceback" not in err.getvalue(), err.getvalue()[-3000:]
    raise ValueError(lines[0])


def _all_stderr(*argv):
    """`keras-tfm ARGV` in process: exit status 2 and a stderr of exactly one line, raised as a ValueError."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = _main(*argv)
        except SystemExit as exit_:
            status = exit_.code
    lines = err.getvalue().splitlines()
    assert status == 2 and len(lines) == 1, f"exit status {status}; stderr:\n{err.getvalue()[-3000:]}"
    raise ValueError(lines[0])


@contextlib.contextmanager
def _patched(owner, name, value):
    """`owner.name` is `value` inside the block."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _subprocess_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, env.get("PYTHONPATH", "")])
    return env


def _temporaries(target):
    target = os.path.abspath(target)
    return glob.glob(os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tmp-*"))


def _writer(script, *argv):
    """A Python process running `script`, killed by the caller once it prints WRITING (mid-save)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_subprocess_env(),
    )
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    output = []
    for line in proc.stdout:
        output.append(line)
        if line.startswith("WRITING"):
            return proc
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.wait()
    raise AssertionError("the writer ended before saving:\n" + "".join(output)[-4000:])


def _sigkill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


# The writers: each saves for real, then prints WRITING and sleeps inside the save (before the rename).
SAVE_PRETRAINED_WRITER = """
import sys, time
from model_harness import tiny_gpt
import keras_tfm.checkpoints.saving as saving
original = saving.write_weights
def slow(*args, **kwargs):
    out = original(*args, **kwargs)
    print("WRITING", flush=True)
    time.sleep(600)
    return out
saving.write_weights = slow
saving.save_pretrained(tiny_gpt(), sys.argv[1], overwrite=True)
"""

TRAIN_WRITER = """
import sys, time
import keras
original = keras.Model.save
def slow(self, *args, **kwargs):
    original(self, *args, **kwargs)
    print("WRITING", flush=True)
    time.sleep(600)
keras.Model.save = slow
from keras_tfm.cli import main
sys.exit(main(sys.argv[1:]))
"""


# --------------------------------------------------------------------------- #
# 1. Partial state: a writer killed mid-save leaves a temporary the next write removes.
# --------------------------------------------------------------------------- #


@case("save-pretrained-sigkill-temporary-removed-by-next-save", RECOVERS)
def _(env):
    from keras_tfm.checkpoints import save_pretrained
    from keras_tfm.models import from_pretrained

    target = env.path("ckpt")
    killed = _writer(SAVE_PRETRAINED_WRITER, target)
    stale = _temporaries(target)
    assert len(stale) == 1 and f".tmp-{killed.pid}@" in stale[0], stale
    live = _writer(SAVE_PRETRAINED_WRITER, target)  # a second writer, alive during the next save
    _sigkill(killed)
    try:
        save_pretrained(env.gpt, target, overwrite=True)
        left = _temporaries(target)
        assert stale[0] not in left, "the killed writer's temporary was not removed"
        assert len(left) == 1 and f".tmp-{live.pid}@" in left[0], "a live writer's temporary was removed"
    finally:
        _sigkill(live)
    save_pretrained(env.gpt, target, overwrite=True)
    assert _temporaries(target) == []
    assert from_pretrained(target).count_params() == env.gpt.count_params()


@case("train-output-overwrite-sigkill-temporary-removed-by-next-save", RECOVERS)
def _(env):
    from keras_tfm import recipes
    from keras_tfm.recipes import output

    target = env.path("gpt_out")
    shutil.copytree(env.gpt_folder, target)  # an earlier run's output, replaced with --overwrite
    argv = ["train", "gpt", "--data", env.shakespeare, "--output", target, "--overwrite", *TINY_GPT_RUN]
    killed = _writer(TRAIN_WRITER, *argv)
    _sigkill(killed)
    stale = _temporaries(target)
    assert len(stale) == 1 and f".tmp-{killed.pid}@" in stale[0], stale
    assert output.load_trained(target).model.count_params() == env.gpt.count_params()  # the old one, whole
    options = recipes.GPTOptions(output=target, overwrite=True)
    output.save_trained(options, "gpt", env.gpt, {"tokenizer": env.char_tokenizer}, {}, log=lambda *a: None)
    assert _temporaries(target) == [] and not glob.glob(env.path(".gpt_out.*"))


@case("atomic-directory-temporaries-of-live-writers-and-other-hosts-kept", RECOVERS)
def _(env):
    from keras_tfm.atomic_files import atomic_directory

    target = env.path("atomic")
    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    kept = [f".atomic.tmp-{os.getpid()}@{host}-live", ".atomic.tmp-1@another-host.example-x"]
    kept.append(f".other.tmp-{dead.pid}@{host}-x")  # another target's
    kept.append(f".atomic.old-{dead.pid}@{host}-x")  # the only copy while the target is absent
    stale = [f".atomic.tmp-{dead.pid}@{host}-x"]
    for name in kept + stale:
        os.makedirs(env.path(name, "inside"))
    with atomic_directory(target) as temp:
        open(os.path.join(temp, "f"), "w").close()
    assert all(os.path.isdir(env.path(name)) for name in kept)
    assert not any(os.path.exists(env.path(name)) for name in stale)
    assert os.listdir(target) == ["f"]


# --------------------------------------------------------------------------- #
# 2. Output flags checked before training; a failed export keeps the saved model.
# --------------------------------------------------------------------------- #


@case("train-export-dir-a-file", ValueError, r"error: --export-dir: .*a_file' is a file, not a folder")
def _(env):
    _line("train", "gpt", "--data", env.shakespeare, "--output", env.path("never"), "--export", "x",
          "--export-dir", env.a_file, *TINY_GPT_RUN)  # fmt: skip


@case("train-export-dir-below-a-file", ValueError, r"error: --export-dir: cannot create .*a_file' is a file")
def _(env):
    _line("train", "gpt", "--data", env.shakespeare, "--export", "x", "--export-dir",
          os.path.join(env.a_file, "sub"), *TINY_GPT_RUN)  # fmt: skip


@case("train-export-name-a-file", ValueError, r"error: --export: .*a_file' is a file, not a folder")
def _(env):
    _line(
        "train",
        "gpt",
        "--data",
        env.shakespeare,
        "--export",
        "a_file",
        "--export-dir",
        env.root,
        *TINY_GPT_RUN,
    )


@case("finetune-export-dir-a-file", ValueError, r"keras-tfm finetune: error: --export-dir: .* is a file")
def _(env):
    _line(
        "finetune",
        "--checkpoint",
        TINY_BERT,
        "--data",
        env.labelled,
        "--export",
        "x",
        "--export-dir",
        env.a_file,
    )


@case(
    "export-export-dir-a-file",
    ValueError,
    r"keras-tfm export: error: --export-dir: .* is a file, not a folder",
)
def _(env):
    _line("export", "--model", env.gpt_folder, "--name", "x", "--export-dir", env.a_file)


@case("export-name-with-a-slash", ValueError, r"keras-tfm export: error: --name: must be a plain folder name")
def _(env):
    _line("export", "--model", env.gpt_folder, "--name", "../x", "--export-dir", env.path("e"))


@case(
    "train-failed-export-keeps-the-saved-model", ValueError, r"`export`: the trained model is saved in .*kept"
)
def _(env):
    from keras_tfm import recipes
    from keras_tfm.recipes import output

    target = env.path("kept")
    options = recipes.GPTOptions(output=target, export="x")
    original = output.export

    def failing(*args, **kwargs):
        raise NotADirectoryError(20, "Not a directory", "somewhere")

    output.export = failing
    try:
        output.save_trained(
            options, "gpt", env.gpt, {"tokenizer": env.char_tokenizer}, {}, log=lambda *a: None
        )
    finally:
        output.export = original
        assert os.path.isfile(os.path.join(target, "model.keras"))  # saved before the export was tried
        assert output.load_trained(target).model.count_params() == env.gpt.count_params()


@case(
    "train-results-a-folder",
    ValueError,
    r"keras-tfm train gpt: error: --results: .* is a folder; expected a file",
)
def _(env):
    _line("train", "gpt", "--data", env.shakespeare, "--results", env.root, *TINY_GPT_RUN)


@case("train-results-below-a-file", ValueError, r"error: --results: .*a_file' is a file, not a folder")
def _(env):  # a missing parent is created (test_cli_paper_cuts.py); one below a file cannot be
    _line(
        "train",
        "gpt",
        "--data",
        env.shakespeare,
        "--results",
        os.path.join(env.a_file, "r.json"),
        *TINY_GPT_RUN,
    )


@case(
    "train-log-dir-a-file",
    ValueError,
    r"keras-tfm train gpt: error: --log-dir: .*a_file' is a file, not a folder",
)
def _(env):
    _line("train", "gpt", "--data", env.shakespeare, "--log-dir", env.a_file, *TINY_GPT_RUN)


@case("train-backup-dir-a-file", ValueError, r"keras-tfm train gpt: error: --backup-dir: .*a_file' is a file")
def _(env):
    _line("train", "gpt", "--data", env.shakespeare, "--backup-dir", env.a_file, *TINY_GPT_RUN)


# --------------------------------------------------------------------------- #
# 3. --max-length beyond the checkpoint's positions.
# --------------------------------------------------------------------------- #


@case(
    "finetune-max-length-beyond-positions",
    ValueError,
    r"--max-length must be at most the checkpoint's 24 positions",
)
def _(env):
    _line("finetune", "--checkpoint", TINY_BERT, "--data", env.labelled, "--max-length", "64", "--steps", "1")


@case(
    "embed-max-length-beyond-positions",
    ValueError,
    r"--max-length: must be at most the checkpoint's 24 positions",
)
def _(env):
    _line("embed", "--checkpoint", TINY_BERT, "--max-length", "64", "a film")


@case(
    "finetune-recipe-max-length-beyond-positions",
    ValueError,
    r"`max_length` must be at most .*24 positions.*64",
)
def _(env):
    from keras_tfm import recipes

    recipes.finetune_checkpoint(checkpoint=TINY_BERT, data=env.labelled, max_length=64, steps=1, verbose=0)


# --------------------------------------------------------------------------- #
# 4. Seeds: one range, [0, 2**31 - 1], everywhere.
# --------------------------------------------------------------------------- #

for _id, _argv in [
    ("train-seed-negative", ["train", "gpt", "--seed", "-1"]),
    ("train-seed-too-large", ["train", "gpt", "--seed", "99999999999"]),
    ("finetune-seed-negative", ["finetune", "--checkpoint", TINY_BERT, "--data", "x", "--seed", "-1"]),
    ("generate-seed-too-large", ["generate", "--model", "x", "--prompt", "a", "--seed", str(2**40)]),
]:
    CASES.append(
        pytest.param(
            lambda env, a=_argv: _line(*a),
            ValueError,
            r"argument --seed: must be a seed in \[0, 2147483647\]",
            id=_id,
        )
    )


@case("recipe-seed-too-large", ValueError, r"`seed` must be a seed in \[0, 2147483647\].*99999999999")
def _(env):
    from keras_tfm import recipes

    recipes.GPTOptions(seed=99999999999)


@case("finetune-options-seed-negative", ValueError, r"`seed` must be a seed in \[0, 2147483647\]")
def _(env):
    from keras_tfm import recipes

    recipes.FinetuneOptions(checkpoint=TINY_BERT, data=env.labelled, seed=-1)


@case(
    "check-seed-numpy-overflow",
    ValueError,
    r"`seed` must be a seed in \[0, 2147483647\]; received 4294967296",
)
def _(env):
    checks.check_seed("seed", np.int64(2**32))


# --------------------------------------------------------------------------- #
# 5. A full disk (here: a file-size limit, EFBIG) is one line naming the file, exit status 2.
# --------------------------------------------------------------------------- #


@case(
    "train-output-file-too-large",
    ValueError,
    r"cannot write '.*full/model.keras': File too large; it needs about",
)
def _(env):
    import resource

    limit = 16_000

    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    target = env.path("full")
    proc = subprocess.run(
        [sys.executable, "-m", "keras_tfm_console", "train", "gpt", "--data", env.shakespeare,
         "--output", target, *TINY_GPT_RUN],
        capture_output=True, text=True, env=_subprocess_env(), preexec_fn=limit_files, timeout=SUBPROCESS_TIMEOUT,
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("keras-tfm")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert not os.path.exists(target) and _temporaries(target) == []  # nothing half-written
    assert "files are limited to 16.0 KB (ulimit -f)" in errors[0], errors[0]
    raise ValueError(errors[0])


@case(
    "no-space-message-names-file-needed-free",
    OSError,
    r"cannot write '.*model.keras': No space left on device; "
    r"it needs about 2.0 MB; .* free on ",
)
def _(env):
    import errno

    from keras_tfm.atomic_files import write_guard

    with write_guard(env.path("x", "model.keras"), needed=2_000_000):
        raise OSError(errno.ENOSPC, "No space left on device")


# --------------------------------------------------------------------------- #
# 6. keras-tfm plot: bad values are one line, exit status 2.
# --------------------------------------------------------------------------- #

for _id, _argv, _match in [
    ("lr-scale-nan", ["lr", "--lr-scale", "nan"], r"argument --lr-scale: must be a finite number > 0"),
    (
        "lr-learning-rate-negative",
        ["lr", "--learning-rate=-1"],
        r"argument --learning-rate: must be a finite",
    ),
    ("lr-min-ratio-2", ["lr", "--min-ratio", "2"], r"argument --min-ratio: must be a number in \[0, 1\]"),
]:
    CASES.append(pytest.param(lambda env, a=_argv: _line("plot", *a), ValueError, _match, id="plot-" + _id))


@case(
    "plot-output-a-folder", ValueError, r"keras-tfm plot pe: error: --output: .* is a folder; expected a .png"
)
def _(env):
    _line("plot", "pe", "--output", env.root)


@case("plot-attention-ids-beyond-vocabulary", ValueError, r"error: --ids: token ids must be in \[0, \d+\)")
def _(env):
    _line("plot", "attention", "--model", os.path.join(env.gpt_folder, "model.keras"), "--ids", "1,999",
          "--output", env.path("a.png"))  # fmt: skip


@case("plot-attention-ids-beyond-length", ValueError, r"error: --ids: 9 tokens; the model takes at most 8")
def _(env):
    _line("plot", "attention", "--model", os.path.join(env.gpt_folder, "model.keras"), "--ids",
          "1,2,3,4,5,6,7,8,9", "--output", env.path("a.png"))  # fmt: skip


@case("plot-attention-model-not-keras", ValueError, r"error: --model: cannot load .*labelled.txt")
def _(env):
    _line("plot", "attention", "--model", env.labelled, "--ids", "1", "--output", env.path("a.png"))


@case("plot-attention-tokenizer-missing", ValueError, r"error: --tokenizer: .*no such vocabulary file")
def _(env):
    _line("plot", "attention", "--model", os.path.join(env.gpt_folder, "model.keras"), "--text", "hi",
          "--tokenizer", env.path("nope.vocab"), "--output", env.path("a.png"))  # fmt: skip


# --------------------------------------------------------------------------- #
# 7. --eos-id outside the vocabulary.
# --------------------------------------------------------------------------- #


@case(
    "export-eos-id-beyond-vocabulary",
    ValueError,
    r"error: --eos-id.*100000 is outside the model's vocabulary \[0, \d+\): the generator could never stop",
)
def _(env):
    _line(
        "export",
        "--model",
        env.gpt_folder,
        "--name",
        "eos",
        "--export-dir",
        env.path("e"),
        "--eos-id",
        "100000",
    )


@case("export-eos-id-negative", ValueError, r"error: --eos-id must be >= 0; received -5")
def _(env):
    _line("export", "--model", env.gpt_folder, "--name", "eos", "--export-dir", env.path("e"), "--eos-id=-5")


@case(
    "export-for-serving-eos-id-beyond-vocabulary",
    ValueError,
    r"`eos_id`=32 is outside the model's vocabulary \[0, 32\)",
)
def _(env):
    from keras_tfm.export import export_for_serving

    model = tiny_seq2seq(vocabulary_size=32, num_layers=1)
    export_for_serving(model, env.path("e2"), tokenizer=None, kind="seq2seq_lm", eos_id=32, warmup=False)


@case(
    "export-label-names-for-a-gpt",
    ValueError,
    r"keras-tfm export: error: --label-names: a causal_lm model has no use",
)
def _(env):
    _line("export", "--model", env.gpt_folder, "--name", "lab", "--export-dir", env.path("e"), "--label-names", "a,b",
          "--no-warmup", "--no-jit-compile")  # fmt: skip


# --------------------------------------------------------------------------- #
# 8. keras-tfm embed never prints invalid JSON.
# --------------------------------------------------------------------------- #


@case("embed-precision-negative", ValueError, r"--precision: .*-1")
def _(env):
    _line("embed", "--checkpoint", TINY_BERT, "--precision", "-1", "a film")  # printed zeros (round(v, -1))


@case(
    "embed-nan-model", ValueError, r"keras-tfm embed: error: --checkpoint: the model gave non-finite values"
)
def _(env):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            _line("embed", "--checkpoint", env.nan_checkpoint, "a film", "a dog")
        finally:
            assert out.getvalue() == "", "printed before refusing: " + out.getvalue()[:200]


# --------------------------------------------------------------------------- #
# 9. keras-tfm generate refuses a flag the export's signature cannot use.
# --------------------------------------------------------------------------- #

for _id, _export, _flags, _match in [
    (
        "translate-temperature",
        "translate_export",
        ["--temperature", "0.7"],
        r"--temperature: the export's 'translate'",
    ),
    ("translate-top-k", "translate_export", ["--top-k", "3"], r"--top-k: the export's 'translate' signature"),
    (
        "classify-num-beams",
        "classify_export",
        ["--num-beams", "2"],
        r"--num-beams: the export's 'classify' signature",
    ),
    (
        "classify-max-new-tokens",
        "classify_export",
        ["--max-new-tokens", "2"],
        r"--max-new-tokens: .*'classify'",
    ),
    (
        "gpt-beam-with-top-p",
        "gpt_export",
        ["--num-beams", "2", "--top-p", "0.5"],
        r"--top-p: .*'beam_search'",
    ),
    (
        "gpt-max-new-tokens-0",
        "gpt_export",
        ["--max-new-tokens", "0"],
        r"--max-new-tokens: must be at least 1",
    ),
    (
        "gpt-greedy-length-penalty",
        "gpt_export",
        ["--length-penalty", "1.0"],
        r"--length-penalty: .*'generate'",
    ),
]:
    CASES.append(
        pytest.param(
            lambda env, e=_export, f=_flags: _line(
                "generate", "--model", getattr(env, e), "--prompt", "the cat", *f
            ),
            ValueError,
            r"keras-tfm generate: error: " + _match,
            id="generate-" + _id,
        )
    )


@case("generate-translate-beam-flags-still-work", RECOVERS)
def _(env):
    from keras_tfm.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["generate", "--model", env.translate_export, "--prompt", "the cat", "--num-beams", "2",
                       "--length-penalty", "1.0", "--max-new-tokens", "2", "--json"])  # fmt: skip
    assert status == 0 and "translations" in json.loads(out.getvalue())


# --------------------------------------------------------------------------- #
# 10. A truncated model.keras is called damaged, not missing.
# --------------------------------------------------------------------------- #


@case(
    "export-truncated-model",
    ValueError,
    r"keras-tfm export: error: --model: .*model.keras' is damaged or truncated",
)
def _(env):
    _line("export", "--model", env.truncated_folder, "--name", "x", "--export-dir", env.path("e"))


@case(
    "evaluate-truncated-model",
    ValueError,
    r"keras-tfm evaluate: error: --model: .*model.keras' is damaged or trunc",
)
def _(env):
    _line("evaluate", "--model", env.truncated_folder, "--data", env.shakespeare)


@case(
    "load-trained-truncated-model", ValueError, r"`model`: .*model.keras' is damaged or truncated \(\d+ bytes"
)
def _(env):
    from keras_tfm.recipes import load_trained

    load_trained(env.truncated_folder)


@case(
    "load-trained-truncated-training-json", ValueError, r"`model`: .*training.json' is damaged or truncated"
)
def _(env):
    from keras_tfm.recipes import load_trained

    folder = env.path("badjson_run")
    shutil.copytree(env.gpt_folder, folder)
    with open(os.path.join(folder, "training.json"), "w") as f:
        f.write('{"task": "gpt", ')
    load_trained(folder)


# --------------------------------------------------------------------------- #
# 11. Issue 36: nothing ignored in silence, nothing left behind.
# --------------------------------------------------------------------------- #


@case("export-ids-only-model-carrying-its-tokenizer", RECOVERS)
def _(env):
    from keras_tfm.export.trusted_ops import read_saved_model, untrusted_ops

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = _main("export", "--model", env.gpt_carrying_tokenizer_folder, "--name", "ids", "--export-dir",
                       env.path("ids_exports"), "--ids-only", "--no-warmup", "--no-jit-compile")  # fmt: skip
    assert status == 0
    path = out.getvalue().strip()
    names = {n for n in read_saved_model(path).meta_graphs[0].signature_def if not n.startswith("__")}
    assert names == {"serving_default", "generate_ids"}, names  # no text `generate`
    assert untrusted_ops(path) == {}  # and `keras-tfm generate` would run it


@case(
    "export-ids-only-refuses-a-text-signature",
    ValueError,
    r"export: error: --signatures: 'generate' takes and returns text; --ids-only exports the id signatures",
)
def _(env):
    _line("export", "--model", env.gpt_folder, "--name", "x", "--export-dir", env.path("e"), "--ids-only",
          "--signatures", "generate")  # fmt: skip


def _write_file(target, prompts):
    import tensorflow as tf

    return tf.io.write_file(target, prompts[0])


def _save_v2(target, prompts):
    import tensorflow as tf

    return tf.raw_ops.SaveV2(prefix=target, tensor_names=["p"], shape_and_slices=[""], tensors=[prompts])


@case(
    "generate-refuses-a-saved-model-that-writes-a-file",
    ValueError,
    r"generate: error: --model: the SavedModel in .*writer.* holds ops keras_tfm's exports never emit: "
    r"WriteFile \(in __inference_generate_\d+\)\. .*--trust-saved-model",
)
def _(env):
    folder, target = env.foreign_saved_model("writer", _write_file)
    try:
        _line("generate", "--model", folder, "--prompt", "hi")
    finally:
        assert not os.path.exists(target), "the SavedModel ran"


@case("generate-trust-saved-model-runs-a-foreign-one", RECOVERS)
def _(env):
    folder, target = env.foreign_saved_model("trusted_writer", _write_file)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = _main("generate", "--model", folder, "--prompt", "hi", "--trust-saved-model", "--json")
    assert status == 0 and json.loads(out.getvalue())["completions"] == ["hi"]
    assert open(target).read() == "hi"


@case(
    "generate-refuses-checkpoint-ops-outside-the-saver",
    ValueError,
    r"--model: .*holds ops keras_tfm's exports never emit: SaveV2 \(in __inference_generate_\d+\)",
)
def _(env):
    folder, target = env.foreign_saved_model("saver", _save_v2)
    try:
        _line("generate", "--model", folder, "--prompt", "hi")
    finally:
        assert not glob.glob(target + "*"), "the SavedModel ran"


@case("generate-own-exports-hold-only-allowed-ops", RECOVERS)
def _(env):
    from keras_tfm.export.trusted_ops import CHECKPOINT_OPS, op_uses, untrusted_ops

    for export in (env.gpt_export, env.translate_export, env.classify_export):
        path = (
            os.path.join(export, "1")
            if not os.path.isfile(os.path.join(export, "saved_model.pb"))
            else export
        )
        assert untrusted_ops(path) == {}, (export, untrusted_ops(path))
        uses = op_uses(path)
        assert {"SaveV2", "MergeV2Checkpoints"} <= set(uses) and {
            "SaveV2",
            "MergeV2Checkpoints",
        } <= CHECKPOINT_OPS
        assert all(part == "checkpoint" for part, _ in uses["SaveV2"])  # in the saver function alone


@case(
    "export-sigint-mid-write-one-line-nothing-left", ValueError, r"^keras-tfm export: interrupted \(Ctrl-C\)$"
)
def _(env):
    from keras_tfm.export import exporter

    base = env.path("interrupted_exports")

    def interrupted(*args):  # Ctrl-C once the SavedModel is written, before the version is complete
        raise KeyboardInterrupt

    try:
        with _patched(exporter, "_write_export_info", interrupted):
            _interrupted("export", "--model", env.gpt_folder, "--name", "x", "--export-dir", base,
                         "--signatures", "serving_default", "--no-warmup", "--no-jit-compile")  # fmt: skip
    finally:
        assert not os.path.exists(base), os.listdir(base)  # nor its NAME/ nor a temporary


@case(
    "export-full-disk-one-line-nothing-left",
    ValueError,
    r"keras-tfm export: error: cannot write '.*full_exports/x/big': File too large; it needs about .* free on "
    r"'.*bad_input_cli[^/]*'; files are limited to",
)
def _(env):
    import resource

    limit = 16_000

    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    base = env.path("full_exports", "x")
    proc = subprocess.run(
        [sys.executable, "-m", "keras_tfm_console", "export", "--model", env.gpt_folder, "--name", "big",
         "--export-dir", base, "--signatures", "serving_default", "--no-warmup", "--no-jit-compile"],
        capture_output=True, text=True, env=_subprocess_env(), preexec_fn=limit_files, timeout=SUBPROCESS_TIMEOUT,
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("keras-tfm")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert not os.path.exists(env.path("full_exports"))  # nothing half-written, no empty folder
    raise ValueError(errors[0])


def _archive_class():
    """The class of `keras.export.ExportArchive()` that defines `write_out` (a backend's subclass)."""
    import keras

    return next(c for c in type(keras.export.ExportArchive()).__mro__ if "write_out" in vars(c))


@case(
    "train-export-full-disk-nothing-left",
    ValueError,
    r"`export`: the trained model is saved in .*run_full.*, but exporting it failed \(cannot write "
    r"'.*run_full/saved_models/big': File too large",
)
def _(env):
    import tensorflow as tf

    from keras_tfm import recipes
    from keras_tfm.recipes import output

    target = env.path("run_full")

    def full(self, path, **kwargs):
        raise tf.errors.OutOfRangeError(
            None, None, f"{path}/variables/variables_temp.data; File too large [Op:SaveV2]"
        )

    options = recipes.GPTOptions(output=target, export="big")
    archive = _archive_class()
    try:
        with _patched(archive, "add_endpoint", lambda *a, **k: None):  # no tracing: the write fails anyway
            with _patched(archive, "write_out", full):
                output.save_trained(
                    options, "gpt", env.gpt, {"tokenizer": env.char_tokenizer}, {}, log=lambda *a: None
                )
    finally:
        assert os.path.isfile(os.path.join(target, "model.keras"))
        assert os.listdir(target) and not os.path.exists(os.path.join(target, "saved_models"))


class _SigintInAGcCallback:
    """A `StopOnInterrupt` whose first batch end delivers SIGINT inside a garbage-collector callback,
    where Python's own handler would raise a KeyboardInterrupt that is printed and lost (JAX's case)."""

    def __new__(cls, *args, **kwargs):
        import gc

        from keras_tfm.training import interrupt

        class Signalling(interrupt.StopOnInterrupt):
            fired = False

            def on_train_batch_end(self, batch, logs=None):
                if not Signalling.fired:
                    Signalling.fired = True

                    def deliver(phase, info):
                        if phase == "start":
                            signal.raise_signal(signal.SIGINT)

                    gc.callbacks.append(deliver)
                    try:
                        gc.collect()
                    finally:
                        gc.callbacks.remove(deliver)
                super().on_train_batch_end(batch, logs)

        return Signalling(*args, **kwargs)


@case(
    "train-ctrl-c-in-a-gc-callback-stops-between-steps",
    ValueError,
    r"^keras-tfm train gpt: interrupted \(Ctrl-C\): training stopped between two steps, after step \d+ of 50$",
)
def _(env):
    from keras_tfm.training import loop

    target = env.path("interrupted_run")
    try:
        with _patched(loop, "StopOnInterrupt", _SigintInAGcCallback), interactive_sigint():
            _interrupted("train", "gpt", "--data", env.shakespeare, "--output", target, *TINY_GPT_RUN,
                         "--steps", "50", "--eval-interval", "50")  # fmt: skip
    finally:
        assert not os.path.exists(target) and _temporaries(target) == []


for _id, _argv, _match in [
    ("bad-value", ["train", "gpt", "--max-length", "0"], r"^keras-tfm train gpt: error: argument --max-length: "
     r"must be a positive int; received '0' \(`keras-tfm train gpt --help` lists the options\)$"),
    ("unknown-flag", ["plot", "lr", "--nope"], r"^keras-tfm: error: unrecognized arguments: --nope \(`keras-tfm --help`"),
    ("no-command", [], r"^keras-tfm: error: the following arguments are required: COMMAND \(`keras-tfm --help`"),
]:  # fmt: skip
    CASES.append(
        pytest.param(lambda env, a=_argv: _all_stderr(*a), ValueError, _match, id="argparse-one-line-" + _id)
    )


@case(
    "plot-output-full-disk-names-the-file-and-its-folder",
    ValueError,
    r"plot pe: error: cannot write '.*/plots/pe.png': No space left on device; .* free on '.*bad_input_cli[^/]*/plots'",
)
def _(env):
    import errno

    from matplotlib.figure import Figure

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with _patched(Figure, "savefig", full):
        _line("plot", "pe", "--length", "8", "--d-model", "8", "--output", env.path("plots", "pe.png"))


@case(
    "plot-pe-length-huge",
    ValueError,
    r"plot pe: error: --length=1000000000 × --d-model=128 .*needs [\d.]+ [TPE]B",
)
def _(env):
    _line("plot", "pe", "--length", 10**9, "--output", env.path("huge.png"))


@case(
    "plot-similarity-length-huge",
    ValueError,
    r"plot similarity: error: --length=1000000 \(the 1000000 × 1000000",
)
def _(env):
    _line("plot", "similarity", "--length", 10**6, "--d-model", "2", "--output", env.path("huge.png"))


TINY_GPT2 = os.path.join(HERE, "fixtures", "pretrained", "tiny_gpt2")


@case(
    "finetune-gpt2-checkpoint-is-not-bert",
    ValueError,
    r"finetune: error: --checkpoint: .*tiny_gpt2' is not a BERT checkpoint \(its config.json has model_type 'gpt2'\)",
)
def _(env):
    _line("finetune", "--checkpoint", TINY_GPT2, "--data", env.labelled, "--steps", "1")


@case(
    "embed-gpt2-checkpoint-is-not-bert", ValueError, r"embed: error: --checkpoint: .*tiny_gpt2' is not a BERT"
)
def _(env):
    _line("embed", "--checkpoint", TINY_GPT2, "a film")


@case(
    "train-data-shorter-than-max-length",
    ValueError,
    r"train gpt: error: --data: its training split has 4 characters, fewer than --max-length \+ 1 = 9",
)
def _(env):
    short = env.path("short.txt")
    with open(short, "w") as f:
        f.write("abcd\n")
    _line("train", "gpt", "--data", short, *TINY_GPT_RUN)


@case("finetune-output-a-file", ValueError, r"finetune: error: --output: .*a_file' is a file, not a folder")
def _(env):
    _line(
        "finetune", "--checkpoint", TINY_BERT, "--data", env.labelled, "--output", env.a_file, "--steps", "1"
    )


@case(
    "export-for-serving-path-a-file",
    ValueError,
    r"`path`: '.*a_file' is a file; expected the model's base folder, which holds its versions",
)
def _(env):
    from keras_tfm.export import export_for_serving

    export_for_serving(env.gpt, env.a_file, tokenizer=env.char_tokenizer, warmup=False)


@case(
    "export-for-serving-path-below-a-file",
    ValueError,
    r"`path`: '.*a_file/sub' lies below the file '.*a_file'",
)
def _(env):
    from keras_tfm.export import export_for_serving

    export_for_serving(env.gpt, os.path.join(env.a_file, "sub"), tokenizer=env.char_tokenizer, warmup=False)


@case(
    "export-for-serving-tokenizer-garbage",
    TypeError,
    r"`tokenizer` must be a keras_tfm tokenizer .*received str",
)
def _(env):
    from keras_tfm.export import export_for_serving

    export_for_serving(env.gpt, env.path("never"), tokenizer="garbage", warmup=False)


@case("export-for-serving-seq2seq-tokenizer-garbage", TypeError, r"`tokenizer` must be a keras_tfm tokenizer")
def _(env):
    from keras_tfm.export import export_for_serving

    model = tiny_seq2seq(vocabulary_size=32, num_layers=1)
    export_for_serving(model, env.path("never"), tokenizer=("garbage", env.char_tokenizer), warmup=False)


# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(("fn", "exc", "match"), CASES)
def test_bad_input_cli(env, fn, exc, match):
    run_case(env, fn, exc, match)


def test_case_ids_are_unique():
    TABLE.assert_ids_unique()
