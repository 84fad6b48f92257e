"""Mistral and Qwen2 checkpoints (issue 35): logits, generation, tokenizers, save_pretrained, serving.

References: tests/fixtures/pretrained/tiny_mistral and tiny_qwen2, random-init models written by
make_family_fixtures.py with HuggingFace transformers 5.24 (reference.npz: logits, a left-padded
batch, greedy and beam-4 tokens and scores of `generate`; reference.json: the settings of every
run and the tokenizer's ids). Mistral's sliding window is 8 and every input is longer; Qwen2's
config carries `sliding_window: 8` with `use_sliding_window: false` (to be ignored).
HuggingFace's beam search (`generation/beam_hf.py`) is also checked on a seq2seq model, against
a plain-Python transcription of HuggingFace's algorithm over full forward passes.
"""

import json
import os
import shutil
import warnings

import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_seq2seq
from serving_client_runner import run_serving_client

from keras_tfm.checkpoints import save_pretrained
from keras_tfm.export import export_for_serving
from keras_tfm.export.trusted_ops import untrusted_ops
from keras_tfm.generation import Generator
from keras_tfm.layers.attention.dot_product import key_length_bound
from keras_tfm.models import GPT, from_pretrained
from keras_tfm.tokenizers import text as text_lib

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained")
FAMILIES = ("mistral", "qwen2")
ATOL = 1e-4


def fixture_dir(family):
    return os.path.join(FIXTURES, f"tiny_{family}")


def read_reference(family):
    directory = fixture_dir(family)
    with open(os.path.join(directory, "reference.json"), encoding="utf-8") as f:
        return dict(np.load(os.path.join(directory, "reference.npz"))), json.load(f)


