"""TF Serving export: signatures, Keras-free loading (TF2 and the TF1 session
loader), saved_model_cli, atomic versioned writes, request validation, CLI.

The tiny models are exported once per module; a single subprocess
(`tests/serving_client.py`, where importing keras / keras_tfm fails) checks
every signature of every export through both loaders (the TF1 loader: three of
the GPT calls, text generation, logits and the sliding beam search), then lists
the GPT export's signatures with `saved_model_cli show --all`.
"""

import argparse
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_bert_classifier, tiny_bert_masked_lm, tiny_gpt, tiny_seq2seq
from serving_client_runner import run_serving_client

from keras_tfm.cli import export as export_cli
from keras_tfm.cli import generate as generate_cli
from keras_tfm.cli import usage
from keras_tfm.cli.generate import default_max_new_tokens, export_info
from keras_tfm.export import detect_kind, export_for_serving, list_versions, read_warmup_requests
from keras_tfm.export import warmup as warmup_lib
from keras_tfm.export.exporter import select_signatures
from keras_tfm.generation import Generator
from keras_tfm.generation.generator import get_generator
from keras_tfm.tokenizers import CharTokenizer, WordTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
SUBPROCESS_TIMEOUT = 900  # a guard against a hung client; it takes about 2 min on a quiet machine

GPT_PROMPTS = ["hello", "a", "this is"]
GPT_TEXT = "hello world, this is a tiny corpus! yes."
S2S_SOURCES = ["the cat sat", "a dog", "the dog sat on the mat"]
S2S_WORDS = "the cat sat on a mat dog ran far".split()
BERT_TEXTS = ["the cat sat on the mat", "a dog ran", "cat"]
BERT_WORDS = "the cat sat on a mat dog ran far good bad movie".split()
MAX_NEW = 10
LONG_NEW = 60
SLIDE_NEW = 75  # + the 7-token prompt > max_length 80: a sliding window
BEAMS = 3  # max_beams of the GPT export


def sampling(max_new_tokens=MAX_NEW, temperature=0.0, top_k=0, top_p=1.0, seed=0):
    return {
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "seed": seed,
    }


def beams(num_beams, max_new_tokens=MAX_NEW, length_penalty=0.6):
    return {"max_new_tokens": max_new_tokens, "num_beams": num_beams, "length_penalty": length_penalty}


def detok(tokenizer, tokens, lengths):
    ragged = tf.RaggedTensor.from_tensor(
        tf.constant(tokens, tf.int32), lengths=tf.constant(lengths, tf.int64)
    )
    return [s.decode("utf-8") for s in tokenizer.detokenize(ragged).numpy()]


