"""The bad-input table of checkpoints, tokenizer files and model options (issue 26, part A).

Same contract as `tests/test_bad_input.py`: every entry is a bad input to a public API and the
clear error it must raise (exception type + a regex on the message naming the argument, file or
field), or, marked RECOVERS, a documented behaviour that the case checks itself. Run alone:

    python -m pytest tests/test_bad_input_checkpoints.py -q
"""

import functools
import json
import os
import shutil
import warnings

import keras
import numpy as np
import pytest
from bad_input_table import RECOVERS, Table, run_case
from model_harness import tiny_bert_classifier, tiny_bert_encoder, tiny_gpt, tiny_seq2seq, tiny_vit

from keras_tfm import models
from keras_tfm.checkpoints import pretrained_tokenizer, save_pretrained
from keras_tfm.layers import MultiHeadSelfAttention, TransformerBlock
from keras_tfm.layers.positional_encoding_2d import PositionalEncoding2D
from keras_tfm.models import from_pretrained, sentence_encoder
from keras_tfm.tokenizers import BytePairTokenizer, CharTokenizer, WordPieceTokenizer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained")
NAN, INF = float("nan"), float("inf")


class Env:
    def __init__(self, root):
        self.root = root

    def copy(self, fixture, name):
        """A fresh copy of a fixture checkpoint directory, to damage."""
        target = os.path.join(self.root, name)
        shutil.copytree(os.path.join(FIXTURES, fixture), target)
        return target

    def edit_config(self, fixture, name, file="config.json", **changes):
        folder = self.copy(fixture, name)
        path = os.path.join(folder, file)
        config = json.load(open(path)) if os.path.exists(path) else {}
        config.update(changes)
        with open(path, "w") as f:
            json.dump(config, f)  # NaN / Infinity written as JavaScript literals, as json.dump does
        return folder

    def write(self, folder, name, text):
        os.makedirs(os.path.join(self.root, folder), exist_ok=True)
        path = os.path.join(self.root, folder, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return os.path.join(self.root, folder)

    def damage_weight(self, fixture, name, tensor, value):
        """A copy of `fixture` whose tensor `tensor` is replaced by `value(array)`."""
        from safetensors.numpy import load_file, save_file

        folder = self.copy(fixture, name)
        path = os.path.join(folder, "model.safetensors")
        tensors = load_file(path)
        tensors[tensor] = value(tensors[tensor])
        save_file(tensors, path, metadata={"format": "pt"})
        return folder

    @functools.cached_property
    def tokenizer(self):
        return CharTokenizer.from_corpus("hello world, this is a tiny corpus! yes.")

    @functools.cached_property
    def ids(self):
        return np.random.default_rng(0).integers(0, self.tokenizer.vocabulary_size, (2, 8)).astype("int32")

    def quantized_gpt(self):
        model = tiny_gpt(vocabulary_size=self.tokenizer.vocabulary_size, num_layers=1)
        model.quantize("int8")
        return model


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return Env(str(tmp_path_factory.mktemp("bad_input_checkpoints")))


TABLE = Table()
case, simple, CASES = TABLE.case, TABLE.simple, TABLE.cases


# ---- 1. quantized models: every writer of weights -------------------------- #
@case(
    "quantized-save_pretrained-refused",
    ValueError,
    r"quantized \('int8': 6 layers.*save_pretrained writes float weights.*before `quantize",
)
def _(env):
    save_pretrained(env.quantized_gpt(), os.path.join(env.root, "quantized_checkpoint"))


@case("quantized-save_pretrained-writes-nothing", RECOVERS)
def _(env):
    path = os.path.join(env.root, "quantized_nothing")
    with pytest.raises(ValueError):
        save_pretrained(env.quantized_gpt(), path)
    assert not os.path.exists(path)
    assert not [n for n in os.listdir(env.root) if n.startswith(".quantized_nothing")]


@case("quantized-keras-file-round-trip", RECOVERS)
def _(env):
    model = env.quantized_gpt()
    expected = np.asarray(model(env.ids))
    path = os.path.join(env.root, "quantized.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.blocks[0].feed_forward.inner_dense.quantization_mode == "int8"
    np.testing.assert_allclose(np.asarray(loaded(env.ids)), expected, atol=1e-5)


@case("quantized-export-serves-quantized-logits", RECOVERS)
def _(env):
    import tensorflow as tf

    from keras_tfm.export import export_for_serving

    model = env.quantized_gpt()
    expected = np.asarray(model(env.ids))
    path = export_for_serving(
        model,
        os.path.join(env.root, "quantized_export"),
        tokenizer=env.tokenizer,
        warmup=False,
        max_prompt_length=8,
        max_new_tokens_limit=2,
    )
    served = tf.saved_model.load(path).signatures["serving_default"](token_ids=tf.constant(env.ids))
    np.testing.assert_allclose(served["logits"].numpy(), expected, atol=1e-4)


@case("quantized-merge_lora-refused", ValueError, r"merge_lora\(\).*quantized.*int8.*before `quantize")
def _(env):
    model = tiny_gpt(vocabulary_size=env.tokenizer.vocabulary_size, num_layers=1)
    model.enable_lora(2)
    model.quantize("int8")
    model.merge_lora()


# ---- 2. checkpoint tensors: dtype and finiteness ---------------------------- #
def _tensor_case(case_id, tensor, value, match):
    @case(case_id, ValueError, match)
    def _(env):
        from_pretrained(env.damage_weight("tiny_bert", case_id, tensor, value))


_WORD = "bert.embeddings.word_embeddings.weight"
_tensor_case(
    "checkpoint-nan-weight",
    _WORD,
    lambda a: np.where(np.arange(a.size).reshape(a.shape) == 5, np.nan, a).astype(a.dtype),
    r"model\.safetensors: tensor 'bert\.embeddings\.word_embeddings\.weight' has 1 non-finite value",
)
_tensor_case(
    "checkpoint-inf-weight",
    "bert.encoder.layer.0.output.dense.weight",
    lambda a: np.full_like(a, np.inf),
    r"model\.safetensors: tensor 'bert\.encoder\.layer\.0\.output\.dense\.weight' has \d+ non-finite",
)
_tensor_case(
    "checkpoint-int8-weight",
    _WORD,
    lambda a: np.clip(np.round(a * 100), -127, 127).astype(np.int8),
    r"model\.safetensors: tensor 'bert\.embeddings\.word_embeddings\.weight' has dtype int8.*float",
)
_tensor_case(
    "checkpoint-int64-weight",
    "bert.encoder.layer.0.attention.self.query.weight",
    lambda a: np.round(a * 1000).astype(np.int64),
    r"model\.safetensors: tensor 'bert\.encoder\.layer\.0\.attention\.self\.query\.weight' has dtype int64",
)


@case("checkpoint-float16-weight-accepted", RECOVERS)
def _(env):
    folder = env.damage_weight("tiny_bert", "float16", _WORD, lambda a: a.astype(np.float16))
    model = from_pretrained(folder)
    np.testing.assert_allclose(
        np.asarray(model.token_embedding.embeddings),
        np.asarray(from_pretrained(os.path.join(FIXTURES, "tiny_bert")).token_embedding.embeddings),
        atol=1e-2,
    )


# ---- 3. float options: finite and in range --------------------------------- #
def _config_case(case_id, fixture, field, value, match, file="config.json"):
    @case(case_id, ValueError, match)
    def _(env):
        from_pretrained(env.edit_config(fixture, case_id, file, **{field: value}))


_config_case(
    "config-layer_norm_eps-nan",
    "tiny_bert",
    "layer_norm_eps",
    NAN,
    r"config\.json: field 'layer_norm_eps' = nan",
)
_config_case(
    "config-layer_norm_eps-infinity", "tiny_bert", "layer_norm_eps", INF, r"'layer_norm_eps' = inf.*finite"
)
_config_case(
    "config-gpt2-layer_norm_epsilon-nan",
    "tiny_gpt2",
    "layer_norm_epsilon",
    NAN,
    r"'layer_norm_epsilon' = nan",
)
_config_case("config-rms_norm_eps-infinity", "tiny_llama", "rms_norm_eps", INF, r"'rms_norm_eps' = inf")
_config_case("config-rope_theta-nan", "tiny_llama", "rope_theta", NAN, r"'rope_theta' = nan")
_config_case(
    "config-rope_parameters-rope_theta-nan",
    "tiny_llama",
    "rope_parameters",
    {"rope_theta": NAN, "rope_type": "default"},
    r"'rope_parameters\.rope_theta' = nan",
)
_config_case(
    "config-rope_parameters-rope_theta-string",
    "tiny_llama",
    "rope_parameters",
    {"rope_theta": "10000", "rope_type": "default"},
    r"'rope_parameters\.rope_theta' = '10000'",
)
_config_case(
    "config-hidden_dropout_prob-nan", "tiny_bert", "hidden_dropout_prob", NAN, r"'hidden_dropout_prob' = nan"
)

simple(
    "gpt-layer_norm_epsilon-nan",
    ValueError,
    r"`layer_norm_epsilon`.*finite.*nan",
    lambda: models.gpt("tiny", layer_norm_epsilon=NAN),
)
simple(
    "gpt-layer_norm_epsilon-inf",
    ValueError,
    r"`layer_norm_epsilon`.*finite.*inf",
    lambda: models.gpt("tiny", layer_norm_epsilon=INF),
)
simple(
    "bert-layer_norm_epsilon-nan",
    ValueError,
    r"`layer_norm_epsilon`.*nan",
    lambda: models.bert_encoder("tiny", layer_norm_epsilon=NAN),
)
simple(
    "seq2seq-layer_norm_epsilon-inf",
    ValueError,
    r"`layer_norm_epsilon`.*inf",
    lambda: models.seq2seq("tiny", layer_norm_epsilon=INF),
)
simple(
    "vit-layer_norm_epsilon-nan",
    ValueError,
    r"`layer_norm_epsilon`.*nan",
    lambda: tiny_vit(layer_norm_epsilon=NAN),
)
simple(
    "block-layer_norm_epsilon-nan",
    ValueError,
    r"`layer_norm_epsilon`.*nan",
    lambda: TransformerBlock(32, 2, 64, layer_norm_epsilon=NAN),
)
simple(
    "block-layer_norm_epsilon-inf",
    ValueError,
    r"`layer_norm_epsilon`.*inf",
    lambda: TransformerBlock(32, 2, 64, layer_norm_epsilon=INF),
)
simple(
    "attention-rope_max_wavelength-nan",
    ValueError,
    r"`rope_max_wavelength`.*nan",
    lambda: MultiHeadSelfAttention(2, position="rope", rope_max_wavelength=NAN),
)
simple(
    "attention-rope_max_wavelength-string",
    TypeError,
    r"`rope_max_wavelength`.*'1e4'",
    lambda: MultiHeadSelfAttention(2, position="rope", rope_max_wavelength="1e4"),
)
simple(
    "positional_encoding_2d-max_wavelength-inf",
    ValueError,
    r"`max_wavelength`.*inf",
    lambda: PositionalEncoding2D(grid_size=(2, 2), max_wavelength=INF),
)
simple(
    "gpt-rope_max_wavelength-inf",
    ValueError,
    r"`rope_max_wavelength`.*inf",
    lambda: models.gpt("tiny", position="rope", rope_max_wavelength=INF),
)


# ---- 4. config and tokenizer files read strictly --------------------------- #
@case(
    "modules-json-pooling-path-missing",
    ValueError,
    r"modules\.json: the Pooling module's path '2_Pool' has no config\.json.*does not exist",
)
def _(env):
    folder = env.copy("tiny_bert", "pooling_path")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "2_Pool", "type": "sentence_transformers.models.Pooling"},
    ]
    json.dump(modules, open(os.path.join(folder, "modules.json"), "w"))
    os.makedirs(os.path.join(folder, "1_Pooling"))
    json.dump({"pooling_mode_cls_token": True}, open(os.path.join(folder, "1_Pooling", "config.json"), "w"))
    sentence_encoder(folder)