def load_quietly(path, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = GPT.from_preset(path, **options)
    return model, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def prompts_of(arrays):
    """The generation prompts without their left padding."""
    return [
        list(row[mask.astype(bool)])
        for row, mask in zip(arrays["gen_input_ids"], arrays["gen_attention_mask"])
    ]


@pytest.fixture(scope="module")
def loaded():
    """{family: (model, arrays, reference json, generator)}; one graph-mode generator per model
    (its loops trace fast; the XLA path is checked once, in `test_beam_search_of_a_checkpoint_is_hf`)."""
    out = {}
    for family in FAMILIES:
        model, messages = load_quietly(fixture_dir(family))
        assert messages == []
        arrays, ref = read_reference(family)
        pad = ref["special_ids"]["pad_token_id"]
        out[family] = (model, arrays, ref, Generator(model, pad_id=pad, jit_compile=False))
    return out


# ----------------------------------------------------------------------------- logits
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_equal_hf(loaded, family):
    model, arrays, _, _ = loaded[family]
    assert np.abs(model.predict(arrays["input_ids"], verbose=0) - arrays["logits"]).max() < ATOL
    # Left-padded batch: the padding mask over the slots (HF: attention_mask, position ids cumsum - 1).
    ids, mask = arrays["padded_input_ids"], arrays["padded_attention_mask"]
    logits, _ = model.call_with_cache(
        ids,
        model.init_caches(*ids.shape),
        0,
        padding_mask=mask.astype(bool),
        positions=arrays["padded_position_ids"],
    )
    real = mask.astype(bool)
    assert np.abs(np.asarray(logits)[real] - arrays["padded_logits"][real]).max() < ATOL


def test_layouts_and_windows(loaded):
    mistral, qwen2 = loaded["mistral"][0], loaded["qwen2"][0]
    assert [b.sliding_window for b in mistral.blocks] == [8, 8]
    assert mistral.blocks[0].num_key_value_heads == 2 and mistral.head is not None
    assert [b.sliding_window for b in qwen2.blocks] == [None, None]  # use_sliding_window: false
    attention = qwen2.blocks[0].self_attention_layer
    assert attention.query_dense.bias is not None and attention.output_dense.bias is None
    assert qwen2.head is None and qwen2.blocks[0].rope_max_wavelength == 1e6
    # The window is what makes Mistral's logits: without it (or one key wider) they differ.
    arrays = loaded["mistral"][1]
    for window in (None, 9):
        other, _ = load_quietly(fixture_dir("mistral"), sliding_window=window)
        assert np.abs(other.predict(arrays["input_ids"], verbose=0) - arrays["logits"]).max() > 0.1


def test_cached_steps_apply_the_window(loaded):
    """One token at a time through the cache (slots past the window masked) = the full pass."""
    model, arrays, _, _ = loaded["mistral"]
    ids = arrays["input_ids"]
    caches = model.init_caches(ids.shape[0], ids.shape[1])
    steps = []
    for t in range(ids.shape[1]):
        logits, caches = model.call_with_cache(ids[:, t : t + 1], caches, t)
        steps.append(np.asarray(logits)[:, 0])
    assert np.abs(np.stack(steps, 1) - arrays["logits"]).max() < ATOL


# ----------------------------------------------------------------------------- generation
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("run", ["greedy", "beam4_lp0.8", "beam4_lp1.5", "beam4_lp1.5_early"])
def test_generation_equals_hf(loaded, family, run):
    model, arrays, ref, generator = loaded[family]
    settings = next(r for r in ref["runs"] if r["name"] == run)["settings"]
    prompts, width = prompts_of(arrays), arrays["gen_input_ids"].shape[1]
    expected = arrays[f"{run}_tokens"]
    eos, new = settings["eos_token_id"], settings["max_new_tokens"]
    if settings["num_beams"] == 1:
        tokens = generator.generate(prompts, new, eos_id=eos)
        assert np.array_equal(tokens[:, : expected.shape[1] - width], expected[:, width:])
        return
    sequences, scores, _ = generator.beam_search(
        prompts,
        new,
        num_beams=4,
        length_penalty=settings["length_penalty"],
        early_stopping=settings["early_stopping"],
        eos_id=eos,
    )
    length = expected.shape[2] - width  # HF crops to the longest hypothesis; the rest is padding
    assert np.array_equal(sequences[:, :, :length], expected[:, :, width:])
    assert (sequences[:, :, length:] == settings["pad_token_id"]).all()
    np.testing.assert_allclose(scores, arrays[f"{run}_scores"], atol=1e-5)


def hf_texts(model, arrays, run):
    """HF's completions of `run` as text: each prompt's new tokens (best beam) up to its EOS."""
    width, eos = arrays["gen_input_ids"].shape[1], model.generation_defaults["eos_id"]
    tokens = arrays[f"{run}_tokens"]
    rows = [list(row[width:]) for row in (tokens if tokens.ndim == 2 else tokens[:, 0])]
    return text_lib.decode(model.tokenizer, [row[: row.index(eos)] if eos in row else row for row in rows])


def test_text_in_text_out_is_hf(loaded):
    """`model.generate` / `model.beam_search` on text (XLA-compiled, the checkpoint's EOS and
    HuggingFace's beam search from `generation_defaults`) give HF's completions."""
    model, arrays, ref, _ = loaded["mistral"]
    assert model.generation_defaults == {
        "length_penalty_style": "hf",
        "length_penalty": 1.0,
        "early_stopping": False,
        "eos_id": 2,
    }
    prompts = ref["generation_inputs"]["prompts"]
    completions = model.generate(prompts, 10, completion_only=True)
    assert completions == hf_texts(model, arrays, "greedy")
    # Without `completion_only`: the prompts' text and the completions (the same compiled loop).
    whole = model.generate(prompts, 10)
    assert whole == [
        text_lib.decode(model.tokenizer, [ids])[0] + c for ids, c in zip(prompts_of(arrays), completions)
    ]
    assert whole[0].startswith(prompts[0]) and len(whole[0]) > len(prompts[0])
    beams = model.beam_search(prompts, 10, num_beams=4, length_penalty=0.8, completion_only=True)
    assert beams == hf_texts(model, arrays, "beam4_lp0.8")


def hf_beam_reference(next_log_probs, k, max_new, alpha, early_stopping, eos):
    """HuggingFace's `_beam_search` for one item, transcribed plainly (floats, lists).

    `next_log_probs(prefixes)` → (len(prefixes), V) log-probs of the next token. Returns the pool,
    best first: [(score, tokens)].
    """
    running, pool, improvable = [([], 0.0)] + [([], -1e9)] * (k - 1), [], True
    for i in range(max_new):
        log_probs = next_log_probs([tokens for tokens, _ in running])
        flat = [
            (score + lp, b, v) for b, (_, score) in enumerate(running) for v, lp in enumerate(log_probs[b])
        ]
        candidates = sorted(flat, key=lambda c: -c[0])[: 2 * k]
        full = len(pool) == k and early_stopping is True
        next_running = []
        for rank, (score, b, v) in enumerate(candidates):
            tokens = running[b][0] + [v]
            if v == eos or i + 1 == max_new:
                if rank < k and improvable and not full:
                    pool.append((score / (i + 1) ** alpha, tokens))
            elif len(next_running) < k:
                next_running.append((tokens, score))
        pool, running = sorted(pool, key=lambda p: -p[0])[:k], next_running
        if len(pool) == k and running:
            length = max_new if early_stopping == "never" and alpha > 0 else i + 1
            improvable = improvable and running[0][1] / length**alpha > pool[-1][0]
        if not improvable or (early_stopping is True and len(pool) == k):
            break
    return pool


def test_hf_beam_reference_is_hf(loaded):
    """The transcription above gives HF's fixture beams (so it can check the seq2seq search)."""
    model, arrays, _, _ = loaded["qwen2"]
    width = arrays["gen_input_ids"].shape[1]
    forward = traced(lambda ids: model(ids, training=False), 1)
    for b, prompt in enumerate(prompts_of(arrays)):

        def next_log_probs(prefixes, prompt=prompt):
            logits = forward(np.array([prompt + t for t in prefixes], np.int32))[:, -1]
            return tf.nn.log_softmax(tf.cast(logits, tf.float64)).numpy()

        pool = hf_beam_reference(next_log_probs, 4, 10, 1.5, True, 400)
        expected = arrays["beam4_lp1.5_early_tokens"][b, :, width:]
        for (score, tokens), row, want in zip(pool, expected, arrays["beam4_lp1.5_early_scores"][b]):
            assert list(row[: len(tokens)]) == tokens and abs(score - want) < 1e-5


def traced(fn, inputs):
    """`fn` as one graph function over int32 `(None, None)` inputs (a trace per shape would be slow;
    the short keys spare "auto" attention its long-input branch)."""

    def bounded(*args):
        with key_length_bound(64):
            return fn(*args)

    return tf.function(bounded, input_signature=[tf.TensorSpec([None, None], tf.int32)] * inputs)


def test_hf_beam_search_of_an_encoder_decoder():
    """The HF loop through a seq2seq model's context (cross-attention caches tiled to the beams),
    with `early_stopping="never"` (the checkpoints' runs have True and False)."""
    model, early_stopping = tiny_seq2seq(seed=3), "never"
    generator = Generator(model, run_eagerly=True)
    forward = traced(lambda e, d: model({"encoder_token_ids": e, "decoder_token_ids": d}, training=False), 2)
    sources = [[5, 9, 12, 7], [20, 4, 4, 11, 30, 2]]
    bos, k, new, alpha = 1, 4, 6, 0.7
    probe = model({"encoder_token_ids": np.array([sources[0]]), "decoder_token_ids": np.array([[bos]])})
    eos = int(np.argmax(probe[0, -1]))  # the first step's best token ends a hypothesis there
    sequences, scores, lengths = generator.beam_search(
        sources, new, num_beams=k, length_penalty=alpha, bos_id=bos, eos_id=eos,
        length_penalty_style="hf", early_stopping=early_stopping,
    )  # fmt: skip
    for b, source in enumerate(sources):

        def next_log_probs(prefixes, source=source):
            decoder = np.array([[bos] + t for t in prefixes], np.int32)
            encoder = np.array([source] * len(prefixes), np.int32)
            logits = forward(encoder, decoder)
            return tf.nn.log_softmax(tf.cast(logits[:, -1], tf.float64)).numpy()

        pool = hf_beam_reference(next_log_probs, k, new, alpha, early_stopping, eos)
        assert [list(sequences[b, j, : lengths[b, j]]) for j in range(k)] == [t for _, t in pool]
        np.testing.assert_allclose(scores[b], [s for s, _ in pool], atol=1e-5)
    assert len(set(lengths.ravel().tolist())) > 1  # EOS ended some hypotheses early


def test_beam_options_are_checked(loaded):
    generator = loaded["mistral"][3]
    with pytest.raises(ValueError, match="length_penalty_style"):
        generator.beam_search([[5, 6]], 3, length_penalty_style="google")
    with pytest.raises(ValueError, match="early_stopping"):
        generator.beam_search([[5, 6]], 3, early_stopping="sometimes")
    with pytest.raises(TypeError, match="early_stopping.*length_penalty_style='hf'"):
        generator.beam_search([[5, 6]], 3, early_stopping=True, length_penalty_style="gnmt")


# ----------------------------------------------------------------------------- tokenizers
@pytest.mark.parametrize(
    "family, kind", [("mistral", "SentencePieceBPETokenizer"), ("qwen2", "Qwen2BPETokenizer")]
)
def test_tokenizer_is_attached_with_hf_ids(loaded, family, kind):
    model, _, ref, _ = loaded[family]
    tokenization = ref["tokenization"]
    assert type(model.tokenizer).__name__ == kind
    assert model.tokenizer.tokenize(tokenization["sentences"]).to_list() == tokenization["transformers_ids"]


def edited_copy(source, destination, config=None, tokenizer_json=None, remove=()):
    shutil.copytree(source, destination)
    for name, edit in (("config.json", config), ("tokenizer.json", tokenizer_json)):
        if edit is not None:
            path = os.path.join(destination, name)
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            edit(data)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f)
    for name in remove:
        os.remove(os.path.join(destination, name))
    return str(destination)


