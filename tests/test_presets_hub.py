"""`ModelClass.from_preset`: built-in preset names, checkpoint directories and "hf://" hub names
(resolved offline against a cache laid out as the hub client lays it out), and the tokenizer
that `from_pretrained` attaches."""

import hashlib
import os
import shutil
import sys
import warnings

import numpy as np
import pytest

from keras_tfm.checkpoints import pretrained_tokenizer, save_pretrained
from keras_tfm.models import (
    GPT,
    BertClassifier,
    BertEncoder,
    BertMaskedLM,
    BertTokenClassifier,
    SentenceEncoder,
    Seq2Seq,
    TransformerModel,
    ViT,
    from_pretrained,
    get_preset,
    gpt_num_params,
    list_presets,
    sentence_encoder,
    seq2seq_num_params,
)
from keras_tfm.tokenizers import BytePairTokenizer, WordPieceTokenizer

HERE = os.path.dirname(__file__)
MINILM = os.path.join(HERE, "..", "..", "shared", "data", "all-MiniLM-L6-v2")
FIXTURES = os.path.join(HERE, "fixtures", "pretrained")
TINY_BERT, TINY_GPT2, TINY_LLAMA = (
    os.path.join(FIXTURES, n) for n in ("tiny_bert", "tiny_gpt2", "tiny_llama")
)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
needs_minilm = pytest.mark.skipif(not os.path.isdir(MINILM), reason=f"shared checkpoint {MINILM} absent")


def hub_cache(cache, repo_id, source, link_larger_than=1 << 20):
    """Lays `source`'s files out as the hub client caches repository `repo_id`:
    `models--org--name/{blobs/<sha256>, refs/main, snapshots/<commit>/<path> → ../../blobs/<sha256>}`.
    Blobs are copies, or links to the source file above `link_larger_than` bytes."""
    repo = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(COMMIT)
    for root, _, files in os.walk(source):
        for name in files:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, source)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            blob = os.path.join(repo, "blobs", digest)
            if not os.path.exists(blob):
                if os.path.getsize(path) > link_larger_than:
                    os.symlink(os.path.abspath(path), blob)
                else:
                    shutil.copyfile(path, blob)
            entry = os.path.join(repo, "snapshots", COMMIT, relative)
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            os.symlink(os.path.relpath(blob, os.path.dirname(entry)), entry)
    return repo


def ids(vocabulary_size, batch=2, length=7, seed=0):
    token_ids = np.random.default_rng(seed).integers(1, vocabulary_size, (batch, length)).astype("int32")
    return {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": np.ones_like(token_ids, dtype=bool),
    }


# ------------------------------------------------------------------ built-in preset names
def test_builtin_tiny_presets_build_their_sizes_for_every_class():
    gpt_model = GPT.from_preset("tiny")
    assert type(gpt_model) is GPT and gpt_model.count_params() == gpt_num_params("tiny")
    llama = GPT.from_preset("llama_tiny")
    assert llama.count_params() == gpt_num_params("llama_tiny") == 804_224
    assert (llama.config["norm"], llama.config["num_key_value_heads"]) == ("rms", 2)
    translator = Seq2Seq.from_preset("tiny")
    assert type(translator) is Seq2Seq and translator.count_params() == seq2seq_num_params("tiny")
    sizes = get_preset("bert", "tiny")
    encoder = BertEncoder.from_preset("tiny", dropout=0.1)
    assert type(encoder) is BertEncoder and encoder.config["dropout"] == 0.1
    for key in ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model", "d_ff"):
        assert encoder.config[key] == sizes[key], key
    heads = [
        (BertMaskedLM.from_preset("tiny"), BertMaskedLM, (sizes["vocabulary_size"],)),
        (BertClassifier.from_preset("tiny", num_classes=3, pooling="mean"), BertClassifier, (3,)),
        (BertTokenClassifier.from_preset("tiny", num_classes=5), BertTokenClassifier, (5,)),
        (SentenceEncoder.from_preset("tiny", pooling="max"), SentenceEncoder, (sizes["d_model"],)),
    ]
    for model, cls, width in heads:
        assert type(model) is cls
        assert model.encoder.config["num_layers"] == sizes["num_layers"]
        assert model.encoder.config["vocabulary_size"] == sizes["vocabulary_size"]
        assert tuple(model.output.shape[-1:]) == width
        assert model.tokenizer is None  # an untrained size: no tokenizer
    assert heads[1][0].pooling == "mean" and heads[3][0].pooling == "max"
    # As in from_pretrained: `dropout` is the encoder's, `classifier_dropout` the head's (default: the same).
    classifier = BertClassifier.from_preset("tiny", num_classes=2, dropout=0.1, classifier_dropout=0.3)
    assert (classifier.encoder.config["dropout"], classifier.config["dropout"]) == (0.1, 0.3)
    assert BertTokenClassifier.from_preset("tiny", num_classes=2, dropout=0.2).config["dropout"] == 0.2


