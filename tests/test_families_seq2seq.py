"""T5 (v1.0, v1.1), BART and Marian checkpoints against HuggingFace transformers.

The references are the committed fixtures of tests/fixtures/pretrained/tiny_{t5,t5_v11,bart,marian}
(made once by make_family_fixtures.py with transformers 5.24): `reference.npz` holds HF's logits
and generation tokens, `reference.json` the settings of each generation run, the texts and HF's
decoded outputs. Each family is loaded once (module fixture) and generates with an uncompiled
`Generator` (the same loops as the compiled ones, without an XLA compile per test); `translate`
finds that generator through `get_generator`.

Logits: BART and Marian within 1e-4 of HF's float32 logits. The T5 fixtures are ill-conditioned in
float32 (HF's own float32 logits differ from its float64 ones by about 6e-4 and 7e-3), so T5 is
checked against HF's float64 logits (`reference_float64.npz`, make_float64_logits.py) within
1e-4 plus twice HF float32's own error there: the summation order of the matrix kernels alone
moves a float32 result by that much (T5 v1.1 on an Intel Xeon with AMX: 1.2e-2 from float64 with
TensorFlow's oneDNN kernels, 7.6e-3 with its Eigen ones, HF's float32 7.5e-3).

Generation: greedy tokens for every family and, per family, one of the three beam-4 runs
(`BEAM_RUN`: the two length penalties and early stopping are each covered, and BART's forced
tokens and Marian's forced EOS and banned pad id act in beams), compared up to each row's EOS (HF
fills finished beams with `pad_token_id or eos_token_id`). Text: `translate` in process, and the
`translate` signature of an exported T5 checkpoint (greedy and beam 4), against HF's decoded texts.
"""

import json
import os
import shutil
import warnings

import numpy as np
import pytest
from serving_client_runner import run_serving_client

import keras_tfm
from keras_tfm.export import export_for_serving
from keras_tfm.export.trusted_ops import untrusted_ops
from keras_tfm.generation import generator as generator_lib
from keras_tfm.models import Seq2Seq
from keras_tfm.tokenizers import BytePairTokenizer
from keras_tfm.tokenizers.unigram import UnigramTokenizer

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pretrained")
FAMILIES = ("tiny_t5", "tiny_t5_v11", "tiny_bart", "tiny_marian")
#: The beam-4 run of reference.json checked per family (one generation loop each, to stay cheap).
BEAM_RUN = {
    "tiny_t5": "beam4_lp0.8",
    "tiny_t5_v11": "beam4_lp1.5",
    "tiny_bart": "beam4_lp1.5_early",
    "tiny_marian": "beam4_lp0.8",
}
#: The tokenizer each family's files give.
TOKENIZER_KIND = {
    "tiny_t5": UnigramTokenizer,  # tokenizer.json
    "tiny_t5_v11": UnigramTokenizer,  # spiece.model
    "tiny_bart": BytePairTokenizer,  # tokenizer.json (byte-level BPE)
    "tiny_marian": (UnigramTokenizer, UnigramTokenizer),  # source.spm, target.spm + vocab.json
}
ATOL = 1e-4
#: The `translate` inputs of a reference run's settings.
BEAM_SETTINGS = ("max_new_tokens", "num_beams", "length_penalty")


