"""`keras-tfm finetune` / `keras-tfm embed` (keras_tfm.cli.finetune, keras_tfm.cli.embed) and the fine-tuning
recipe (`keras_tfm.recipes.finetune_checkpoint`) on the tiny BERT fixture."""

import json
import os
import warnings

import numpy as np
import pytest

from keras_tfm import cli

TINY_BERT = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained", "tiny_bert")


def run(*argv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cli.main(list(argv))


def test_embed_prints_unit_vectors_equal_to_the_library(capsys):
    from keras_tfm.checkpoints import pretrained_tokenizer
    from keras_tfm.data import embed_texts
    from keras_tfm.models import sentence_encoder

    texts = ["the quick brown fox", "a funny film , not bad"]
    assert run("embed", "--checkpoint", TINY_BERT, *texts) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = embed_texts(sentence_encoder(TINY_BERT), pretrained_tokenizer(TINY_BERT), texts)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["text"] for line in lines] == texts
    vectors = np.array([line["embedding"] for line in lines])
    assert vectors.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def _labelled_file(tmp_path):
    rng = np.random.default_rng(0)
    words = ["quick", "brown", "fox", "funny", "film", "bad", "good", "movie", "lazy", "dog"]
    lines = [f"{i % 2} {' '.join(rng.choice(words, size=3 + i % 5))}" for i in range(40)]
    data = tmp_path / "train.txt"
    data.write_text("\n".join(lines) + "\n")
    return data


def test_finetune_trains_evaluates_and_saves_a_checkpoint(tmp_path, capsys):
    from keras_tfm.models import BertClassifier, from_pretrained

    data = _labelled_file(tmp_path)
    output = tmp_path / "run"
    status = run(
        "finetune", "--checkpoint", TINY_BERT, "--data", str(data), "--dev", str(data), "--steps", "3",
        "--batch-size", "8", "--learning-rate", "1e-3", "--output", str(output), "--verbose", "0",
    )  # fmt: skip
    assert status == 0
    out = capsys.readouterr().out
    assert "fine-tuned 3 steps" in out and "dev accuracy:" in out
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(output))
    model = from_pretrained(output)  # the classifier, its pooling and its head come back
    assert isinstance(model, BertClassifier) and (model.num_classes, model.pooling) == (2, "mean")


def test_finetune_recipe_from_python_returns_its_figures(tmp_path):
    from keras_tfm import recipes

    data = _labelled_file(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = recipes.finetune_checkpoint(
            checkpoint=TINY_BERT, data=str(data), dev=str(data), steps=2, batch_size=8, verbose=0
        )
        texts = [line.split(" ", 1)[1] for line in data.read_text().splitlines()]
        labels = [int(line.split(" ", 1)[0]) for line in data.read_text().splitlines()]
        accuracy = recipes.evaluate_classifier(results["model"], results["tokenizer"], texts, labels)
    assert results["steps"] == 2 and int(results["model"].optimizer.iterations.numpy()) == 2
    assert results["model"].tokenizer is results["tokenizer"]
    assert results["dev_accuracy"] == pytest.approx(accuracy)
    assert "output_path" not in results and "export_path" not in results


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["finetune", "--checkpoint", "/nonexistent", "--data", "x"],
            "keras-tfm finetune: error: --checkpoint: '/nonexistent' is not a checkpoint directory.",
        ),
        (
            ["finetune", "--checkpoint", TINY_BERT, "--data", "/nonexistent"],
            "keras-tfm finetune: error: --data: '/nonexistent' does not exist.",
        ),
        (
            ["embed", "--checkpoint", "/nonexistent", "text"],
            "keras-tfm embed: error: --checkpoint: '/nonexistent' is not a checkpoint directory",
        ),
    ],
)
def test_bad_values_name_the_flag(argv, line, capsys):
    assert run(*argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [line]


def test_existing_output_is_refused_without_overwrite(tmp_path, capsys):
    output = tmp_path / "run"
    output.mkdir()
    (output / "config.json").write_text("{}")
    data = tmp_path / "train.txt"
    data.write_text("0 a film\n1 a dog\n")
    assert run("finetune", "--checkpoint", TINY_BERT, "--data", str(data), "--output", str(output)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--output:" in err[0] and "already exists" in err[0] and "--overwrite" in err[0]
    assert os.listdir(output) == ["config.json"]
