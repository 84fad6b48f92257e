"""`keras_tfm.models.from_pretrained` / `checkpoints.save_pretrained` / `sentence_encoder`.

Reference outputs come from HuggingFace `transformers` (PyTorch, CPU) and were
written once by tests/fixtures/pretrained/make_fixtures.py into small
committed fixtures (random-initialised tiny BERT and GPT-2 checkpoints); CI
only reads them. The MiniLM parity test reads ../shared/data/all-MiniLM-L6-v2.
"""

import json
import math
import os
import shutil
import warnings

import keras
import numpy as np
import pytest
from model_harness import tiny_bert_masked_lm, tiny_gpt

from keras_tfm.checkpoints import pretrained_tokenizer, save_pretrained
from keras_tfm.generation import generate
from keras_tfm.models import SentenceEncoder, from_pretrained, sentence_encoder

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained")
TINY_BERT = os.path.join(FIXTURES, "tiny_bert")  # BertForPreTraining
TINY_BERT_MLM = os.path.join(FIXTURES, "tiny_bert_mlm")  # BertForMaskedLM, no pooler
TINY_GPT2 = os.path.join(FIXTURES, "tiny_gpt2")  # GPT2LMHeadModel
TINY_GPT2_SHARDED = os.path.join(FIXTURES, "tiny_gpt2_sharded")
MINILM = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "all-MiniLM-L6-v2")
ATOL = 1e-4


def reference(directory):
    return dict(np.load(os.path.join(directory, "reference.npz")))


def bert_inputs(ref):
    return {key: ref[key] for key in ("token_ids", "segment_ids", "padding_mask")}


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def load(path, **kwargs):
    """from_pretrained + the warning messages it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = from_pretrained(path, **kwargs)
    return model, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def copy_checkpoint(source, destination, rename=None, config=None):
    """A copy of a fixture checkpoint with renamed tensors / changed config fields."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, destination)
    if rename:
        tensors = load_file(os.path.join(source, "model.safetensors"))
        save_file(
            {rename(k): v for k, v in tensors.items()},
            os.path.join(destination, "model.safetensors"),
            metadata={"format": "pt"},
        )
    if config:
        path = os.path.join(destination, "config.json")
        with open(path) as f:
            values = json.load(f)
        values.update(config)
        with open(path, "w") as f:
            json.dump(values, f)
    return str(destination)


@pytest.fixture(scope="module")
def tiny_gpt2():
    return from_pretrained(TINY_GPT2)


# ----------------------------------------------------------------------------- parity with transformers
def test_bert_for_pretraining_hidden_states_and_pooled_output():
    from keras_tfm.models import BertEncoder

    ref = reference(TINY_BERT)
    model, messages = load(TINY_BERT)
    assert isinstance(model, BertEncoder)
    out = model(bert_inputs(ref))
    assert max_diff(out["sequence_output"], ref["sequence_output"]) < ATOL
    assert max_diff(out["pooled_output"], ref["pooled_output"]) < ATOL
    # The MLM and next-sentence heads of BertForPreTraining are reported as unused.
    assert len(messages) == 1 and "not used" in messages[0]
    assert "cls.seq_relationship.weight" in messages[0] and "cls.predictions.bias" in messages[0]


@pytest.mark.parametrize("checkpoint", [TINY_BERT, TINY_BERT_MLM], ids=["pretraining", "masked_lm"])
def test_bert_masked_lm_logits(checkpoint):
    ref = reference(checkpoint)
    model, messages = load(checkpoint, task="masked_lm")
    assert max_diff(model(bert_inputs(ref)), ref["mlm_logits"]) < ATOL
    if checkpoint == TINY_BERT:  # the next-sentence head has no place in a masked LM
        assert len(messages) == 1 and "cls.seq_relationship.weight" in messages[0]
        assert "pooler" not in messages[0]  # an encoder part the head does not use: not reported
    else:
        assert messages == []