def ids_of(tokenizer, texts):
    return [list(tokenizer.tokenize(t).numpy()) for t in texts]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved_models")
    out = {"root": str(root)}

    # ---- GPT (CharTokenizer), every signature: the loop of requests that fit the context (cache length
    # 128; in process 64 or 128) and the sliding-window loop, each for sampling and for beam search
    # (max_beams 3). The GPT and the seq2seq model have one layer:
    # every served output is compared with the same model in process, which does not depend on the
    # depth, and each decoding loop (compiled once in process and once per loader) compiles faster.
    char_tok = CharTokenizer.from_corpus(GPT_TEXT)
    gpt_model = tiny_gpt(seed=1, vocabulary_size=char_tok.vocabulary_size, max_length=80, num_layers=1)
    out["gpt_path"] = export_for_serving(
        gpt_model,
        root / "gpt",
        tokenizer=char_tok,
        max_new_tokens_limit=SLIDE_NEW,
        max_prompt_length=8,
        max_beams=BEAMS,
        signatures="all",
    )
    gen = Generator(gpt_model)
    prompt_ids = ids_of(char_tok, GPT_PROMPTS)
    tokens, lengths = gen.generate(prompt_ids, LONG_NEW, return_lengths=True)  # cache length 128
    out["gpt_long"] = detok(char_tok, tokens, lengths)
    out["gpt_slide_ids"] = gen.generate(prompt_ids, SLIDE_NEW).tolist()
    tokens, lengths = gen.generate(prompt_ids, MAX_NEW, return_lengths=True)
    out["gpt_greedy"] = detok(char_tok, tokens, lengths)
    out["gpt_greedy_ids"] = tokens.tolist()
    sampled = gen.generate(prompt_ids, MAX_NEW, sampler="sample", temperature=1.0, top_k=5, top_p=0.9, seed=7)
    out["gpt_sampled_ids"] = sampled.tolist()
    seqs, scores, lengths = gen.beam_search(prompt_ids, MAX_NEW, num_beams=2)
    out["gpt_beam2"] = detok(char_tok, seqs[:, 0], lengths[:, 0])
    out["gpt_beam2_scores"] = scores[:, 0].tolist()
    seqs, scores, lengths = gen.beam_search(prompt_ids, SLIDE_NEW, num_beams=BEAMS)  # past the context
    out["gpt_beam_slide"] = {
        "token_ids": seqs[:, 0].tolist(),
        "lengths": lengths[:, 0].tolist(),
        "scores": scores[:, 0].tolist(),
    }
    padded = np.zeros((len(prompt_ids), max(map(len, prompt_ids))), np.int32)
    for b, p in enumerate(prompt_ids):
        padded[b, : len(p)] = p
    out["gpt_padded"], out["gpt_lengths"] = padded.tolist(), [len(p) for p in prompt_ids]
    out["gpt_logits"] = np.asarray(gpt_model(padded[:1, : len(prompt_ids[0])])).tolist()
    out["gpt_model"], out["char_tok"] = gpt_model, char_tok

    # ---- seq2seq (shared WordTokenizer), num_beams 1..3 (greedy + one 3-beam loop).
    word_tok = WordTokenizer(S2S_WORDS)
    s2s = tiny_seq2seq(seed=2, vocabulary_size=word_tok.vocabulary_size, num_layers=1)
    s2s.tokenizer = word_tok  # no `tokenizer` argument: the export takes the model's
    out["s2s_path"] = export_for_serving(s2s, root / "s2s", max_beams=3)
    out["s2s_model"] = s2s
    sgen = get_generator(s2s)  # the generator `s2s.translate` uses: its loops compile once
    src = ids_of(word_tok, S2S_SOURCES)
    tokens, lengths = sgen.generate(src, MAX_NEW, bos_id=5, eos_id=6, return_lengths=True)
    out["s2s_greedy"] = detok(word_tok, tokens, np.minimum(lengths, MAX_NEW))
    for width in (2, 3):
        seqs, _, blens = sgen.beam_search(
            src, MAX_NEW, num_beams=width, length_penalty=0.6, bos_id=5, eos_id=6
        )
        out[f"s2s_beam{width}"] = detok(word_tok, seqs[:, 0], np.minimum(blens[:, 0], MAX_NEW))

    # ---- BERT classifier and masked LM (WordTokenizer).
    bert_tok = WordTokenizer(BERT_WORDS)
    clf = tiny_bert_classifier(seed=3, num_classes=2)
    out["clf_path"] = export_for_serving(clf, root / "clf", tokenizer=bert_tok, label_names=["neg", "pos"])
    ids = ids_of(bert_tok, BERT_TEXTS)
    width = max(map(len, ids)) + 2
    token_ids = np.zeros((len(ids), width), np.int32)
    for b, row in enumerate(ids):
        token_ids[b, : len(row) + 2] = [2] + row + [3]
    x = {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": (token_ids > 0).astype("int32"),
    }
    out["clf_probs"] = tf.nn.softmax(clf(x)).numpy().tolist()
    out["clf_model"], out["bert_tok"] = clf, bert_tok
    mlm = tiny_bert_masked_lm(seed=None)
    out["mlm_path"] = export_for_serving(mlm, root / "mlm", tokenizer=bert_tok)
    masked = np.array([[2, 7, 4, 9, 3]], np.int32)  # [CLS] the [MASK] sat [SEP]
    logits = np.array(
        mlm({"token_ids": masked, "segment_ids": np.zeros_like(masked), "padding_mask": np.ones_like(masked)})
    )[0, 2]
    logits[:7] = -np.inf
    logits[bert_tok.vocabulary_size :] = -np.inf  # predictions restricted to the tokenizer's tokens
    out["mlm_top1"] = bert_tok.get_vocabulary()[int(np.argmax(logits))]
    return out