@case(
    "tokenizer_config-do_lower_case-string",
    TypeError,
    r"tokenizer_config\.json: `do_lower_case` must be true or false; found 'false'",
)
def _(env):
    WordPieceTokenizer.from_pretrained(
        env.edit_config("tiny_bert", "lower_string", "tokenizer_config.json", do_lower_case="false")
    )


@case(
    "tokenizer_config-tokenize_chinese_chars-string",
    TypeError,
    r"tokenizer_config\.json: `tokenize_chinese_chars`.*'no'",
)
def _(env):
    WordPieceTokenizer.from_pretrained(
        env.edit_config("tiny_bert", "chinese_string", "tokenizer_config.json", tokenize_chinese_chars="no")
    )


@case("cased-vocabulary-lowercased-warns", RECOVERS)
def _(env):
    vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nHello\nWorld\n,\n"
    folder = env.write("cased", "vocab.txt", vocab)
    env.write("cased", "tokenizer_config.json", json.dumps({"do_lower_case": True}))
    with pytest.warns(UserWarning, match=r"vocab\.txt.*upper-case.*do_lower_case.*tokenizer_config\.json"):
        WordPieceTokenizer.from_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok = WordPieceTokenizer.from_pretrained(folder, lowercase=False)  # the way out: no warning
    assert tok.lowercase is False