class Family:
    """A loaded fixture: its model, uncompiled generator, reference arrays and settings."""

    def __init__(self, name):
        self.name = name
        self.folder = os.path.join(HERE, name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.model = Seq2Seq.from_preset(self.folder)
        self.warnings = [str(w.message) for w in caught]
        self.generator = generator_lib.Generator(self.model, run_eagerly=True)
        generator_lib._GENERATORS[self.model] = self.generator  # what `translate` runs
        self.arrays = np.load(os.path.join(self.folder, "reference.npz"))
        with open(os.path.join(self.folder, "reference.json"), encoding="utf-8") as f:
            self.reference = json.load(f)
        self.runs = {run["name"]: run for run in self.reference["runs"]}
        self.eos_id = self.reference["special_ids"]["eos_token_id"]

    def logits(self, model=None):
        inputs = {
            "encoder_token_ids": self.arrays["input_ids"],
            "decoder_token_ids": self.arrays["decoder_input_ids"],
        }
        return np.asarray((model or self.model)(inputs))

    def sources(self):
        """HF's generation inputs: right-padded ids and the number of real tokens per row."""
        return self.arrays["gen_input_ids"], self.arrays["gen_attention_mask"].sum(axis=1)


@pytest.fixture(scope="module")
def families():
    loaded = {}

    def get(name):
        if name not in loaded:
            loaded[name] = Family(name)
        return loaded[name]

    return get


def until_eos(row, eos_id):
    """A row's tokens up to and including its first EOS (all of them when it has none)."""
    row = [int(t) for t in row]
    return row[: row.index(eos_id) + 1] if eos_id in row else row


def assert_rows_equal(got, want, eos_id, what):
    for i, (g, w) in enumerate(zip(got, want)):
        assert until_eos(g, eos_id) == until_eos(w, eos_id), f"{what}, row {i}"


@pytest.mark.parametrize("name", FAMILIES)
def test_loads_with_tokenizer_and_special_ids(families, name):
    family = families(name)
    assert family.warnings == []  # every weight mapped, none left over, the tokenizer read
    assert isinstance(family.model, Seq2Seq)
    kind, tokenizer = TOKENIZER_KIND[name], family.model.tokenizer
    if isinstance(kind, tuple):
        assert isinstance(tokenizer, tuple) and all(map(isinstance, tokenizer, kind))
    else:
        assert isinstance(tokenizer, kind)
    special = family.reference["special_ids"]
    config = family.model.generation_config
    assert config["decoder_start_id"] == special["decoder_start_token_id"]
    assert config["eos_id"] == special["eos_token_id"]
    assert config["forced_bos_id"] == special["forced_bos_token_id"]
    assert config["forced_eos_id"] == special["forced_eos_token_id"]
    assert list(config["suppressed_ids"]) == [i for ids in special["bad_words_ids"] or [] for i in ids]
    assert family.model.pad_id == special["pad_token_id"]


def test_from_pretrained_picks_seq2seq():
    model = keras_tfm.models.from_pretrained(os.path.join(HERE, "tiny_marian"))
    assert isinstance(model, Seq2Seq) and isinstance(model.tokenizer, tuple)


@pytest.mark.parametrize("name", FAMILIES)
def test_logits_match_hf(families, name):
    family = families(name)
    real = family.arrays["decoder_mask"].astype(bool)
    got, hf32 = family.logits()[real], family.arrays["logits"][real]
    float64_file = os.path.join(family.folder, "reference_float64.npz")
    if not os.path.exists(float64_file):
        np.testing.assert_allclose(got, hf32, rtol=0, atol=ATOL)
        return
    hf64 = np.load(float64_file)["logits"][real]
    hf32_error = np.abs(hf32 - hf64).max()
    assert np.abs(got - hf64).max() <= ATOL + 2 * hf32_error  # float32's own error, either summation order


@pytest.mark.parametrize("name", FAMILIES)
def test_greedy_tokens_match_hf(families, name):
    family = families(name)
    run = family.runs["greedy"]
    ids, lengths = family.sources()
    tokens = family.generator.generate(ids, run["settings"]["max_new_tokens"], source_lengths=lengths)
    want = family.arrays[run["npz_tokens"]][:, 1:]  # HF's rows start with the decoder start token
    assert_rows_equal(tokens, want, family.eos_id, f"{name} greedy")


@pytest.mark.parametrize("name", FAMILIES)
def test_beam_tokens_match_hf(families, name):
    family = families(name)
    run = family.runs[BEAM_RUN[name]]
    settings = run["settings"]
    ids, lengths = family.sources()
    sequences, scores, _ = family.generator.beam_search(
        ids,
        settings["max_new_tokens"],
        num_beams=settings["num_beams"],
        source_lengths=lengths,
        length_penalty=settings["length_penalty"],
        early_stopping=settings["early_stopping"],
    )
    want = family.arrays[run["npz_tokens"]][:, :, 1:]
    for beam in range(settings["num_beams"]):
        assert_rows_equal(
            sequences[:, beam], want[:, beam], family.eos_id, f"{name} {run['name']} beam {beam}"
        )
    np.testing.assert_allclose(scores, family.arrays[run["npz_scores"]], rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", FAMILIES)
def test_save_pretrained_loads_back(families, name, tmp_path):
    family = families(name)
    keras_tfm.checkpoints.save_pretrained(family.model, tmp_path / "saved")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = keras_tfm.models.from_pretrained(tmp_path / "saved")
    assert isinstance(loaded, Seq2Seq)
    np.testing.assert_array_equal(family.logits(loaded), family.logits())
    assert loaded.generation_config == family.model.generation_config
    assert loaded.generation_defaults == family.model.generation_defaults
    # The tokenizer files written (T5 tokenizer.json, Marian source.spm + target.spm + vocab.json, BART
    # vocab.json + merges.txt) read back as the same tokenizer(s): every option equal, hence every id.
    pairs = zip(*(t if isinstance(t, tuple) else (t,) for t in (loaded.tokenizer, family.model.tokenizer)))
    for got, want in pairs:
        got, want = dict(got.get_config(), name=None), dict(want.get_config(), name=None)
        if "added_tokens" in got and isinstance(got["added_tokens"][0], list):
            got["added_tokens"], want["added_tokens"] = (
                sorted(got["added_tokens"]),
                sorted(want["added_tokens"]),
            )
        assert [k for k in want if got.get(k) != want[k]] == []


@pytest.mark.parametrize("name", ["tiny_t5", "tiny_bart", "tiny_marian"])
def test_translate_text_matches_hf(families, name):
    """Text in, text out with the checkpoint's tokenizer (T5: "translate English to German: …"):
    HF's greedy texts. tiny_t5_v11 has tiny_t5's tokenizer (read from spiece.model, which
    test_tokenizers_unigram.py checks) and is left out: a Unigram tokenizer's first call costs
    seconds."""
    family = families(name)
    sources = family.reference["generation_inputs"]["sources"]
    run = family.runs["greedy"]
    max_new = run["settings"]["max_new_tokens"]
    assert family.model.translate(sources, num_beams=1, max_new_tokens=max_new) == run["decoded_best"]


@pytest.mark.parametrize(
    "name, field, value",
    [
        ("tiny_t5", "model_type", "mt5"),
        ("tiny_t5", "feed_forward_proj", "gated-relu6"),
        ("tiny_bart", "add_final_layer_norm", True),
        ("tiny_marian", "activation_function", "prelu"),
    ],
)
def test_unsupported_config_is_refused_by_name(name, field, value, tmp_path):
    folder = tmp_path / name
    shutil.copytree(os.path.join(HERE, name), folder)
    config = json.loads((folder / "config.json").read_text())
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=rf"'{field}' = {value!r}"):
        Seq2Seq.from_preset(folder)


@pytest.mark.parametrize("name", ["tiny_t5"])
def test_export_serves_text_with_the_checkpoints_special_ids(families, name, tmp_path):
    """The served `translate` of a T5 checkpoint (sources padded with its pad id 0, decoding from
    the pad id to `</s>`, HF's beam search) answers HF's greedy and beam-4 texts."""
    family = families(name)
    path = export_for_serving(
        family.model, tmp_path / name, max_beams=4, max_new_tokens_limit=12, warmup=False, jit_compile=False
    )
    sources = family.reference["generation_inputs"]["sources"]
    runs = (family.runs["greedy"], family.runs["beam4_lp0.8"])
    calls = [
        {
            "signature": "translate",
            "inputs": {"inputs": sources, **{k: run["settings"][k] for k in BEAM_SETTINGS}},
        }
        for run in runs
    ]
    # Through the TF2 loader and TF Serving's TF1 session, with keras and keras_tfm blocked.
    result = run_serving_client({"models": [{"path": path, "calls": calls, "bad": []}]}, tmp_path)
    assert result["blocked_modules_loaded"] == []
    (entry,) = result["models"]
    for loader in ("tf2", "tf1"):
        assert [call["translations"] for call in entry[loader]] == [run["decoded_best"] for run in runs]
    # `keras-tfm generate` loads it: every op is one keras_tfm's exports emit (`trusted_ops`).
    assert untrusted_ops(path) == {}
