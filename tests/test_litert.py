"""LiteRT export (`keras_tfm.export.litert`) and its runner (`litert_runner`).

Each model is converted once per module. The runner's tokens are compared with in-process
`generation.generate` (XLA, TensorFlow): greedy, seeded sampling with top-k / top-p, and
the sliding window past the context (a window restart for learned / RoPE positions);
the BERT classifier's outputs with the Keras model's. The char GPT is trained for a few
seconds first, so that greedy decoding does not repeat one token and the int8 file's
top-token agreement means something. Timings are in bench/litert.py, not here.
"""

import argparse
import json
import os

import numpy as np
import pytest
from model_harness import tiny_bert_classifier, tiny_gpt, tiny_llama, tiny_seq2seq

from keras_tfm import generation
from keras_tfm.cli import export as export_cli
from keras_tfm.cli import generate as generate_cli
from keras_tfm.cli import usage
from keras_tfm.export.litert import export_for_litert
from keras_tfm.export.litert_encoder import LiteRTEncoder
from keras_tfm.export.litert_runner import LiteRTGenerator, sidecar_path
from keras_tfm.export.litert_sampling import choose_token
from keras_tfm.export.litert_tokenizers import PythonTokenizer, read_tokenizer
from keras_tfm.export.litert_verification import verify
from keras_tfm.generation import samplers
from keras_tfm.models import from_pretrained
from keras_tfm.tokenizers import ByteTokenizer, CharTokenizer, WordTokenizer
from keras_tfm.tokenizers.text import decode, encode
from keras_tfm.training import compile_for_lm

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained")
TEXT = (
    "to be, or not to be, that is the question: whether 'tis nobler in the mind to suffer "
    "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles. "
)
VALIDATION = "whether 'tis nobler in the mind to suffer the slings and arrows, or to take arms."
PROMPTS = ["to be", "the slings and", "w"]
SOURCE_WORDS = "the cat sat on a mat dog ran far".split()
TARGET_WORDS = "die katze sass auf einer matte hund lief weit".split()
SAMPLING = dict(sampler="sample", temperature=0.9, top_k=12, top_p=0.95, seed=7)


def cli_parser():
    """`keras-tfm` with its `export` and `generate` subcommands."""
    parser = argparse.ArgumentParser(prog="keras-tfm")
    sub = parser.add_subparsers(dest="command")
    export_cli.register(sub)
    generate_cli.register(sub)
    return parser


def constant_buffers(path):
    """The constant tensors of a `.tflite` file, as NumPy arrays of their stored type."""
    from ai_edge_litert import schema_py_generated as schema

    data = open(path, "rb").read()
    model = schema.Model.GetRootAsModel(data, 0)
    types = {schema.TensorType.FLOAT32: np.float32, schema.TensorType.INT8: np.int8}
    out = {}
    for g in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(g)
        for t in range(subgraph.TensorsLength()):
            tensor = subgraph.Tensors(t)
            buffer = model.Buffers(tensor.Buffer())
            if buffer.DataLength() and tensor.Type() in types:
                out[tensor.Buffer()] = buffer.DataAsNumpy().view(types[tensor.Type()])
    return list(out.values())


def train_char_gpt():
    """A 2-layer char GPT (learned positions, 2 query heads sharing 1 key/value head) fitted to TEXT."""
    tokenizer = CharTokenizer.from_corpus(TEXT)
    ids = tokenizer.tokenize(TEXT * 8).numpy()
    windows = np.stack([ids[i : i + 33] for i in range(0, len(ids) - 33, 3)])
    model = tiny_gpt(seed=3, vocabulary_size=tokenizer.vocabulary_size, max_length=32, num_key_value_heads=1)
    compile_for_lm(
        model, learning_rate=3e-3, warmup_steps=20, ignore_index=None, metrics=False, jit_compile=False
    )
    model.fit(windows[:, :-1], windows[:, 1:], batch_size=32, epochs=6, verbose=0, shuffle=True)
    model.tokenizer = tokenizer
    return model


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    model = train_char_gpt()
    path = export_for_litert(model, str(tmp_path_factory.mktemp("litert") / "gpt.tflite"))
    return model, LiteRTGenerator(path), path


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """RoPE positions, 4 query heads sharing 2 key/value heads; a 16-token window, prefill widths 8 and 16."""
    model = tiny_llama(seed=4, max_length=16)
    path = export_for_litert(
        model, str(tmp_path_factory.mktemp("litert") / "llama.tflite"), prefill_lengths=[8]
    )
    return model, LiteRTGenerator(path)