def bad_gpt_requests():
    base = dict(prompts=["hello"], **sampling())
    cases = [
        ("empty batch", dict(base, prompts=[]), "empty batch"),
        ("max_new_tokens < 0", dict(base, max_new_tokens=-1), "`max_new_tokens` must be >= 0"),
        ("max_new_tokens > limit", dict(base, max_new_tokens=76), "`max_new_tokens` must be <= 75"),
        ("top_p > 1", dict(base, top_p=1.5), "`top_p` must be in (0, 1]"),
        ("top_p = 0", dict(base, top_p=0.0), "`top_p` must be in (0, 1]"),
        ("top_k < 0", dict(base, top_k=-2), "`top_k` must be >= 0"),
        ("temperature < 0", dict(base, temperature=-1.0), "`temperature` must be a finite float >= 0"),
        ("empty prompt", dict(base, prompts=["hello", ""]), "needs at least one token"),
        ("prompt too long", dict(base, prompts=["h" * 9]), "maximum prompt length 8"),
    ]
    beam = dict(prompts=["hello"], max_new_tokens=MAX_NEW, num_beams=2, length_penalty=0.6)
    cases += [
        ("num_beams = 0", dict(beam, num_beams=0), "`num_beams` must be in [1, 3]"),
        ("num_beams > max_beams", dict(beam, num_beams=4), "`num_beams` must be in [1, 3]"),
        ("length_penalty < 0", dict(beam, length_penalty=-1.0), "`length_penalty` must be in [0, 5.0]"),
        ("length_penalty > 5", dict(beam, length_penalty=6.0), "`length_penalty` must be in [0, 5.0]"),
        ("beam max_new_tokens > limit", dict(beam, max_new_tokens=76), "`max_new_tokens` must be <= 75"),
        ("beam prompt too long", dict(beam, prompts=["h" * 9]), "maximum prompt length 8"),
    ]
    requests = [
        {"signature": "beam_search" if "num_beams" in inputs else "generate", "inputs": inputs}
        for _, inputs, _ in cases
    ]
    expected = [(name, "InvalidArgumentError", text) for name, _, text in cases]
    # Wrong dtype: rejected by the signature itself.
    requests.append(
        {
            "signature": "generate_ids",
            "inputs": dict(token_ids=[[1.5, 2.0]], lengths=[2], **sampling()),
            "dtypes": {"token_ids": "float32"},
        }
    )
    expected.append(("float token_ids", None, "int32"))
    requests.append(
        {"signature": "generate_ids", "inputs": dict(token_ids=[[7, 8]], lengths=[3], **sampling())}
    )
    expected.append(("lengths > width", "InvalidArgumentError", "`lengths` must be in"))
    return requests, expected