def as_llama(config):
    config.update(model_type="llama", architectures=["LlamaForCausalLM"])
    del config["sliding_window"]


def test_llama_checkpoint_attaches_its_sentencepiece_tokenizer(loaded, tmp_path):
    """A Llama checkpoint (Mistral's weights without the window) with Mistral's tokenizer files."""
    path = edited_copy(fixture_dir("mistral"), tmp_path / "llama", config=as_llama)
    model, messages = load_quietly(path)
    assert messages == [] and model.blocks[0].sliding_window is None
    tokenization = loaded["mistral"][2]["tokenization"]
    assert type(model.tokenizer).__name__ == "SentencePieceBPETokenizer"
    assert model.tokenizer.tokenize(tokenization["sentences"]).to_list() == tokenization["transformers_ids"]


def test_unreadable_tokenizers_are_refused_by_name(loaded, tmp_path):
    """Never a tokenizer read differently from HF: a warning naming the file / field, no tokenizer.
    A lone SentencePiece BPE tokenizer.model is read (test_tokenizers_sentencepiece_model.py); a
    Unigram one in its place is refused."""
    lone = edited_copy(fixture_dir("mistral"), tmp_path / "lone", config=as_llama, remove=("tokenizer.json",))
    model, messages = load_quietly(lone)
    tokenization = loaded["mistral"][2]["tokenization"]
    assert messages == [] and type(model.tokenizer).__name__ == "SentencePieceModelBPETokenizer"
    assert model.tokenizer.tokenize(tokenization["sentences"]).to_list() == tokenization["transformers_ids"]
    unigram = os.path.join(FIXTURES, "tiny_t5_v11", "spiece.model")
    shutil.copy(unigram, os.path.join(lone, "tokenizer.model"))
    model, messages = load_quietly(lone)
    assert model.tokenizer is None and len(messages) == 1
    assert "tokenizer.model: `trainer_spec.model_type` is 'UNIGRAM'" in messages[0]

    def whitespace(data):
        data["pre_tokenizer"] = {"type": "Whitespace"}

    def word_level(data):
        data["model"]["type"] = "WordLevel"

    cases = [
        ("qwen2", whitespace, "`pre_tokenizer` {'type': 'Whitespace'} is not implemented"),
        ("mistral", word_level, "`model.type` 'WordLevel' is not implemented"),
    ]
    for family, edit, message in cases:
        odd = edited_copy(fixture_dir(family), tmp_path / family, tokenizer_json=edit)
        model, messages = load_quietly(odd)
        assert model.tokenizer is None and len(messages) == 1
        assert "tokenizer.json" in messages[0] and message in messages[0]