# ---- tokenizer files named but missing, or cut short (issue 36, 4) ---------- #
MINILM = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "all-MiniLM-L6-v2")


def _tokenizer_not_attached(folder, match):
    with pytest.warns(UserWarning, match=r"tokenizer was not attached \(.*" + match):
        model = from_pretrained(folder)
    assert model.tokenizer is None


@case("gpt2-merges-without-vocab-json-warns", RECOVERS)
def _(env):
    folder = env.copy("tiny_gpt2", "no_vocab_json")
    os.remove(os.path.join(folder, "vocab.json"))
    _tokenizer_not_attached(folder, r"needs vocab\.json \+ merges\.txt.*found \['merges\.txt'\]")
    os.symlink(os.path.join(folder, "gone.json"), os.path.join(folder, "vocab.json"))  # a dangling link
    _tokenizer_not_attached(folder, r"needs vocab\.json \+ merges\.txt")


@case("bert-tokenizer-config-without-vocab-txt-warns", RECOVERS)
def _(env):
    folder = env.copy("tiny_bert", "no_vocab_txt")
    os.remove(os.path.join(folder, "vocab.txt"))
    _tokenizer_not_attached(folder, r"needs vocab\.txt.*found \['tokenizer_config\.json'\]")


@case("bert-vocab-txt-truncated-warns", RECOVERS)
def _(env):
    if not os.path.isdir(MINILM):
        pytest.skip(f"the shared MiniLM checkpoint is absent ({MINILM})")
    folder = os.path.join(env.root, "truncated_vocab")
    os.makedirs(folder)
    for name in ("config.json", "tokenizer_config.json", "model.safetensors"):
        shutil.copy(os.path.join(MINILM, name), folder)
    with open(os.path.join(MINILM, "vocab.txt"), encoding="utf-8") as f:
        lines = f.readlines()
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines[:1000])  # 1,000 of 30,522 tokens
    _tokenizer_not_attached(folder, r"1000 tokens but the model 30522 embedding rows.*truncated")