@pytest.fixture(scope="module")
def served(exports, tmp_path_factory):
    """Runs tests/serving_client.py once (keras and keras_tfm blocked)."""
    gpt_calls = [
        {"signature": "generate", "inputs": dict(prompts=GPT_PROMPTS, **sampling(max_new_tokens=LONG_NEW))},
        {
            "signature": "generate_ids",
            "inputs": dict(token_ids=exports["gpt_padded"], lengths=exports["gpt_lengths"], **sampling()),
        },
        {
            "signature": "generate_ids",
            "inputs": dict(
                token_ids=exports["gpt_padded"],
                lengths=exports["gpt_lengths"],
                **sampling(temperature=1.0, top_k=5, top_p=0.9, seed=7),
            ),
        },
        {
            "signature": "serving_default",
            "inputs": {"token_ids": [exports["gpt_padded"][0][: len(GPT_PROMPTS[0])]]},
        },
        {
            "signature": "generate_ids",
            "inputs": dict(
                token_ids=exports["gpt_padded"],
                lengths=exports["gpt_lengths"],
                **sampling(max_new_tokens=SLIDE_NEW),
            ),
        },
        {"signature": "beam_search", "inputs": dict(prompts=GPT_PROMPTS, **beams(1))},
        {"signature": "beam_search", "inputs": dict(prompts=GPT_PROMPTS, **beams(2))},
        {
            "signature": "beam_search_ids",
            "inputs": dict(
                token_ids=exports["gpt_padded"],
                lengths=exports["gpt_lengths"],
                **beams(BEAMS, max_new_tokens=SLIDE_NEW),
            ),
        },
    ]
    bad, _ = bad_gpt_requests()
    s2s_calls = [
        {
            "signature": "translate",
            "inputs": dict(inputs=S2S_SOURCES, max_new_tokens=MAX_NEW, num_beams=1, length_penalty=0.6),
        },
        {
            "signature": "translate",
            "inputs": dict(inputs=S2S_SOURCES, max_new_tokens=MAX_NEW, num_beams=2, length_penalty=0.6),
        },
        {
            "signature": "translate",
            "inputs": dict(inputs=S2S_SOURCES, max_new_tokens=MAX_NEW, num_beams=3, length_penalty=0.6),
        },
    ]
    s2s_bad = [
        {
            "signature": "translate",
            "inputs": dict(inputs=["a"], max_new_tokens=MAX_NEW, num_beams=4, length_penalty=0.6),
        },
        {
            "signature": "translate",
            "inputs": dict(inputs=[], max_new_tokens=MAX_NEW, num_beams=1, length_penalty=0.6),
        },
        {
            "signature": "translate",
            "inputs": dict(inputs=["a"], max_new_tokens=100, num_beams=1, length_penalty=0.6),
        },
    ]
    spec = {
        "models": [
            {"path": exports["gpt_path"], "calls": gpt_calls, "bad": bad, "tf1_calls": [0, 3, 7]},
            {"path": exports["s2s_path"], "calls": s2s_calls, "bad": s2s_bad},
            {
                "path": exports["clf_path"],
                "calls": [{"signature": "classify", "inputs": {"inputs": BERT_TEXTS}}],
                "bad": [{"signature": "classify", "inputs": {"inputs": []}}],
            },
            {
                "path": exports["mlm_path"],
                "calls": [{"signature": "fill_mask", "inputs": {"inputs": ["the [MASK] sat"]}}],
                "bad": [{"signature": "fill_mask", "inputs": {"inputs": ["no mask here"]}}],
            },
        ],
        "saved_model_cli": [exports["gpt_path"]],
    }
    return run_serving_client(spec, tmp_path_factory.mktemp("client"), timeout=SUBPROCESS_TIMEOUT)


def test_loads_without_keras(served):
    assert served["blocked_modules_loaded"] == []