def test_bert_checkpoint_without_pooler_initialises_and_reports_it():
    ref = reference(TINY_BERT_MLM)
    model, messages = load(TINY_BERT_MLM)
    assert max_diff(model(bert_inputs(ref))["sequence_output"], ref["sequence_output"]) < ATOL
    missing = [m for m in messages if "keep their initial values" in m]
    assert len(missing) == 1 and "bert.pooler.dense.weight" in missing[0]


def test_bert_model_names_without_prefix(tmp_path):
    """A `BertModel` state dict (no "bert." prefix) loads the same weights."""
    ref = reference(TINY_BERT)
    path = copy_checkpoint(TINY_BERT, tmp_path / "bare", rename=lambda k: k.removeprefix("bert."))
    model, _ = load(path)
    assert max_diff(model(bert_inputs(ref))["sequence_output"], ref["sequence_output"]) < ATOL


def test_old_layer_norm_gamma_beta_names(tmp_path):
    ref = reference(TINY_BERT)
    path = copy_checkpoint(
        TINY_BERT,
        tmp_path / "old",
        rename=lambda k: k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ),
    )
    model, _ = load(path)
    assert max_diff(model(bert_inputs(ref))["sequence_output"], ref["sequence_output"]) < ATOL


@pytest.mark.parametrize("checkpoint", [TINY_GPT2, TINY_GPT2_SHARDED], ids=["single", "sharded"])
def test_gpt2_logits(checkpoint):
    ref = reference(TINY_GPT2)
    model, messages = load(checkpoint)
    assert messages == []
    assert max_diff(model(ref["token_ids"]), ref["logits"]) < ATOL


def test_gpt2_untied_head(tmp_path):
    """tie_word_embeddings=false: lm_head.weight (V, d) is its own matrix."""
    from safetensors.numpy import load_file, save_file

    ref = reference(TINY_GPT2)
    path = copy_checkpoint(TINY_GPT2, tmp_path / "untied", config={"tie_word_embeddings": False})
    tensors = load_file(os.path.join(TINY_GPT2, "model.safetensors"))
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].copy()
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    model, messages = load(path)
    assert messages == []
    assert max_diff(model(ref["token_ids"]), ref["logits"]) < ATOL


def test_gpt2_cached_generation_equals_full_recompute(tiny_gpt2):
    prompts = [[5, 17, 42, 9], [33, 2]]
    steps = 6
    tokens = generate(tiny_gpt2, prompts, steps)
    for row, prompt in zip(tokens, prompts):
        sequence = list(prompt)
        for _ in range(steps):
            logits = tiny_gpt2(np.array([sequence], np.int32))
            sequence.append(int(np.argmax(np.asarray(logits)[0, -1])))
        assert row.tolist() == sequence[len(prompt) :]


@pytest.mark.skipif(not os.path.isdir(MINILM), reason=f"all-MiniLM-L6-v2 not found at {MINILM}")
def test_minilm_parity():
    ref = dict(np.load(os.path.join(FIXTURES, "minilm_reference.npz")))
    model = sentence_encoder(MINILM)
    assert isinstance(model, SentenceEncoder)
    assert (model.pooling, model.normalize) == ("mean", True)  # from 1_Pooling/config.json, modules.json
    inputs = bert_inputs(ref)
    assert max_diff(model(inputs), ref["sentence_embedding"]) < ATOL
    out = model.encoder(inputs)
    assert max_diff(out["sequence_output"], ref["sequence_output"]) < ATOL
    assert max_diff(out["pooled_output"], ref["pooled_output"]) < ATOL