# ---- 5. clear errors instead of TF's ---------------------------------------- #
@case("config-vocab_size-huge", ValueError, r"config\.json.*'vocab_size'.*needs [\d.]+ [TPG]B")
def _(env):
    from_pretrained(env.edit_config("tiny_bert", "huge_vocab", vocab_size=10**12))


simple(
    "gpt-vocabulary_size-huge",
    ValueError,
    r"`vocabulary_size`=1000000000000 × `d_model`=32 .*needs [\d.]+ [TPG]B",
    lambda: models.gpt("tiny", vocabulary_size=10**12),
)


@case("enable_lora-rank-huge", ValueError, r"`rank`=1000000000.*needs [\d.]+ [TPG]B")
def _(env):
    tiny_gpt(num_layers=1).enable_lora(10**9)


@case("enable_lora-rank-huge-leaves-model-unchanged", RECOVERS)
def _(env):
    model = tiny_gpt(num_layers=1)
    with pytest.raises(ValueError):
        model.enable_lora(10**9)
    assert all(w.trainable for w in model.weights) and not getattr(model, "_lora", None)
    model.enable_lora(2)  # still possible


@case("seq2seq-quantize-before-first-call", RECOVERS)
def _(env):
    model = tiny_seq2seq()
    model.quantize("int8")
    source = np.ones((1, 4), "int32")
    logits = model({"encoder_token_ids": source, "decoder_token_ids": source})
    assert np.isfinite(np.asarray(logits)).all()


@case("gpt-sinusoidal-quantize-before-first-call", RECOVERS)
def _(env):
    model = tiny_gpt(position="sinusoidal", num_layers=1)
    model.quantize("int8")
    assert np.isfinite(np.asarray(model(np.ones((1, 4), "int32")))).all()


def _quantize_first_case(case_id, build):
    @case(case_id, RECOVERS)
    def _(env):
        model = build()
        model.quantize("int8")
        assert np.isfinite(np.asarray(model(np.ones((1, 4), "int32")))).all()


_quantize_first_case("gpt-rope-quantize-before-first-call", lambda: tiny_gpt(position="rope", num_layers=1))
_quantize_first_case("gpt-alibi-quantize-before-first-call", lambda: tiny_gpt(position="alibi", num_layers=1))


@case(
    "merges-txt-duplicate-line", ValueError, r"merges\.txt, line 4: duplicate merge 'h e' \(also on line 3\)"
)
def _(env):
    folder = env.copy("tiny_gpt2", "dup_merges")
    path = os.path.join(folder, "merges.txt")
    lines = open(path, encoding="utf-8").read().split("\n")
    lines.insert(3, lines[2])
    open(path, "w", encoding="utf-8").write("\n".join(lines))
    BytePairTokenizer.from_pretrained(folder)