# ----------------------------------------------------------------------------- save_pretrained
@pytest.mark.parametrize("family", FAMILIES)
def test_save_pretrained_round_trip(loaded, family, tmp_path):
    model, arrays, ref, _ = loaded[family]
    saved = save_pretrained(model, tmp_path / "saved")
    with open(os.path.join(saved, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(fixture_dir(family), "tokenizer.json"), encoding="utf-8") as f:
        source_json = json.load(f)
    with open(os.path.join(saved, "tokenizer.json"), encoding="utf-8") as f:
        saved_json = json.load(f)
    assert saved_json == source_json  # the tokenizer.json writer gives the file back, part for part
    assert config["model_type"] == family
    if family == "mistral":
        assert config["sliding_window"] == 8 and config["eos_token_id"] == 2
    else:
        assert config["use_sliding_window"] is False and config["eos_token_id"] == 400
    again = from_pretrained(saved)
    assert np.array_equal(
        again.predict(arrays["input_ids"], verbose=0), model.predict(arrays["input_ids"], verbose=0)
    )
    tokenization = ref["tokenization"]
    assert again.tokenizer.tokenize(tokenization["sentences"]).to_list() == tokenization["transformers_ids"]


def rope_parameters_yarn(config):
    config["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}


def rope_scaling_linear(config):  # a transformers 4 config: rope_theta at the top, rope_scaling
    del config["rope_parameters"]
    config.update(rope_theta=1e4, rope_scaling={"type": "linear", "factor": 2.0})


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(model_type="mixtral"), r"field 'model_type' = 'mixtral' is not supported"),
        (rope_parameters_yarn, r"field 'rope_parameters' = \{'rope_type': 'yarn'.*only the default rotary"),
        (rope_scaling_linear, r"field 'rope_scaling' = \{'type': 'linear'.*only the default rotary"),
    ],
    ids=["model_type", "rope_parameters", "rope_scaling"],
)
def test_unsupported_configs_refused_by_name(tmp_path, edit, message):
    path = edited_copy(fixture_dir("mistral"), tmp_path / "edited", config=edit)
    with pytest.raises(ValueError, match=r"config\.json: " + message):
        from_pretrained(path)