def test_gpt_signatures_match_in_process(exports, served):
    gpt_result = served["models"][0]
    assert set(gpt_result["signatures"]) == {
        "serving_default",
        "generate",
        "generate_ids",
        "beam_search",
        "beam_search_ids",
    }
    # The served fitting loop has one cache length (128) for every request; in process these calls take
    # cache lengths 64 and 128 (two segments): the same tokens.
    generate, ids, sampled, logits, slide, beam1, beam2, beam_slide = gpt_result["tf2"]
    assert generate["completions"] == exports["gpt_long"]
    assert generate["num_tokens"] == [LONG_NEW] * len(GPT_PROMPTS)
    assert ids["token_ids"] == exports["gpt_greedy_ids"]
    # Same seed → same tokens as in-process sampling (both XLA on the same device).
    assert sampled["token_ids"] == exports["gpt_sampled_ids"]
    np.testing.assert_allclose(logits["logits"], exports["gpt_logits"], atol=1e-5)
    # Past the model's 80 positions: the sliding-window loop, as in process.
    assert slide["token_ids"] == exports["gpt_slide_ids"]
    # num_beams is a request input: any width up to max_beams=3 from one 3-beam loop is the in-process
    # search of that width (1 = greedy), past the context too.
    assert beam1["completions"] == exports["gpt_greedy"]
    assert beam2["completions"] == exports["gpt_beam2"]
    np.testing.assert_allclose(beam2["scores"], exports["gpt_beam2_scores"], rtol=1e-5)
    # The TF1 session loader (as TF Serving): a text and an id signature, both loops, both searches
    # (each loop compiles once per loader).
    tf1_generate, tf1_logits, tf1_beam_slide = gpt_result["tf1"]
    assert tf1_generate == generate
    np.testing.assert_allclose(tf1_logits["logits"], exports["gpt_logits"], atol=1e-5)
    for result in (beam_slide, tf1_beam_slide):
        assert result["token_ids"] == exports["gpt_beam_slide"]["token_ids"]
        assert result["lengths"] == exports["gpt_beam_slide"]["lengths"]
        np.testing.assert_allclose(result["scores"], exports["gpt_beam_slide"]["scores"], rtol=1e-5)
    assert gpt_result["tf1_signatures"]["generate"] == {
        "inputs": ["max_new_tokens", "prompts", "seed", "temperature", "top_k", "top_p"],
        "outputs": ["completions", "num_tokens"],
    }
    assert gpt_result["tf1_signatures"]["beam_search"] == {
        "inputs": ["length_penalty", "max_new_tokens", "num_beams", "prompts"],
        "outputs": ["completions", "num_tokens", "scores"],
    }


def test_seq2seq_translate_matches_in_process(exports, served):
    s2s = served["models"][1]
    assert "translate" in s2s["signatures"]
    for loader in ("tf2", "tf1"):
        greedy, beam2, beam3 = s2s[loader]
        assert greedy["translations"] == exports["s2s_greedy"], loader
        # Any width up to max_beams=3 from one 3-beam loop: the in-process search of that width.
        assert beam2["translations"] == exports["s2s_beam2"], loader
        assert beam3["translations"] == exports["s2s_beam3"], loader
    # In process, `Seq2Seq.translate` answers what the served signature answers.
    model = exports["s2s_model"]
    for width, key in ((1, "s2s_greedy"), (2, "s2s_beam2"), (3, "s2s_beam3")):
        assert model.translate(S2S_SOURCES, num_beams=width, max_new_tokens=MAX_NEW) == exports[key], width
    widths, empty, too_many = s2s["bad"]
    assert widths["error"] == "InvalidArgumentError" and "`num_beams` must be in [1, 3]" in widths["message"]
    assert empty["error"] == "InvalidArgumentError" and "empty batch" in empty["message"]
    assert (
        too_many["error"] == "InvalidArgumentError" and "`max_new_tokens` must be <=" in too_many["message"]
    )


def test_bert_signatures(exports, served):
    clf, mlm = served["models"][2], served["models"][3]
    for loader in ("tf2", "tf1"):
        out = clf[loader][0]
        np.testing.assert_allclose(out["probabilities"], exports["clf_probs"], atol=1e-5)
        expected = ["pos" if p[1] > p[0] else "neg" for p in exports["clf_probs"]]
        assert out["labels"] == expected
        filled = mlm[loader][0]
        assert len(filled["top_tokens"][0]) == 5 and len(filled["top_probabilities"][0]) == 5
        assert filled["top_tokens"][0][0] == exports["mlm_top1"]
        assert filled["filled"][0] == f"the {exports['mlm_top1']} sat"
    assert "empty batch" in clf["bad"][0]["message"]
    assert mlm["bad"][0]["error"] == "InvalidArgumentError" and "[MASK]" in mlm["bad"][0]["message"]


