"""`keras-tfm finetune` of a seq2seq checkpoint, `keras-tfm generate --model CHECKPOINT_FOLDER` and
examples/finetune_seq2seq_anki.py, in one process (`keras_tfm.cli.main`, the example by runpy).

One fine-tuning run serves every test that needs one (module fixture `anki_run`): the example, on
a handful of pairs written here, runs `keras-tfm finetune` on the random-init tiny_marian fixture
(its task found from config.json) and writes the checkpoint and results.json. Generation from a
checkpoint folder is checked against HuggingFace's own outputs (reference.json of the fixtures,
made by tests/fixtures/pretrained/make_family_fixtures.py) and, for the fine-tuned folder, against
the translations the recipe printed before saving it (a save → load → generate round trip).
"""

import json
import os
import runpy
import sys
import warnings

import numpy as np
import pytest

from keras_tfm import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "pretrained")
TINY_MARIAN = os.path.join(FIXTURES, "tiny_marian")
TINY_BERT = os.path.join(FIXTURES, "tiny_bert")
EXAMPLE = os.path.join(ROOT, "examples", "finetune_seq2seq_anki.py")

PAIRS = [
    ("Go.", "Ve."),
    ("Hi.", "Hola."),
    ("Run!", "¡Corre!"),
    ("I see.", "Ya veo."),
    ("Thanks.", "Gracias."),
    ("I won!", "¡He ganado!"),
    ("We lost.", "Perdimos."),
    ("Be kind.", "Sé amable."),
    ("Come here.", "Ven aquí."),
    ("I know.", "Lo sé."),
]