@pytest.fixture(scope="module")
def s2s(tmp_path_factory):
    model = tiny_seq2seq(seed=2, num_layers=1, max_length=8)
    model.tokenizer = (WordTokenizer(SOURCE_WORDS), WordTokenizer(TARGET_WORDS))
    path = export_for_litert(model, str(tmp_path_factory.mktemp("litert") / "s2s.tflite"))
    return model, LiteRTGenerator(path), path


def test_gpt_tokens_equal_in_process(gpt):
    model, runner, _ = gpt
    prompts = runner.tokenizers["tokenizer"].encode(PROMPTS)
    for options in ({}, SAMPLING):  # 40 new tokens: past the 32-token context, the window restarts
        expected = generation.generate(model, prompts, 40, **options)
        np.testing.assert_array_equal(runner.generate(prompts, 40, **options), expected)
    assert len(set(expected[0].tolist())) > 3  # a trained model: not one token repeated
    # Text in, text out: the model's own text path (tokenizer eos_id, prompt + completion).
    assert runner.generate(PROMPTS, 40, **SAMPLING) == model.generate(PROMPTS, 40, **SAMPLING)


def test_rope_gqa_tokens_equal_in_process(llama):
    model, runner = llama
    prompts = [[5, 9, 11, 3], [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]]
    expected = generation.generate(model, prompts, 30, **SAMPLING)  # past the 16-token window
    np.testing.assert_array_equal(runner.generate(prompts, 30, **SAMPLING), expected)
    assert runner.metadata["prefill_lengths"] == [8, 16]
    assert {"prefill_8", "prefill", "decode"} == set(runner.metadata["signatures"])


def test_seq2seq_tokens_and_translations_equal_in_process(s2s, capsys):
    model, runner, path = s2s
    texts = ["the cat sat", "a dog ran far"]
    sources = runner.tokenizers["source_tokenizer"].encode(texts)
    for options in ({}, SAMPLING):  # greedy: the call `translate` makes (BOS 5, EOS 6, 7 new tokens)
        expected = generation.generate(model, sources, 7, bos_id=5, eos_id=6, **options)
        np.testing.assert_array_equal(runner.generate(sources, 7, bos_id=5, eos_id=6, **options), expected)
    assert runner.translate(texts) == model.translate(texts, num_beams=1)
    with pytest.raises(ValueError, match="num_beams"):
        runner.translate(texts, num_beams=3)
    parser = cli_parser()
    assert usage.run(parser.parse_args(["generate", "--model", path, "--prompt", texts[0]])) == 0
    assert capsys.readouterr().out == runner.translate(texts[0]) + "\n"