# ----------------------------------------------------------------------------- tasks and heads
def test_classifier_head_is_initialised_reported_and_trains():
    model, messages = load(TINY_BERT, task="classifier", num_classes=3, dropout=0.0)
    missing = [m for m in messages if "keep their initial values" in m]
    assert len(missing) == 1 and "classifier.weight" in missing[0] and "classifier.bias" in missing[0]
    ref = reference(TINY_BERT)
    assert model(bert_inputs(ref)).shape == (3, 3)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3), loss="sparse_categorical_crossentropy", jit_compile=False
    )
    history = model.fit(bert_inputs(ref), np.array([0, 1, 2]), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_token_classifier_and_sentence_embedding_heads():
    ref = reference(TINY_BERT)
    tagger, _ = load(TINY_BERT, task="token_classifier", num_classes=5)
    assert tagger(bert_inputs(ref)).shape == (3, 9, 5)
    encoder, _ = load(TINY_BERT, task="sentence_embedding")
    vectors = np.asarray(encoder(bert_inputs(ref)))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-5)
    # Mean pooling over real tokens only: the padded row equals its unpadded self.
    mask = ref["padding_mask"][1].astype(bool)
    h = np.asarray(from_pretrained(TINY_BERT)(bert_inputs(ref))["sequence_output"])[1][mask].mean(0)
    np.testing.assert_allclose(vectors[1], h / np.linalg.norm(h), atol=1e-5)