def test_configs_and_layouts_refused_by_name(tmp_path):
    def qwen2_window(config):
        config["use_sliding_window"] = True

    path = edited_copy(fixture_dir("qwen2"), tmp_path / "window", config=qwen2_window)
    with pytest.raises(ValueError, match=r"config\.json: field 'use_sliding_window' = True: only false"):
        from_pretrained(path)

    def mixed_layers(config):
        config["layer_types"] = ["sliding_attention", "full_attention"]

    path = edited_copy(fixture_dir("mistral"), tmp_path / "layers", config=mixed_layers)
    with pytest.raises(ValueError, match=r"field 'layer_types'.*only 'sliding_attention'"):
        from_pretrained(path)
    sizes = dict(vocabulary_size=16, max_length=8, num_layers=1, num_heads=2, d_model=8)
    with pytest.raises(ValueError, match=r"Unknown `attention_bias` 1"):
        GPT(**sizes, attention_bias=1)
    with pytest.raises(ValueError, match=r"`sliding_window`"):
        GPT(**sizes, sliding_window=0)
    both = GPT(
        **sizes,
        position="rope",
        norm="rms",
        activation="swiglu",
        use_bias=False,
        attention_bias="qkv",
        sliding_window=4,
    )
    with pytest.raises(ValueError, match=r"cannot be saved as a Qwen2 checkpoint: it has sliding_window=4"):
        save_pretrained(both, tmp_path / "both")


# ----------------------------------------------------------------------------- serving
def test_export_serves_hf_completions(loaded, tmp_path):
    """A Mistral export (one beam loop, no XLA: the cheapest that runs the served window, EOS and
    HF beam search) through the TF2 and TF1-session loaders of tests/serving_client.py (keras and
    keras_tfm blocked): `num_beams` 1 gives HF's greedy completions, 4 HF's best beams."""
    model, arrays, ref, _ = loaded["mistral"]
    prompts = ref["generation_inputs"]["prompts"]
    path = export_for_serving(
        model, tmp_path / "mistral", max_new_tokens_limit=10, max_prompt_length=arrays["gen_input_ids"].shape[1],
        max_beams=4, warmup=False, jit_compile=False, signatures=("beam_search",),
    )  # fmt: skip
    calls = [
        {"signature": "beam_search", "inputs": dict(prompts=prompts, max_new_tokens=10, num_beams=beams,
                                                    length_penalty=0.8)}
        for beams in (1, 4)
    ]  # fmt: skip
    assert untrusted_ops(path) == {}  # `keras-tfm generate` loads it (`trusted_ops`)
    result = run_serving_client({"models": [{"path": path, "calls": calls, "bad": []}]}, tmp_path)
    assert result["blocked_modules_loaded"] == []
    expected = [hf_texts(model, arrays, "greedy"), hf_texts(model, arrays, "beam4_lp0.8")]
    (entry,) = result["models"]
    for loader in ("tf2", "tf1"):
        assert [call["completions"] for call in entry[loader]] == expected