def test_bert_classifier_outputs_equal_keras(tmp_path, capsys):
    tokenizer = WordTokenizer("the cat sat on a mat dog ran far good bad movie".split())
    model = tiny_bert_classifier(
        seed=5, num_classes=3, vocabulary_size=tokenizer.vocabulary_size, max_length=16
    )
    model.tokenizer = tokenizer
    path = export_for_litert(model, str(tmp_path / "clf.tflite"), label_names=["a", "b", "c"])
    runner = LiteRTEncoder(path)
    ids = np.array([[2, 9, 10, 11, 3, 0, 0], [2, 12, 3, 0, 0, 0, 0]], np.int32)
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype(np.int32)}
    np.testing.assert_allclose(runner.forward(ids), model(inputs), atol=1e-5)
    texts = ["the cat sat on the mat", "a good movie"]
    np.testing.assert_allclose(runner.predict(texts), model.predict(texts), atol=1e-5)
    assert json.load(open(sidecar_path(path, "json")))["label_names"] == ["a", "b", "c"]
    command = ["generate", "--model", path, "--prompt", texts[0], "--json"]
    assert usage.run(cli_parser().parse_args(command)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["labels"] == [["a", "b", "c"][int(np.argmax(runner.predict(texts[0])))]]


def test_numpy_sampler_is_the_samplers_arithmetic():
    rng = np.random.default_rng(0)
    for trial in range(40):
        logits = rng.normal(size=(3, 50)).astype(np.float32) * 3
        seed, step = rng.integers(0, 2**31 - 1, size=2).astype(np.int32), int(rng.integers(0, 10**6))
        options = dict(
            temperature=[0.0, 0.7, 1.3][trial % 3], top_k=[0, 5][trial % 2], top_p=[1.0, 0.8][trial % 2]
        )
        expected = samplers.sample(logits, samplers.split_seed(seed, step), **options)
        rows = [
            choose_token(logits[r : r + 1], step, sampler="sample", seed=seed, rows=np.array([r]), **options)
            for r in range(3)
        ]
        np.testing.assert_array_equal(np.concatenate(rows), expected)


@pytest.mark.parametrize(
    "tokenizer",
    [
        CharTokenizer.from_corpus("abc de", add_bos=True, add_eos=True),
        CharTokenizer.from_corpus("abc de", special_tokens=False),
        ByteTokenizer(),
        ByteTokenizer(special_tokens=False, errors="ignore"),
    ],
    ids=["char", "char-no-special", "byte", "byte-ignore"],
)
def test_python_tokenizers_read_the_vocabulary_file_as_tensorflow_does(tokenizer, tmp_path):
    """The runner's TensorFlow-free Char/Byte tokenizers: ids and strings of the in-process text path."""
    tokenizer.save_vocabulary(tmp_path / "t.vocab")
    python = read_tokenizer(str(tmp_path / "t.vocab"))
    assert isinstance(python, PythonTokenizer)
    texts = (
        ["abc", "cab ed", "é€ b"]
        if tokenizer.unk_id is not None or isinstance(tokenizer, ByteTokenizer)
        else ["abc", "cab ed"]
    )
    rows = encode(tokenizer, texts)
    assert python.encode(texts) == rows
    rows = [
        r + [0, 3, 250, tokenizer.vocabulary_size + 2] for r in rows
    ]  # padding, specials, cut bytes, past V
    assert python.decode(rows) == decode(tokenizer, rows)


BAD_GPT = [
    (([[1, 2, 99]], 4), {}, "holds ids outside"),
    (([[1] * 33], 4), {}, "exceeds the model's maximum length 32"),
    (([[1, 2]], -1), {}, "max_new_tokens"),
    (([[1, 2]], 4), dict(sampler="beam"), "sampler"),
    (([[1, 2]], 4), dict(sampler="sample", temperature=-1.0), "temperature"),
    (([[1, 2]], 4), dict(sampler="sample", top_p=0.0), "top_p"),
    (([[1, 2]], 4), dict(sampler="sample", top_k=10**6), "top_k"),
    (([[1, 2]], 4), dict(seed=-3), "seed"),
    (([[1, 2]], 4), dict(eos_id=10**6), "eos_id"),
    (([], 4), {}, "empty batch"),
]


@pytest.mark.parametrize("args, kwargs, message", BAD_GPT)
def test_bad_input_same_messages_as_generate(gpt, args, kwargs, message):
    model, runner, _ = gpt
    with pytest.raises((ValueError, TypeError), match=message) as in_process:
        generation.generate(model, *args, **kwargs)
    with pytest.raises(type(in_process.value)) as litert:
        runner.generate(*args, **kwargs)
    assert str(litert.value) == str(in_process.value)


def test_marian_checkpoint_tokens_equal_in_process(tmp_path):
    """A Marian checkpoint exports with its own ways: decoder start = pad id (235, not 0), the
    `generation_config` constraints (suppressed pad, forced EOS at the last step), EOS 0 and
    Marian's sinusoid layout (every sine column, then every cosine column)."""
    model = from_pretrained(os.path.join(FIXTURES, "tiny_marian"))
    runner = LiteRTGenerator(export_for_litert(model, str(tmp_path / "marian.tflite")))
    assert runner.generation_config == {k: v for k, v in model.generation_config.items()} | {
        "suppressed_ids": list(model.generation_config["suppressed_ids"])
    }
    texts = ["the cat sat on the mat", "hello world"]
    assert runner.translate(texts, max_new_tokens=6) == model.translate(texts, max_new_tokens=6, num_beams=1)
    sources = [[5, 9, 11, 3, 0], [7, 8, 0]]
    start = model.decoder_start_id
    for options in ({}, SAMPLING):  # eos_id not given: the checkpoint's (0), as in process
        expected = generation.generate(model, sources, 6, bos_id=start, **options)
        np.testing.assert_array_equal(runner.generate(sources, 6, bos_id=start, **options), expected)


def test_seq2seq_bad_input_same_messages(s2s):
    model, runner, _ = s2s
    for args, kwargs in (
        (([[1] * 9], 3), dict(bos_id=5)),
        (([[1, 2]], 3), {}),
        (([[1, 2]], 9), dict(bos_id=5)),
    ):
        with pytest.raises(ValueError) as in_process:
            generation.generate(model, *args, **kwargs)
        with pytest.raises(ValueError) as litert:
            runner.generate(*args, **kwargs)
        assert str(litert.value) == str(in_process.value)


def test_export_refuses_what_litert_cannot_run(tmp_path):
    with pytest.raises(ValueError, match="dtype policy 'mixed_bfloat16'"):
        export_for_litert(tiny_gpt(dtype="mixed_bfloat16"), str(tmp_path / "a.tflite"))
    with pytest.raises(ValueError, match="attention_impl"):
        export_for_litert(tiny_gpt(attention_impl="linear"), str(tmp_path / "a.tflite"))
    with pytest.raises(ValueError, match=r"\.tflite"):
        export_for_litert(tiny_gpt(), str(tmp_path / "a.bin"))
    with pytest.raises(ValueError, match="quantize"):
        export_for_litert(tiny_gpt(), str(tmp_path / "a.tflite"), quantize="int4")
    assert os.listdir(tmp_path) == []


def test_verification_refuses_other_logits(gpt):
    """The check `export_for_litert` runs after converting: a file whose decode step moves one logit
    by 0.1 is refused (the tolerance: 1e-3 of the logits' scale, max(1, max |logit|))."""
    _, runner, _ = gpt
    signatures = dict(runner.signatures)
    decode = signatures["decode"]

    def shifted(**inputs):
        out = dict(decode(**inputs))
        out["logits"] = out["logits"] + np.eye(1, out["logits"].shape[-1], 3, dtype=np.float32) * 0.1
        return out

    signatures["decode"] = shifted
    reference = LiteRTGenerator.from_parts(runner.metadata, runner.signatures)
    assert (
        verify(reference, LiteRTGenerator.from_parts(runner.metadata, runner.signatures))["top1_agreement"]
        == 1
    )
    with pytest.raises(ValueError, match="computes other outputs than TensorFlow"):
        verify(reference, LiteRTGenerator.from_parts(runner.metadata, signatures))


def test_runner_refuses_a_file_its_metadata_does_not_describe(gpt, tmp_path):
    _, _, path = gpt
    copy = str(tmp_path / "gpt.tflite")
    with open(path, "rb") as source, open(copy, "wb") as target:
        target.write(source.read()[:-8] + b"\0" * 8)
    with open(sidecar_path(path, "json")) as source, open(sidecar_path(copy, "json"), "w") as target:
        target.write(source.read())
    with pytest.raises(ValueError, match="does not match the metadata"):
        LiteRTGenerator(copy)
    with pytest.raises(FileNotFoundError):
        LiteRTGenerator(str(tmp_path / "missing.tflite"))


def test_cli_int8_export_generate_and_agreement(gpt, tmp_path, capsys):
    """`keras-tfm export --format litert --quantize int8`, then `keras-tfm generate` on the file; the
    int8 logits choose the float32 model's top token on ≥ 99 % of the validation text's positions."""
    model, runner, float_path = gpt
    parser = cli_parser()
    model.save(tmp_path / "model.keras")
    model.tokenizer.save_vocabulary(tmp_path / "tokenizer.vocab")
    command = ["export", "--model", str(tmp_path), "--name", "gpt8", "--export-dir", str(tmp_path / "out")]
    assert usage.run(parser.parse_args(command + ["--format", "litert", "--quantize", "int8"])) == 0
    path = capsys.readouterr().out.strip()
    assert path == str(tmp_path / "out" / "gpt8.tflite")
    int8 = LiteRTGenerator(path)
    assert int8.metadata["quantize"] == "int8"
    # Dynamic-range quantization: no float32 weight matrix of 1024 or more entries is left (the only
    # large float32 constants are the zeros that initialise the cache variables).
    floats = [b for b in constant_buffers(path) if b.dtype == np.float32 and b.size >= 1024]
    assert all(not b.any() for b in floats), [b.shape for b in floats]
    assert os.path.getsize(path) < os.path.getsize(float_path)
    ids = int8.tokenizers["tokenizer"].encode([VALIDATION[:32]])[0][:32]
    expected = np.argmax(np.asarray(model(np.array([ids]))[0]), axis=-1)
    agreement = np.mean(np.argmax(int8.next_token_logits(ids), axis=-1) == expected)
    assert agreement >= 0.99, agreement
    np.testing.assert_allclose(runner.next_token_logits(ids), model(np.array([ids]))[0], atol=1e-4)
    prompt = ["--model", path, "--prompt", "to be", "--max-new-tokens", "6"]
    assert usage.run(parser.parse_args(["generate", *prompt])) == 0
    assert capsys.readouterr().out == int8.generate(["to be"], 6, sampler="greedy")[0] + "\n"
    assert usage.run(parser.parse_args(["generate", *prompt, "--num-beams", "2"])) == 2
    assert "--num-beams" in capsys.readouterr().err
    assert usage.run(parser.parse_args(command + ["--quantize", "int8"])) == 2
    assert "--quantize: only a LiteRT export" in capsys.readouterr().err