def run(*argv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cli.main(list(argv))


def write_pairs(path, pairs, attribution=True):
    tail = "\tCC-BY 2.0 (France) Attribution: tatoeba.org" if attribution else ""
    path.write_text("".join(f"{s}\t{t}{tail}\n" for s, t in pairs), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def anki_run(tmp_path_factory):
    """The example on 20 Anki-style pairs (4 held out): 2 steps of batch 4, greedy held-out BLEU."""
    folder = tmp_path_factory.mktemp("anki")
    data = write_pairs(folder / "spa.txt", PAIRS * 2)
    argv = [EXAMPLE, "--checkpoint", TINY_MARIAN, "--data", data, "--workdir", str(folder / "work")]
    argv += ["--train-pairs", "16", "--test-pairs", "4", "--steps", "2", "--batch-size", "4"]
    argv += ["--learning-rate", "1e-3", "--max-length", "16", "--num-beams", "1", "--verbose", "0"]
    saved_argv = sys.argv
    sys.argv = argv
    try:
        with pytest.raises(SystemExit) as exit_info, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runpy.run_path(EXAMPLE, run_name="__main__")
    finally:
        sys.argv = saved_argv
    results = json.loads((folder / "work" / "results.json").read_text())
    return exit_info.value.code, folder / "work", results


def test_example_finetunes_through_the_cli_and_reports_bleu(anki_run, capsys):
    status, work, results = anki_run
    assert status == 0
    assert results["steps"] == 2 and results["train_pairs"] == 16
    assert results["bleu_pairs"] == 4 and 0.0 <= results["bleu"] <= 100.0 and 0.0 <= results["chrf"] <= 100.0
    assert results["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert np.isfinite(results["dev_loss"]) and 0.0 <= results["dev_token_accuracy"] <= 1.0
    held_out = [line.split("\t") for line in (work / "test.tsv").read_text(encoding="utf-8").splitlines()]
    assert [e["source"] for e in results["examples"]] == [s for s, _ in held_out[:3]]
    assert [e["reference"] for e in results["examples"]] == [t for _, t in held_out[:3]]


def test_finetuned_folder_loads_back_with_its_tokenizers_and_new_weights(anki_run):
    from keras_tfm.models import Seq2Seq, from_pretrained
    from keras_tfm.tokenizers.unigram import UnigramTokenizer

    _, work, _ = anki_run
    names = set(os.listdir(work / "model"))
    assert {"config.json", "generation_config.json", "model.safetensors"} <= names
    assert {"source.spm", "target.spm", "vocab.json", "tokenizer_config.json"} <= names  # copied
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every weight and the tokenizer read
        tuned = from_pretrained(work / "model")
        original = from_pretrained(TINY_MARIAN)
    assert isinstance(tuned, Seq2Seq) and all(isinstance(t, UnigramTokenizer) for t in tuned.tokenizer)
    assert tuned.generation_config == original.generation_config and tuned.pad_id == original.pad_id
    changed = [
        not np.array_equal(a, b) for a, b in zip(tuned.get_weights(), original.get_weights(), strict=True)
    ]
    assert sum(changed) >= len(changed) // 2  # AdamW moved the weights (norm offsets included)


def test_generate_from_the_finetuned_folder_gives_the_recipes_translations(anki_run, capsys):
    """Saved, loaded and run by `keras-tfm generate`: the held-out translations the recipe made
    in process before saving (greedy, max_length - 1 new tokens)."""
    _, work, results = anki_run
    capsys.readouterr()
    prompts = [arg for e in results["examples"] for arg in ("--prompt", e["source"])]
    assert run("generate", "--model", str(work / "model"), *prompts, "--max-new-tokens", "15", "--json") == 0
    translations = json.loads(capsys.readouterr().out)["translations"]
    assert translations == [e["translation"] for e in results["examples"]]


def _reference(name):
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "reference.json"), encoding="utf-8") as f:
        return json.load(f), dict(np.load(os.path.join(folder, "reference.npz")))


def test_generate_translates_a_checkpoint_folder_as_huggingface(capsys):
    """tiny_marian's HF beam search (4 beams, length penalty 0.8, the checkpoint's forced EOS and
    banned pad id): HF's decoded best beams."""
    ref, _ = _reference("tiny_marian")
    beam = {r["name"]: r for r in ref["runs"]}["beam4_lp0.8"]
    prompts = [arg for source in ref["generation_inputs"]["sources"] for arg in ("--prompt", source)]
    argv = ["generate", "--model", TINY_MARIAN, *prompts, "--num-beams", "4", "--length-penalty", "0.8"]
    assert run(*argv, "--max-new-tokens", str(beam["settings"]["max_new_tokens"]), "--json") == 0
    assert json.loads(capsys.readouterr().out)["translations"] == beam["decoded_best"]


def test_generate_continues_a_decoder_checkpoint_folder_as_huggingface(capsys):
    """tiny_qwen2's greedy completions: HF's tokens up to its EOS, decoded by the checkpoint's
    tokenizer (as tests/test_families_decoders.py), and the prompt printed before each."""
    from keras_tfm.models import from_pretrained
    from keras_tfm.tokenizers import text as text_lib

    ref, arrays = _reference("tiny_qwen2")
    greedy = {r["name"]: r for r in ref["runs"]}["greedy"]
    eos, new = greedy["settings"]["eos_token_id"], greedy["settings"]["max_new_tokens"]
    rows = []
    for row in arrays[greedy["npz_tokens"]][:, -new:].tolist():
        rows.append(row[: row.index(eos) + 1] if eos in row else row)
    tokenizer = from_pretrained(os.path.join(FIXTURES, "tiny_qwen2")).tokenizer
    expected = text_lib.decode(tokenizer, rows)
    prompts = ref["generation_inputs"]["prompts"]
    argv = ["generate", "--model", os.path.join(FIXTURES, "tiny_qwen2"), "--max-new-tokens", str(new)]
    assert run(*argv, *[a for p in prompts for a in ("--prompt", p)], "--json") == 0
    assert json.loads(capsys.readouterr().out)["completions"] == expected


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--model", TINY_BERT, "--prompt", "x"],
            "--model: .*is a 'bert' checkpoint, which generates no text",
        ),
        (
            ["--model", TINY_MARIAN, "--prompt", "x", "--top-k", "3"],
            "--top-k: .*'translate' signature cannot use",
        ),
        (
            ["--model", TINY_MARIAN, "--prompt", "x", "--version", "1"],
            "--version: a checkpoint folder has no",
        ),
        (
            ["--model", TINY_MARIAN, "--prompt", "x", "--completion-only"],
            "--completion-only: only for a decoder",
        ),
    ],
)
def test_generate_refuses_what_a_checkpoint_folder_cannot_do(argv, message, capsys):
    assert run("generate", *argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("keras-tfm generate: error: ")
    assert __import__("re").search(message, err[0]), err[0]


def _bad_inputs(tmp_path):
    good = write_pairs(tmp_path / "good.tsv", PAIRS)
    no_tab = tmp_path / "no_tab.tsv"
    no_tab.write_text("Go.\tVe.\nHi. Hola.\n", encoding="utf-8")
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    empty_side = write_pairs(tmp_path / "empty_side.tsv", [("Go.", "Ve."), ("Hi.", " ")], attribution=False)
    missing = str(tmp_path / "missing.tsv")
    return good, {
        "missing": (["--data", missing], f"--data: no such file: '{missing}'"),
        "no tab": (["--data", str(no_tab)], f"--data: {no_tab}:2: expected at least 2 tab-separated columns"),
        "empty": (["--data", str(empty)], f"--data: the file '{empty}' is empty"),
        "folder": (["--data", str(tmp_path)], f"--data: '{tmp_path}' is a folder; expected a file of"),
        "empty side": (["--data", empty_side], "--data: pair 2 of .* has an empty side: 'Hi.' / ' '"),
        "missing dev": (["--data", good, "--dev", missing], f"--dev: no such file: '{missing}'"),
    }


def test_finetune_bad_pairs_files_name_the_flag_and_value(tmp_path, capsys):
    import re

    _, cases = _bad_inputs(tmp_path)
    for name, (argv, pattern) in cases.items():
        assert run("finetune", "--checkpoint", TINY_MARIAN, *argv) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and re.search("^keras-tfm finetune: error: " + pattern, err[0]), (name, err)


def test_finetune_refuses_a_checkpoint_or_flags_of_the_other_task(tmp_path, capsys):
    good, _ = _bad_inputs(tmp_path)
    cases = [
        (
            ["--checkpoint", TINY_BERT, "--task", "seq2seq", "--data", good],
            f"--checkpoint: '{TINY_BERT}' is not a seq2seq checkpoint (model_type 'bert')",
        ),
        (
            ["--checkpoint", str(tmp_path), "--task", "seq2seq", "--data", good],
            f"--checkpoint: '{tmp_path}' is not a seq2seq checkpoint (no config.json with a model_type)",
        ),
        (
            ["--checkpoint", TINY_MARIAN, "--data", good, "--pooling", "cls"],
            f"--pooling: is a flag of --task classifier; '{TINY_MARIAN}' is fine-tuned as seq2seq",
        ),
        (
            ["--checkpoint", TINY_BERT, "--data", good, "--num-beams", "2"],
            f"--num-beams: is a flag of --task seq2seq; '{TINY_BERT}' is fine-tuned as classifier",
        ),
        (
            ["--checkpoint", TINY_MARIAN, "--data", good, "--max-length", "65"],
            "--max-length must be at most the checkpoint's 64 positions",
        ),
    ]
    for argv, line in cases:
        assert run("finetune", *argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("keras-tfm finetune: error: " + line), err


def test_teacher_forcing_batches_follow_the_checkpoint(tmp_path):
    """Batches of each family: sources and labels as its tokenizers encode them (T5 and Marian end
    with </s>, BART wraps in <s> … </s>), decoder inputs shifted right from the checkpoint's start
    id, everything padded with its pad id, which the compiled loss ignores."""
    from keras_tfm.models import from_pretrained
    from keras_tfm.recipes.checkpoint_pairs import pair_batches
    from keras_tfm.tokenizers import text as text_lib

    pairs = [("I see.", "Ya veo."), ("Come here, please.", "Ven aquí, por favor.")]
    for name, start, pad in (("tiny_t5", 0, 0), ("tiny_bart", 2, 1)):  # Marian: as T5, two tokenizers
        model = from_pretrained(os.path.join(FIXTURES, name))
        source, target = model.tokenizer if isinstance(model.tokenizer, tuple) else (model.tokenizer,) * 2
        features, labels = pair_batches(model, pairs, 64, 2, shuffle=False)[0]
        want_src, want_tgt = (
            text_lib.encode(source, [s for s, _ in pairs]),
            text_lib.encode(target, [t for _, t in pairs]),
        )
        for b in range(2):
            n, m = len(want_src[b]), len(want_tgt[b])
            assert features["encoder_token_ids"][b, :n].tolist() == want_src[b], name
            assert set(features["encoder_token_ids"][b, n:].tolist()) <= {pad}, name
            assert labels[b, :m].tolist() == want_tgt[b] and set(labels[b, m:].tolist()) <= {pad}, name
            assert features["decoder_token_ids"][b, :m].tolist() == [start] + want_tgt[b][:-1], name
        logits = np.asarray(model(features), np.float64)
        logp = (
            logits
            - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
            - logits.max(-1, keepdims=True)
        )
        real = labels != pad
        nll = -np.take_along_axis(logp, labels[..., None], -1)[..., 0][real].mean()
        assert float(model.loss(labels, logits.astype(np.float32))) == pytest.approx(nll, rel=1e-4), name