def test_malformed_requests_fail_cleanly(served):
    _, expected = bad_gpt_requests()
    results = served["models"][0]["bad"]
    assert len(results) == len(expected)
    for (name, error, text), result in zip(expected, results):
        assert result["error"] is not None, f"{name}: accepted"
        if error is not None:
            assert result["error"] == error, (name, result)
        assert text in result["message"], (name, result["message"])


def test_warmup_records(exports, served):
    for path, result in zip(
        (exports["gpt_path"], exports["s2s_path"], exports["clf_path"], exports["mlm_path"]), served["models"]
    ):
        records = read_warmup_requests(path)
        assert records, path
        signatures = [r[1] for r in records]
        assert set(signatures) <= set(result["signatures"])
        assert all(r[0] == os.path.basename(os.path.dirname(path)) for r in records)
        for parsed in result["warmup"]:  # replayed by the client when tensorflow_serving is installed
            if parsed["parsed_with"]:
                assert parsed["outputs"]
    name, signature, inputs = read_warmup_requests(exports["gpt_path"])[1]
    assert (
        signature == "generate"
        and inputs["prompts"].dtype == object
        and inputs["max_new_tokens"].dtype == np.int32
    )


def test_warmup_encoding_matches_official_protos():
    data = warmup_lib.encode_prediction_log(
        "m", "generate", {"x": np.array([1, 2], np.int32), "s": np.array([b"hi"])}
    )
    name, signature, inputs = warmup_lib.decode_prediction_log(data)
    assert (name, signature) == ("m", "generate")
    np.testing.assert_array_equal(inputs["x"], [1, 2])
    assert inputs["s"].tolist() == [b"hi"]
    prediction_log_pb2 = pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")
    log = prediction_log_pb2.PredictionLog.FromString(data)
    assert log.predict_log.request.model_spec.signature_name == "generate"
    np.testing.assert_array_equal(tf.make_ndarray(log.predict_log.request.inputs["x"]), [1, 2])


def test_saved_model_cli_lists_signatures(served):
    """`saved_model_cli show --all` on the GPT export (run by the serving client, without Keras)."""
    (shown,) = served["saved_model_cli"]
    assert shown["code"] == 0, shown["stdout"][-2000:]
    for name in (
        "signature_def['generate']",
        "signature_def['generate_ids']",
        "signature_def['serving_default']",
        "inputs['prompts']",
        "outputs['completions']",
        "DT_STRING",
    ):
        assert name in shown["stdout"], name


def test_versions_and_atomic_writes(exports, tmp_path, monkeypatch):
    clf, tok = exports["clf_model"], exports["bert_tok"]
    base = tmp_path / "clf"
    first = export_for_serving(clf, base, tokenizer=tok, warmup=False)
    second = export_for_serving(clf, base, tokenizer=tok, warmup=False)
    assert os.path.basename(first) == "1" and os.path.basename(second) == "2"
    assert list_versions(base) == [1, 2]
    with pytest.raises(FileExistsError, match=r"clf[/\\]2"):
        export_for_serving(clf, base, tokenizer=tok, version=2)

    def broken_write_out(self, path, *args, **kwargs):
        os.makedirs(os.path.join(path, "variables"), exist_ok=True)
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"partial")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(type(keras.export.ExportArchive()), "write_out", broken_write_out)
    with pytest.raises(OSError, match="simulated"):
        export_for_serving(clf, base, tokenizer=tok)
    assert sorted(os.listdir(base)) == ["1", "2"]  # no version 3, no temporary directory left