def test_a_large_preset_gives_its_layout_under_explicit_sizes():
    """llama3_8b's layout (RoPE base 500000, RMSNorm, SwiGLU, GQA, 8192 positions) with small sizes."""
    small = dict(num_layers=1, d_model=32, num_heads=4, num_key_value_heads=2, d_ff=48, vocabulary_size=50)
    model = GPT.from_preset("llama3_8b", **small)
    expected = {**get_preset("gpt", "llama3_8b"), **small}
    for key, value in expected.items():
        assert model.config[key] == value, key
    assert model.count_params() == gpt_num_params("llama3_8b", **small)


def test_unknown_names_and_classes_without_presets():
    with pytest.raises(
        ValueError, match=r"Unknown `preset` 'gpt3' for GPT: expected a built-in preset name \["
    ) as e:
        GPT.from_preset("gpt3")
    assert all(name in str(e.value) for name in list_presets("gpt"))
    with pytest.raises(ValueError, match=r"'bert_base', 'bert_large', 'tiny'"):
        BertClassifier.from_preset("bert_huge", num_classes=2)
    with pytest.raises(ValueError, match=r"'tiny', 'transformer_base', 'transformer_big'"):
        Seq2Seq.from_preset("transformer_huge")
    with pytest.raises(ValueError, match=r"a model class's built-in preset name"):
        TransformerModel.from_preset("tiny")
    with pytest.raises(ValueError, match=r"ViT has no built-in presets and no checkpoint layout"):
        ViT.from_preset("tiny")
    with pytest.raises(TypeError, match=r"`num_classes` must be a positive int; received None"):
        BertClassifier.from_preset("tiny")
    with pytest.raises(TypeError, match=r"`preset` must be a preset name"):
        GPT.from_preset(7)
    with pytest.raises(
        FileNotFoundError, match=r"for the Hugging Face Hub repository of that name write 'hf://org/x'"
    ):
        GPT.from_preset("org/x")


# ------------------------------------------------------------------ checkpoint directories
@pytest.fixture(scope="module")
def minilm_reference():
    if not os.path.isdir(MINILM):
        pytest.skip(f"shared checkpoint {MINILM} absent")
    model = sentence_encoder(MINILM)
    inputs = ids(model.encoder.vocabulary_size)
    return inputs, np.asarray(model(inputs))


@needs_minilm
def test_directory_gives_the_checkpoint_with_its_tokenizer(minilm_reference):
    inputs, expected = minilm_reference
    model = SentenceEncoder.from_preset(MINILM)
    assert isinstance(model.tokenizer, WordPieceTokenizer)
    assert model.tokenizer.get_vocabulary() == pretrained_tokenizer(MINILM).get_vocabulary()
    np.testing.assert_array_equal(np.asarray(model(inputs)), expected)


def test_directory_of_the_wrong_family_or_class():
    with pytest.raises(
        ValueError, match=r"a 'bert' checkpoint does not build a GPT; load it with BertEncoder"
    ):
        GPT.from_preset(TINY_BERT)
    with pytest.raises(
        ValueError, match=r"a 'gpt2' checkpoint does not build a BertClassifier; .*GPT\.from_preset"
    ):
        BertClassifier.from_preset(TINY_GPT2, num_classes=2)
    with pytest.raises(
        ValueError, match=r"a 'bert' checkpoint does not build a Seq2Seq; load it with BertEncoder"
    ):
        Seq2Seq.from_preset(TINY_BERT)
    with pytest.raises(FileNotFoundError, match=r"does not exist"):
        GPT.from_preset("./no_such_checkpoint")


def test_base_class_dispatches_and_bert_classes_take_their_head(tmp_path):
    assert type(TransformerModel.from_preset(TINY_GPT2)) is GPT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the new head's weights are not in the checkpoint
        classifier = BertClassifier.from_preset(TINY_BERT, num_classes=2)
    assert isinstance(classifier.tokenizer, WordPieceTokenizer)
    save_pretrained(classifier, tmp_path / "classifier")  # the model's tokenizer is saved with it
    # The saved task is the classifier, yet BertEncoder.from_preset gives the encoder.
    assert type(from_pretrained(tmp_path / "classifier")) is BertClassifier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the classifier head is unused
        encoder = BertEncoder.from_preset(tmp_path / "classifier")
    assert type(encoder) is BertEncoder
    assert encoder.tokenizer.get_vocabulary() == classifier.tokenizer.get_vocabulary()
    np.testing.assert_array_equal(
        np.asarray(encoder(ids(99))["sequence_output"]),
        np.asarray(classifier.encoder(ids(99))["sequence_output"]),
    )


