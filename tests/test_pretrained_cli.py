"""`keras-tfm finetune` / `keras-tfm embed` (keras_tfm.pretrained_cli) on the tiny BERT fixture."""

import argparse
import json
import os
import warnings

import numpy as np
import pytest

from keras_tfm import pretrained_cli
from keras_tfm.recipes import UsageError

TINY_BERT = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained", "tiny_bert")


def parse(*argv):
    parser = argparse.ArgumentParser(prog="keras-tfm")
    subparsers = parser.add_subparsers(dest="command", required=True)
    pretrained_cli.add_finetune_subcommand(subparsers)
    pretrained_cli.add_embed_subcommand(subparsers)
    return parser.parse_args(list(argv))


def test_embed_prints_unit_vectors_equal_to_the_library(capsys):
    from keras_tfm.checkpoints import sentence_encoder
    from keras_tfm.checkpoints.pretrained import pretrained_tokenizer
    from keras_tfm.data.text_batches import embed_texts

    texts = ["the quick brown fox", "a funny film , not bad"]
    args = parse("embed", "--checkpoint", TINY_BERT, *texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert args.func(args) == 0
        expected = embed_texts(sentence_encoder(TINY_BERT), pretrained_tokenizer(TINY_BERT), texts)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["text"] for line in lines] == texts
    vectors = np.array([line["embedding"] for line in lines])
    assert vectors.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_finetune_trains_evaluates_and_saves_a_checkpoint(tmp_path, capsys):
    from keras_tfm.checkpoints import from_pretrained
    from keras_tfm.models import BertClassifier

    rng = np.random.default_rng(0)
    words = ["quick", "brown", "fox", "funny", "film", "bad", "good", "movie", "lazy", "dog"]
    lines = [f"{i % 2} {' '.join(rng.choice(words, size=3 + i % 5))}" for i in range(40)]
    data = tmp_path / "train.txt"
    data.write_text("\n".join(lines) + "\n")
    output = tmp_path / "run"
    args = parse(
        "finetune", "--checkpoint", TINY_BERT, "--data", str(data), "--dev", str(data),
        "--max-steps", "3", "--batch-size", "8", "--learning-rate", "1e-3", "--output", str(output),
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "fine-tuned 3 steps" in out and "dev accuracy:" in out
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(output))
    model = from_pretrained(output)  # the classifier, its pooling and its head come back
    assert isinstance(model, BertClassifier) and (model.num_classes, model.pooling) == (2, "mean")


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["finetune", "--checkpoint", "/nonexistent", "--data", "x"], "--checkpoint"),
        (["finetune", "--checkpoint", TINY_BERT, "--data", "/nonexistent"], "--data"),
        (["embed", "--checkpoint", "/nonexistent", "text"], "--checkpoint"),
    ],
)
def test_bad_values_name_the_flag(argv, flag):
    args = parse(*argv)
    with pytest.raises(UsageError, match=f"^{flag}:"):
        args.func(args)


def test_existing_output_is_refused_without_overwrite(tmp_path):
    output = tmp_path / "run"
    output.mkdir()
    (output / "config.json").write_text("{}")
    data = tmp_path / "train.txt"
    data.write_text("0 a film\n1 a dog\n")
    args = parse("finetune", "--checkpoint", TINY_BERT, "--data", str(data), "--output", str(output))
    with pytest.raises(UsageError, match="^--output:.*already exists"):
        args.func(args)