@case("vocab-txt-bom-stripped", RECOVERS)
def _(env):
    folder = env.copy("tiny_bert", "bom")
    path = os.path.join(folder, "vocab.txt")
    text = open(path, encoding="utf-8").read()
    open(path, "w", encoding="utf-8").write("\ufeff" + text)
    tok = WordPieceTokenizer.from_pretrained(folder)
    assert tok.get_vocabulary()[0] == text.split("\n")[0]


@case("vocab-txt-with-stray-merges-txt-is-wordpiece", RECOVERS)
def _(env):
    folder = env.copy("tiny_bert", "stray_merges")
    shutil.copy(os.path.join(FIXTURES, "tiny_gpt2", "merges.txt"), folder)
    assert isinstance(pretrained_tokenizer(folder), WordPieceTokenizer)


@case(
    "gpt2-config-without-vocab-json",
    FileNotFoundError,
    r"'gpt2'.*needs vocab\.json \+ merges\.txt.*found.*vocab\.txt",
)
def _(env):
    folder = env.copy("tiny_bert", "gpt2_named")
    shutil.copy(os.path.join(FIXTURES, "tiny_gpt2", "config.json"), folder)
    os.remove(os.path.join(folder, "tokenizer_config.json"))  # config.json alone declares the kind
    pretrained_tokenizer(folder)


# ---- 6. one-class classifiers ---------------------------------------------- #
simple(
    "bert_classifier-num_classes-1",
    ValueError,
    r"`num_classes` must be >= 2.*received 1.*num_classes=2",
    lambda: tiny_bert_classifier(num_classes=1),
)
simple(
    "bert_token_classifier-num_classes-1",
    ValueError,
    r"`num_classes` must be >= 2.*received 1",
    lambda: models.bert_token_classifier(tiny_bert_encoder(), num_classes=1),
)
simple(
    "vit-num_classes-1",
    ValueError,
    r"`num_classes` must be >= 2.*received 1",
    lambda: tiny_vit(num_classes=1),
)


@case(
    "config-one-label-classifier", ValueError, r"config\.json: field 'id2label' gives 1 label.*num_classes=2"
)
def _(env):
    folder = env.edit_config("tiny_bert", "one_label", id2label={"0": "POSITIVE"})
    from_pretrained(folder, task="classifier")


# ---- 7. issue 36: deeply nested JSON, huge position tables ------------------ #
NESTED_JSON = "[" * 100_000 + "]" * 100_000


@case(
    "config-json-nested-too-deeply",
    ValueError,
    r"config\.json: not a readable JSON file \(nested too deeply\)",
)
def _(env):
    folder = env.copy("tiny_bert", "nested_config")
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(NESTED_JSON)
    from_pretrained(folder)


@case("vocab-json-nested-too-deeply", ValueError, r"vocab\.json' is not readable JSON: nested too deeply")
def _(env):
    folder = env.copy("tiny_gpt2", "nested_vocab")
    with open(os.path.join(folder, "vocab.json"), "w") as f:
        f.write(NESTED_JSON)
    pretrained_tokenizer(folder)


@case(
    "tokenizer-json-nested-too-deeply",
    ValueError,
    r"tokenizer\.json' is not readable JSON: nested too deeply",
)
def _(env):
    folder = env.copy("tiny_gpt2", "nested_tokenizer_json")
    for name in ("vocab.json", "merges.txt"):
        os.remove(os.path.join(folder, name))
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write(NESTED_JSON)
    BytePairTokenizer.from_pretrained(folder)


@case(
    "config-n_positions-huge",
    ValueError,
    r"config\.json: field 'n_positions' = 1000000000 .*needs [\d.]+ [TPG]B",
)
def _(env):
    from_pretrained(env.edit_config("tiny_gpt2", "huge_positions", n_positions=10**9))


@case(
    "config-max_position_embeddings-huge",
    ValueError,
    r"config\.json: field 'max_position_embeddings' = 1000000000 .*position embedding\) needs",
)
def _(env):
    from_pretrained(env.edit_config("tiny_bert", "huge_bert_positions", max_position_embeddings=10**9))


# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(("fn", "exc", "match"), CASES)
def test_bad_input(env, fn, exc, match):
    run_case(env, fn, exc, match)


def test_case_ids_are_unique():
    TABLE.assert_ids_unique()