def test_default_signatures(exports, served):
    """Beam search is exported on request: `signatures="all"` above; the defaults otherwise."""
    assert select_signatures("causal_lm", None, has_tokenizer=True) == (
        "serving_default",
        "generate",
        "generate_ids",
    )
    assert select_signatures("causal_lm", None, has_tokenizer=False) == ("serving_default", "generate_ids")
    assert select_signatures("causal_lm", "all", has_tokenizer=False) == (
        "serving_default",
        "generate_ids",
        "beam_search_ids",
    )
    assert select_signatures("causal_lm", ["beam_search", "generate"], True) == ("generate", "beam_search")
    # Another kind's single signature is also its serving_default (TF Serving's default request).
    assert served["models"][1]["signatures"] == ["serving_default", "translate"]
    assert served["models"][2]["signatures"] == ["classify", "serving_default"]


@pytest.mark.parametrize(
    "kind, tokenizer, signatures, error, message",
    [
        (
            "causal_lm",
            True,
            ["generate", "sample"],
            ValueError,
            r"unknown signature 'sample'; a causal_lm export has",
        ),
        (
            "causal_lm",
            True,
            ["translate"],
            ValueError,
            r"a causal_lm export has no 'translate' signature \(a seq2seq_lm one\)",
        ),
        ("classifier", True, "generate", ValueError, r"no 'generate' signature \(a causal_lm one\)"),
        (
            "causal_lm",
            False,
            ("generate_ids", "beam_search"),
            ValueError,
            r"'beam_search' takes and returns text",
        ),
        ("causal_lm", True, [], ValueError, r"`signatures` is empty"),
        (
            "causal_lm",
            True,
            3,
            TypeError,
            r"`signatures` must be None, 'all', a signature name or a sequence",
        ),
        ("causal_lm", True, ["generate", 1], TypeError, r"`signatures` must be None"),
    ],
)
def test_signatures_bad_input(exports, tmp_path, kind, tokenizer, signatures, error, message):
    model = exports["gpt_model"] if kind == "causal_lm" else exports["clf_model"]
    tok = (exports["char_tok"] if kind == "causal_lm" else exports["bert_tok"]) if tokenizer else None
    with pytest.raises(error, match=message):
        export_for_serving(model, tmp_path / "x", tokenizer=tok, signatures=signatures)
    assert not os.path.exists(tmp_path / "x")  # refused before anything is written


def test_export_argument_errors(exports, tmp_path):
    clf, tok = exports["clf_model"], exports["bert_tok"]
    assert detect_kind(clf) == "classifier" and detect_kind(exports["gpt_model"]) == "causal_lm"
    with pytest.raises(ValueError, match="version"):
        export_for_serving(clf, tmp_path / "x", tokenizer=tok, version=0)
    with pytest.raises(ValueError, match="kind"):
        export_for_serving(clf, tmp_path / "x", tokenizer=tok, kind="vit")
    with pytest.raises(ValueError, match="label_names"):
        export_for_serving(clf, tmp_path / "x", tokenizer=tok, label_names=["a", "b", "c"])
    big = WordTokenizer([f"w{i}" for i in range(100)])
    with pytest.raises(ValueError, match="tokenizer has"):
        export_for_serving(clf, tmp_path / "x", tokenizer=big)
    assert not os.path.exists(tmp_path / "x") or list_versions(tmp_path / "x") == []