def test_sentence_pooling_follows_pooling_config(tmp_path):
    path = copy_checkpoint(TINY_BERT, tmp_path / "st")
    os.makedirs(os.path.join(path, "1_Pooling"))
    config = {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump([{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], f)
    model = sentence_encoder(path)
    assert (model.pooling, model.normalize) == ("cls", False)
    ref = reference(TINY_BERT)
    np.testing.assert_allclose(
        model(bert_inputs(ref)),
        from_pretrained(TINY_BERT)(bert_inputs(ref))["sequence_output"][:, 0],
        atol=1e-6,
    )
    config.update(pooling_mode_cls_token=False, pooling_mode_mean_sqrt_len_tokens=True)
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match=r"1_Pooling/config.json.*pooling_mode_mean_sqrt_len_tokens"):
        sentence_encoder(path)


def test_overrides_reach_the_builder():
    model = from_pretrained(TINY_GPT2, with_padding_mask=True, dropout=0.0)
    assert set(model.input) == {"token_ids", "padding_mask"}


# ----------------------------------------------------------------------------- save_pretrained
def _round_trip(model, path, inputs, **load_kwargs):
    save_pretrained(model, path)
    loaded = from_pretrained(path, **load_kwargs)
    assert type(loaded) is type(model)
    before, after = model(inputs), loaded(inputs)
    for a, b in zip(keras.tree.flatten(before), keras.tree.flatten(after)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return loaded


def test_round_trip_gpt2_writes_the_published_layout(tmp_path, tiny_gpt2):
    from safetensors import safe_open

    ref = reference(TINY_GPT2)
    _round_trip(tiny_gpt2, tmp_path / "gpt2", ref["token_ids"])
    with safe_open(os.path.join(tmp_path, "gpt2", "model.safetensors"), "numpy") as written:
        with safe_open(os.path.join(TINY_GPT2, "model.safetensors"), "numpy") as original:
            assert set(written.keys()) == set(original.keys())  # tied lm_head not stored
            for name in original.keys():
                np.testing.assert_array_equal(written.get_tensor(name), original.get_tensor(name))
    with open(os.path.join(tmp_path, "gpt2", "config.json")) as f:
        config = json.load(f)
    assert (
        config["model_type"] == "gpt2"
        and config["n_inner"] == 48
        and config["activation_function"] == "gelu_new"
    )


@pytest.mark.parametrize("task", [None, "masked_lm", "classifier", "token_classifier", "sentence_embedding"])
def test_round_trip_bert_tasks(tmp_path, task):
    ref = reference(TINY_BERT)
    kwargs = {"num_classes": 2} if task in ("classifier", "token_classifier") else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = from_pretrained(TINY_BERT, task=task, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # everything the model has is in its own checkpoint
        _round_trip(model, tmp_path / "bert", bert_inputs(ref))


def test_round_trip_mean_pooling_classifier_and_sharded_save(tmp_path):
    ref = reference(TINY_BERT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = from_pretrained(TINY_BERT, task="classifier", num_classes=2, pooling="mean")
    save_pretrained(model, tmp_path / "sharded", max_shard_size="30KB")
    files = sorted(os.listdir(tmp_path / "sharded"))
    shards = [f for f in files if f.startswith("model-00001-of-")]
    assert (
        "model.safetensors.index.json" in files and shards and shards[0] != "model-00001-of-00001.safetensors"
    )
    loaded = from_pretrained(tmp_path / "sharded")  # task and pooling come from config.json
    np.testing.assert_array_equal(model(bert_inputs(ref)), loaded(bert_inputs(ref)))


def test_save_is_atomic_and_never_overwrites_by_accident(tmp_path, tiny_gpt2):
    target = tmp_path / "ckpt"
    save_pretrained(tiny_gpt2, target)
    with pytest.raises(ValueError, match="already exists"):
        save_pretrained(tiny_gpt2, target)

    class Broken:
        def get_vocabulary(self):
            raise RuntimeError("disk full")

    before = sorted(os.listdir(target))
    with pytest.raises(RuntimeError, match="disk full"):
        save_pretrained(tiny_gpt2, target, tokenizer=Broken(), overwrite=True)
    assert sorted(os.listdir(target)) == before  # the old checkpoint is intact
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no temporary directory left behind
    save_pretrained(tiny_gpt2, target, overwrite=True)
    with pytest.raises(ValueError, match="cannot be saved as a GPT-2 checkpoint.*rope"):
        save_pretrained(tiny_gpt(vocabulary_size=50, max_length=16, position="rope"), tmp_path / "rope")


def test_loaded_model_saves_to_keras_file(tmp_path, tiny_gpt2):
    ref = reference(TINY_GPT2)
    path = str(tmp_path / "gpt2.keras")
    tiny_gpt2.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(restored(ref["token_ids"]), tiny_gpt2(ref["token_ids"]), atol=1e-6)
    encoder = sentence_encoder(TINY_BERT)
    encoder.save(str(tmp_path / "st.keras"))
    restored = keras.saving.load_model(str(tmp_path / "st.keras"))
    inputs = bert_inputs(reference(TINY_BERT))
    np.testing.assert_allclose(restored(inputs), encoder(inputs), atol=1e-6)


def test_tokenizers_are_saved_beside_the_weights(tmp_path, tiny_gpt2):
    texts = ["the quick brown fox jumps !", "a film that is not bad , 42"]
    bert_tokenizer = pretrained_tokenizer(TINY_BERT)
    assert type(bert_tokenizer).__name__ == "WordPieceTokenizer"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_pretrained(from_pretrained(TINY_BERT), tmp_path / "bert", tokenizer=bert_tokenizer)
    assert pretrained_tokenizer(tmp_path / "bert")(texts).to_list() == bert_tokenizer(texts).to_list()
    gpt_tokenizer = pretrained_tokenizer(TINY_GPT2)
    assert type(gpt_tokenizer).__name__ == "BytePairTokenizer"
    save_pretrained(tiny_gpt2, tmp_path / "gpt2", tokenizer=gpt_tokenizer)
    assert pretrained_tokenizer(tmp_path / "gpt2")(texts).to_list() == gpt_tokenizer(texts).to_list()


@pytest.fixture(scope="module")
def served_gpt2(tiny_gpt2, tmp_path_factory):
    """The loaded GPT-2's export (default signatures), loaded back; and its tokenizer."""
    import tensorflow as tf

    from keras_tfm.export import export_for_serving

    tokenizer = pretrained_tokenizer(TINY_GPT2)
    # The prompt below is 11 tokens: max_prompt_length 16 exports the prompt widths 8 and 16 only (the
    # default, the model's 32 positions, would also trace width 32 and a sliding-window loop per width).
    # 16 + 8 new tokens fit the 32 positions: no sliding-window loop.
    path = export_for_serving(
        tiny_gpt2,
        str(tmp_path_factory.mktemp("exports") / "gpt2"),
        tokenizer=tokenizer,
        max_new_tokens_limit=8,
        warmup=False,
        max_prompt_length=16,
    )
    return tf.saved_model.load(path), tokenizer


def test_loaded_gpt2_exports_and_serves(served_gpt2, tiny_gpt2):
    import tensorflow as tf

    served, tokenizer = served_gpt2
    ids = reference(TINY_GPT2)["token_ids"]
    logits = served.signatures["serving_default"](token_ids=tf.constant(ids))["logits"]
    np.testing.assert_allclose(logits, tiny_gpt2(ids), atol=1e-5)
    prompt = "the quick brown"
    out = served.signatures["generate"](
        prompts=tf.constant([prompt]),
        max_new_tokens=tf.constant(6),
        temperature=tf.constant(0.0),
        top_k=tf.constant(0),
        top_p=tf.constant(1.0),
        seed=tf.constant(0),
    )
    tokens = generate(tiny_gpt2, tokenizer([prompt]).to_list(), 6)
    assert out["completions"].numpy()[0] == tokenizer.detokenize(tokens).numpy()[0]


@pytest.mark.parametrize("signature", ["generate_ids", "generate"])
def test_served_prompt_longer_than_max_prompt_length_is_refused_clearly(served_gpt2, signature):
    """A prompt past `max_prompt_length` (16) fails with the served length check, ids and text alike
    (the padding to the prompt width ran before the checks: "Paddings must be non-negative")."""
    import tensorflow as tf

    served, _ = served_gpt2
    sampling = dict(max_new_tokens=2, temperature=0.0, top_k=0, top_p=1.0, seed=0)
    if signature == "generate_ids":
        prompt = dict(token_ids=tf.fill([2, 17], 5), lengths=tf.constant([17, 3]))
    else:
        prompt = dict(prompts=tf.constant(["a" * 17, "a"]))  # one token per "a"
    name = "token_ids" if signature == "generate_ids" else "prompts"
    message = rf"a prompt of `{name}` is longer than the maximum prompt length 16 tokens; longest:\] \[17\]"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        served.signatures[signature](**prompt, **{k: tf.constant(v) for k, v in sampling.items()})


def test_loaded_bert_classifier_serves_raw_strings_with_the_checkpoint_special_ids(tmp_path):
    """[CLS]/[SEP]/[PAD] are where the checkpoint's vocabulary has them (not keras_tfm's 2/3/0)."""
    import tensorflow as tf

    from keras_tfm.export import export_for_serving

    path = copy_checkpoint(TINY_BERT, tmp_path / "moved")
    with open(os.path.join(TINY_BERT, "vocab.txt")) as f:
        tokens = [t for t in f.read().split("\n") if t]
    tokens = tokens[5:40] + tokens[:5] + tokens[40:]  # [PAD]=35, [UNK]=36, [CLS]=37, [SEP]=38, [MASK]=39
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(tokens) + "\n")
    tokenizer = pretrained_tokenizer(path)
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id) == (37, 38, 35)
    model, _ = load(path, task="classifier", num_classes=2)
    texts = ["the quick brown fox", "a funny film , not bad at all !"]
    export = export_for_serving(model, str(tmp_path / "clf"), tokenizer=tokenizer, warmup=False)
    served = tf.saved_model.load(export).signatures["classify"](inputs=tf.constant(texts))
    ids = tokenizer(texts)
    inputs = {
        "token_ids": ids.to_tensor(default_value=tokenizer.pad_id),
        "segment_ids": tf.zeros_like(ids).to_tensor(),
        "padding_mask": tf.ones_like(ids).to_tensor(),
    }
    expected = tf.nn.softmax(model(inputs)).numpy()
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)


# ----------------------------------------------------------------------------- bad input
def test_vocabulary_without_unk(tmp_path):
    path = copy_checkpoint(TINY_BERT, tmp_path / "nounk")
    with open(os.path.join(TINY_BERT, "vocab.txt")) as f:
        tokens = [t for t in f.read().split("\n") if t and t != "[UNK]"]
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(tokens) + "\n")
    with pytest.raises(ValueError, match=r"vocab\.txt.*unk_token.*\[UNK\].*not in the vocabulary"):
        pretrained_tokenizer(path)