def test_from_pretrained_attaches_the_tokenizer_it_can_read(tmp_path):
    gpt_model = from_pretrained(TINY_GPT2)
    assert isinstance(gpt_model.tokenizer, BytePairTokenizer)
    assert gpt_model.tokenizer.get_vocabulary() == pretrained_tokenizer(TINY_GPT2).get_vocabulary()
    assert from_pretrained(TINY_LLAMA).tokenizer is None  # Llama's tokenizer is not implemented
    broken = tmp_path / "broken"
    shutil.copytree(TINY_BERT, broken)
    (broken / "vocab.txt").write_text("[PAD]\n" * 200)  # more ids than the model's 99, no [UNK]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = from_pretrained(broken)
    assert model.tokenizer is None
    assert any("the checkpoint's tokenizer was not attached" in str(w.message) for w in caught)


# ------------------------------------------------------------------ "hf://" hub names
@needs_minilm
def test_hub_name_resolves_offline_from_the_cache(tmp_path, monkeypatch, minilm_reference):
    inputs, expected = minilm_reference
    repo = hub_cache(tmp_path / "hub", "sentence-transformers/all-MiniLM-L6-v2", MINILM)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = SentenceEncoder.from_preset("hf://sentence-transformers/all-MiniLM-L6-v2")
    np.testing.assert_array_equal(np.asarray(model(inputs)), expected)
    assert isinstance(model.tokenizer, WordPieceTokenizer)
    assert os.path.islink(os.path.join(repo, "snapshots", COMMIT, "1_Pooling", "config.json"))
    with pytest.raises(FileNotFoundError) as error:
        SentenceEncoder.from_preset("hf://sentence-transformers/all-mpnet-base-v2")
    message = str(error.value)
    assert "'sentence-transformers/all-mpnet-base-v2' is not in the Hugging Face cache" in message
    assert str(tmp_path / "hub") in message and "HF_HUB_OFFLINE" in message
    assert isinstance(error.value, ValueError)


def test_hub_name_falls_back_to_the_cache_when_the_hub_is_unreachable(tmp_path, monkeypatch):
    import huggingface_hub.constants

    hub_cache(tmp_path / "hub", "org/tiny-gpt2", TINY_GPT2)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    model = from_pretrained("hf://org/tiny-gpt2")
    np.testing.assert_array_equal(model.get_weights()[0], from_pretrained(TINY_GPT2).get_weights()[0])
    assert isinstance(model.tokenizer, BytePairTokenizer)
    with pytest.raises(
        FileNotFoundError,
        match=r"'org/absent' is not in the Hugging Face cache .* the Hub could not be reached",
    ):
        GPT.from_preset("hf://org/absent")


def test_hub_names_checked_and_the_client_optional(monkeypatch):
    with pytest.raises(ValueError, match=r"`path` 'hf://org//x' is not a Hugging Face Hub name"):
        GPT.from_preset("hf://org//x")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(ImportError, match=r"pip install keras-tfm\[hub\]"):
        pretrained_tokenizer("hf://org/name")


def test_hub_name_online_asks_the_client_for_the_checkpoint_files(tmp_path, monkeypatch):
    """Online: one `snapshot_download` of the files a load reads, into HF_HUB_CACHE (the client
    faked: these machines have no network); a repository the Hub does not have is named."""
    import huggingface_hub
    from huggingface_hub.utils import RepositoryNotFoundError

    calls = []

    def snapshot_download(repo_id, **options):
        calls.append((repo_id, options))
        if repo_id == "org/private":
            error = RepositoryNotFoundError.__new__(RepositoryNotFoundError)
            error.args = ("404 Client Error: Repository Not Found",)
            raise error
        repo = os.path.join(options["cache_dir"], "models--" + repo_id.replace("/", "--"))
        if not os.path.isdir(repo):  # "downloaded" once
            hub_cache(options["cache_dir"], repo_id, TINY_GPT2)
        return os.path.join(repo, "snapshots", COMMIT)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    model = GPT.from_preset("hf://org/tiny-gpt2")
    assert isinstance(model.tokenizer, BytePairTokenizer)
    ((repo_id, options),) = calls
    assert repo_id == "org/tiny-gpt2" and options["local_files_only"] is False
    assert options["cache_dir"] == str(tmp_path / "hub")
    assert {"*.json", "*.safetensors", "*.txt"} <= set(options["allow_patterns"])
    with pytest.raises(
        FileNotFoundError, match=r"the Hugging Face Hub has no repository 'org/private' .* private or gated"
    ):
        GPT.from_preset("hf://org/private")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    GPT.from_preset("hf://org/tiny-gpt2")
    assert calls[-1][1]["local_files_only"] is True