def test_cli_export_and_generate(exports, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="keras-tfm")
    sub = parser.add_subparsers(dest="command")
    export_cli.register(sub)
    generate_cli.register(sub)
    model_path, vocab_path = tmp_path / "clf.keras", tmp_path / "vocab.txt"
    exports["clf_model"].save(model_path)
    exports["bert_tok"].save_vocabulary(vocab_path)
    args = parser.parse_args(
        [
            "export",
            "--model",
            str(model_path),
            "--tokenizer",
            str(vocab_path),
            "--name",
            "clf",
            "--export-dir",
            str(tmp_path / "sm"),
            "--label-names",
            "neg,pos",
            "--no-warmup",
            "--signatures",
            "classify",
        ]
    )
    assert usage.run(args) == 0
    assert capsys.readouterr().out.strip().endswith(os.path.join("clf", "1"))
    bad = ["export", "--model", str(model_path), "--tokenizer", str(vocab_path), "--name", "clf"]
    bad += ["--export-dir", str(tmp_path / "sm")]
    assert usage.run(parser.parse_args(bad + ["--signatures", "classify,generate"])) == 2
    assert "--signatures: a classifier export has no 'generate' signature" in capsys.readouterr().err
    assert list_versions(tmp_path / "sm" / "clf") == [1]
    args = parser.parse_args(
        ["generate", "--model", str(tmp_path / "sm" / "clf"), "--prompt", BERT_TEXTS[0], "--json"]
    )
    assert usage.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["labels"][0] in ("neg", "pos")
    np.testing.assert_allclose(out["probabilities"][0], exports["clf_probs"][0], atol=1e-5)
    gpt_base = os.path.dirname(exports["gpt_path"])
    args = parser.parse_args(
        [
            "generate",
            "--model",
            gpt_base,
            "--version",
            "1",
            "--prompt",
            GPT_PROMPTS[0],
            "--prompt",
            GPT_PROMPTS[1],
            "--max-new-tokens",
            str(MAX_NEW),
            "--num-beams",
            "2",
        ]
    )
    assert usage.run(args) == 0  # --num-beams 2: the `beam_search` signature (greedy: test_cli_workflow)
    expected = [prompt + completion for prompt, completion in zip(GPT_PROMPTS, exports["gpt_beam2"])]
    assert capsys.readouterr().out.split("\n")[:2] == expected[:2]  # each prompt, then its completion
    # The default --max-new-tokens (64) fits every export whose `generate` slides past the context.
    info = export_info(exports["gpt_path"])
    assert info["sliding_window"] and default_max_new_tokens(info, ["h" * 8]) == 64
    assert info["max_beams"] == BEAMS
    assert (
        default_max_new_tokens({"max_length": 64, "max_new_tokens_limit": 63}, ["h" * 60]) == 4
    )  # older export
    args = parser.parse_args(["generate", "--model", gpt_base, "--prompt", "x", "--max-new-tokens", "-3"])
    assert usage.run(args) == 2
    assert "invalid request" in capsys.readouterr().err


def test_fill_mask_uses_the_tokenizers_mask_and_special_ids():
    """A published vocabulary puts [MASK] elsewhere (here 53, BERT's is 103; the fixed id 4 is an
    ordinary word): the endpoint encodes the mask with the tokenizer's id and never predicts one of
    its special ids (0, 50..53), while the low ids 1..6 stay predictable."""
    from keras_tfm.export.bert_serving import BertMaskedLMServing
    from keras_tfm.tokenizers import WordPieceTokenizer

    vocabulary = ["[PAD]"] + [f"w{i}" for i in range(1, 50)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocabulary += [f"w{i}" for i in range(54, 64)]
    roles = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    tokenizer = WordPieceTokenizer(vocabulary, special_tokens=roles)
    mlm = tiny_bert_masked_lm()
    fill_mask = dict((name, fn) for name, fn, _ in BertMaskedLMServing(mlm, tokenizer).endpoints())[
        "fill_mask"
    ]
    out = fill_mask(tf.constant(["w5 w6 [MASK] w7"]))
    ids = np.array([[51, 5, 6, 53, 7, 52]], np.int32)
    logits = np.array(
        mlm({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)})
    )
    logits = logits[0, 3].astype(np.float64)
    logits[[0, 50, 51, 52, 53]] = -np.inf
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    top = np.argsort(-probabilities)[:5]
    assert [t.decode() for t in out["top_tokens"].numpy()[0]] == [vocabulary[i] for i in top]
    np.testing.assert_allclose(out["top_probabilities"].numpy()[0], probabilities[top], rtol=1e-4)
    assert out["filled"].numpy()[0].decode() == f"w5 w6 {vocabulary[top[0]]} w7"