def test_missing_directory_and_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        from_pretrained(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"config\.json: no such file"):
        from_pretrained(empty)
    path = copy_checkpoint(TINY_BERT, tmp_path / "noweights")
    os.remove(os.path.join(path, "model.safetensors"))
    with pytest.raises(ValueError, match=r"model\.safetensors: no such file"):
        from_pretrained(path)
    with pytest.raises(FileNotFoundError):  # also a FileNotFoundError
        from_pretrained(path)


def test_unsupported_model_type(tmp_path):
    path = copy_checkpoint(TINY_BERT, tmp_path / "xlnet", config={"model_type": "xlnet"})
    with pytest.raises(ValueError, match=r"config\.json: field 'model_type' = 'xlnet'.*'bert'.*'gpt2'.*'t5'"):
        from_pretrained(path)


def test_unknown_task():
    with pytest.raises(ValueError, match=r"Unknown `task` 'classifier' for a 'gpt2' checkpoint"):
        from_pretrained(TINY_GPT2, task="classifier")


def test_truncated_safetensors(tmp_path):
    path = copy_checkpoint(TINY_BERT, tmp_path / "truncated")
    weights = os.path.join(path, "model.safetensors")
    with open(weights, "r+b") as f:
        f.truncate(os.path.getsize(weights) // 2)
    with pytest.raises(ValueError, match=r"model\.safetensors: not a valid safetensors file.*truncated"):
        from_pretrained(path)


def test_sharded_index_naming_a_missing_shard(tmp_path):
    path = copy_checkpoint(TINY_GPT2_SHARDED, tmp_path / "shards")
    os.remove(os.path.join(path, "model-00003-of-00005.safetensors"))
    with pytest.raises(ValueError, match=r"model-00003-of-00005\.safetensors: no such file"):
        from_pretrained(path)


def test_sizes_disagreeing_with_config(tmp_path):
    path = copy_checkpoint(TINY_BERT, tmp_path / "sizes", config={"vocab_size": 120})
    with pytest.raises(ValueError) as error:
        from_pretrained(path)
    message = str(error.value)
    assert "bert.embeddings.word_embeddings.weight" in message
    assert "(99, 32)" in message and "(120, 32)" in message and "vocab_size=120" in message
    path = copy_checkpoint(TINY_GPT2, tmp_path / "inner", config={"n_inner": 64})
    with pytest.raises(ValueError, match=r"mlp\.c_fc\.weight.*\(32, 48\).*\(32, 64\).*n_inner=64"):
        from_pretrained(path)


def test_config_fields_of_the_wrong_type(tmp_path):
    path = copy_checkpoint(TINY_BERT, tmp_path / "types", config={"hidden_size": "32"})
    with pytest.raises(
        ValueError, match=r"config\.json: field 'hidden_size' = '32': expected a positive integer"
    ):
        from_pretrained(path)
    path = copy_checkpoint(TINY_BERT, tmp_path / "act", config={"hidden_act": "mish"})
    with pytest.raises(ValueError, match=r"field 'hidden_act' = 'mish'"):
        from_pretrained(path)


def test_missing_encoder_weight_is_an_error(tmp_path):
    from safetensors.numpy import load_file, save_file

    path = copy_checkpoint(TINY_BERT, tmp_path / "partial")
    tensors = load_file(os.path.join(TINY_BERT, "model.safetensors"))
    del tensors["bert.encoder.layer.1.output.dense.weight"]
    save_file(tensors, os.path.join(path, "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing 1 weight.*bert\.encoder\.layer\.1\.output\.dense\.weight"):
        from_pretrained(path)


def test_sentence_encoder_exports_an_embed_signature(tmp_path):
    import tensorflow as tf

    from keras_tfm.data import embed_texts
    from keras_tfm.export import export_for_serving

    model = sentence_encoder(TINY_BERT)
    tokenizer = pretrained_tokenizer(TINY_BERT)
    texts = ["the quick brown fox", "a funny film , not bad at all !"]
    path = export_for_serving(model, str(tmp_path / "st"), tokenizer=tokenizer, warmup=False)
    served = tf.saved_model.load(path).signatures["embed"](inputs=tf.constant(texts))
    np.testing.assert_allclose(served["embeddings"].numpy(), embed_texts(model, tokenizer, texts), atol=1e-5)
    assert served["truncated"].numpy().tolist() == [False, False]


TINY_LLAMA = os.path.join(FIXTURES, "tiny_llama")  # LlamaForCausalLM, 4 heads / 2 kv heads, untied
TINY_LLAMA_TIED = os.path.join(FIXTURES, "tiny_llama_tied")  # 1 kv head, tied lm_head


@pytest.mark.parametrize("checkpoint, kv_heads", [(TINY_LLAMA, 2), (TINY_LLAMA_TIED, 1)])
def test_llama_logits(checkpoint, kv_heads, tmp_path):
    """A random LlamaForCausalLM: GQA, RMSNorm, SwiGLU, rotate_half RoPE with
    rope_theta 20000, rms_norm_eps 1e-6; logits to 1e-4, and save_pretrained
    writes the same layout back."""
    ref = reference(checkpoint)
    model, messages = load(checkpoint)
    assert messages == []
    block = model.blocks[0]
    assert block.num_key_value_heads == kv_heads and block.norm == "rms" and block.activation == "swiglu"
    assert (model.head is None) == (checkpoint == TINY_LLAMA_TIED)
    assert max_diff(model(ref["token_ids"]), ref["logits"]) < ATOL
    assert max_diff(model.final_norm(_last_hidden(model, ref["token_ids"])), ref["hidden_states"]) < ATOL
    saved = save_pretrained(model, str(tmp_path / "saved"))
    again, messages = load(saved)
    assert messages == [] and max_diff(again(ref["token_ids"]), ref["logits"]) < ATOL


def _last_hidden(model, ids):
    x = model.embed(ids)
    for block in model.blocks:
        x = block(x)
    return x


# ----------------------------------------------------------------------------- BERT mapping, name by name
def _np_bert_inputs(batch, length, pad, vocab=64):
    rng = np.random.default_rng(0)
    ids = np.concatenate([rng.integers(1, vocab, (batch, length)), np.zeros((batch, pad))], 1).astype("int32")
    segments = (np.arange(length + pad) >= length // 2).astype("int32")[None].repeat(batch, 0)
    mask = (np.arange(length + pad) < length).astype("int32")[None].repeat(batch, 0)
    return {"token_ids": ids, "segment_ids": segments * mask, "padding_mask": mask}


def _np_layer_norm(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _np_gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _np_bert(w, inputs, num_layers, num_heads):
    """Reference BERT forward pass from HuggingFace-named weights (NumPy)."""
    ids, seg, mask = inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]
    B, T = ids.shape

    def lin(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:T]
        + w["embeddings.token_type_embeddings.weight"][seg]
    )
    x = _np_layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    H = x.shape[-1]
    hd = H // num_heads
    bias = (1.0 - mask)[:, None, None, :] * -1e9
    for i in range(num_layers):
        p = f"encoder.layer.{i}."

        def heads(t):
            return t.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

        q, k, v = (heads(lin(x, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
        x = _np_layer_norm(
            x + lin(ctx, p + "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        f = lin(_np_gelu(lin(x, p + "intermediate.dense")), p + "output.dense")
        x = _np_layer_norm(x + f, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    pooled = np.tanh(lin(x[:, 0], "pooler.dense"))
    return x, pooled


def _random_hf_weights(entries, seed=0):
    rng = np.random.default_rng(seed)
    return {
        e.name: (
            (1.0 if e.name.endswith("LayerNorm.weight") else 0.0) + 0.2 * rng.standard_normal(e.shape)
        ).astype("float32")
        for e in entries
    }


def test_bert_mapping_matches_a_numpy_bert_on_huggingface_names():
    """Random weights under HuggingFace's BertForMaskedLM names, loaded through
    the converter's mapping, give the outputs of a NumPy BERT written from the
    same names: every name lands on the right variable in the right layout."""
    from keras_tfm.checkpoints import bert as bert_checkpoint
    from keras_tfm.checkpoints import weight_mapping as wm

    mlm = tiny_bert_masked_lm(seed=None)
    encoder = mlm.encoder
    entries = bert_checkpoint.entries(mlm)
    weights = _random_hf_weights(entries)
    pairs, missing = wm.collect(entries, weights, {}, {}, "config.json")
    assert missing == []
    wm.assign(pairs)
    inputs = _np_bert_inputs(2, 7, pad=2)
    ref_seq, ref_pooled = _np_bert(weights, inputs, num_layers=2, num_heads=2)
    out = encoder(inputs)
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(out["sequence_output"])[real], ref_seq[real], atol=2e-4)
    np.testing.assert_allclose(out["pooled_output"], ref_pooled, atol=2e-4)
    # MLM head: LN(gelu(h W_t + b_t)) E_tokᵀ + b.
    t = _np_layer_norm(
        _np_gelu(
            ref_seq @ weights["cls.predictions.transform.dense.weight"].T
            + weights["cls.predictions.transform.dense.bias"]
        ),
        weights["cls.predictions.transform.LayerNorm.weight"],
        weights["cls.predictions.transform.LayerNorm.bias"],
    )
    ref_logits = t @ weights["embeddings.word_embeddings.weight"].T + weights["cls.predictions.bias"]
    np.testing.assert_allclose(np.asarray(mlm(inputs))[real], ref_logits[real], atol=5e-4)
    # Saving writes the same arrays back under the same names.
    saved = wm.to_tensors(entries)
    assert sorted(saved) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_allclose(saved[name], value, atol=1e-6, err_msg=name)
    with pytest.raises(ValueError, match="pooler.dense.weight.*shape"):
        wm.collect(entries, {**weights, "pooler.dense.weight": np.zeros((3, 3), "float32")}, {}, {}, "c")
    with pytest.raises(ValueError, match="missing 1 weight.*attention.output.dense.bias"):
        wm.collect(
            entries,
            {k: v for k, v in weights.items() if k != "encoder.layer.1.attention.output.dense.bias"},
            {},
            {},
            "c",
        )


def test_bert_base_mapping_covers_every_weight_once():
    """The HuggingFace names of bert_base fill every variable exactly once; their
    shapes add up to the published 109,482,240 parameters."""
    from keras_tfm.checkpoints import bert as bert_checkpoint
    from keras_tfm.models import bert_encoder

    bert = bert_encoder("bert_base", kernel_initializer="zeros", embeddings_initializer="zeros")
    entries = bert_checkpoint.entries(bert)
    variables = [v for e in entries for v in e.variables]
    assert len(entries) == len(variables) == len(bert.weights) == 5 + 16 * 12 + 2
    assert {id(v) for v in variables} == {id(v) for v in bert.weights}
    assert sum(int(np.prod(e.shape)) for e in entries) == bert.count_params() == 109_482_240
    assert "encoder.layer.11.attention.self.query.weight" in {e.name for e in entries}
    for e in entries:
        converted = e.to_model(np.zeros(e.shape, "float32"))
        assert [tuple(a.shape) for a in converted] == [tuple(v.shape) for v in e.variables], e.name
