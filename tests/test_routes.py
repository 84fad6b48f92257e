"""The roads from a call to the code that runs (issue 34): no method found through a registry,
a short route for `GPT.generate("text")`, and two calls from an attention layer to the formula.

The route of a call is the sequence of keras_tfm modules outside `layers/` and `tokenizers/`
that run Python code during it (`sys.setprofile` "call" events, consecutive repeats merged);
a *switch back* is an entry of a module already in the sequence.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf
from model_harness import tiny_gpt

import keras_tfm
from keras_tfm.layers import MultiHeadSelfAttention
from keras_tfm.layers.attention import dot_product
from keras_tfm.tokenizers import CharTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "pretrained")
PACKAGE = os.path.dirname(keras_tfm.__file__) + os.sep
OUTSIDE = ("layers" + os.sep, "tokenizers" + os.sep)


def route(fn):
    """The modules a call runs, in order (see the module docstring)."""
    sequence = []

    def profile(frame, event, arg):
        path = frame.f_code.co_filename
        if event != "call" or not path.startswith(PACKAGE) or path[len(PACKAGE) :].startswith(OUTSIDE):
            return
        module = path[len(PACKAGE) : -3].replace(os.sep, ".")
        if not sequence or sequence[-1] != module:
            sequence.append(module)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return sequence


def test_repeated_text_generation_crosses_at_most_six_modules():
    tokenizer = CharTokenizer.from_corpus(["to be or not to be, that is the question"])
    model = tiny_gpt(vocabulary_size=tokenizer.vocabulary_size, max_length=32)
    model.tokenizer = tokenizer
    call = lambda: model.generate("to be", max_new_tokens=8)  # noqa: E731
    call()  # traces and compiles; the route measured is the repeated call's
    sequence = route(call)
    switches = sum(1 for i, module in enumerate(sequence) if module in sequence[:i])
    assert sequence[0] == "models.gpt" and "generation.compiled" in sequence
    assert len(set(sequence)) <= 6, sequence
    assert switches <= 6, " → ".join(sequence)
    assert call() == model.generate("to be", max_new_tokens=8)


def test_attention_layer_reaches_the_formula_in_two_calls(monkeypatch):
    """`call` → `_compute_attention` → `dot_product_attention`, which computes the scores."""
    stacks = []
    original = dot_product.attention_scores

    def spy(*args, **kwargs):
        frame, names = sys._getframe(1), []
        while frame is not None and frame.f_code.co_name != "call":
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        stacks.append(names)
        return original(*args, **kwargs)

    monkeypatch.setattr(dot_product, "attention_scores", spy)
    layer = MultiHeadSelfAttention(2, causal=True)
    layer(tf.zeros((1, 5, 8)))
    assert stacks and stacks[-1] == ["dot_product_attention", "_compute_attention"]


# A fresh interpreter that imports nothing of keras_tfm but the model class, then calls each of
# its text methods: their work is reached by imports, whatever was imported before.
FRESH = textwrap.dedent(
    """
    import json, sys
    case, fixtures, config_file = sys.argv[1], sys.argv[2], sys.argv[3]
    out = {}
    if case == "gpt":
        from keras_tfm.models.gpt import GPT
        model = GPT.from_preset(fixtures + "/tiny_gpt2")
        out["generate"] = model.generate("hello", max_new_tokens=3)
        out["beam_search"] = model.beam_search(["hello"], max_new_tokens=3, num_beams=2)
    elif case == "seq2seq":
        from keras_tfm.models.seq2seq import Seq2Seq
        model = Seq2Seq.from_config(json.load(open(config_file)))
        out["translate"] = model.translate("ab", num_beams=1, max_new_tokens=3)
        out["generate"] = model.generate(["ab"], max_new_tokens=3)
        out["beam_search"] = model.beam_search("ab", max_new_tokens=3, num_beams=2)
    elif case == "classifier":
        from keras_tfm.models.bert_classifiers import BertClassifier
        model = BertClassifier.from_preset(fixtures + "/tiny_bert", num_classes=2)
        out["predict"] = model.predict(["a good film"]).shape
        out["fit"] = sorted(model.fit(["good", "bad"], [1, 0], epochs=1, verbose=0).history)
        out["evaluate"] = len(model.evaluate(["good", "bad"], [1, 0], verbose=0))
    elif case == "token_classifier":
        from keras_tfm.models.bert_classifiers import BertTokenClassifier
        model = BertTokenClassifier.from_preset(fixtures + "/tiny_bert", num_classes=3)
        out["predict"] = len(model.predict("a good film"))
    elif case == "masked_lm":
        from keras_tfm.models.bert_tasks import BertMaskedLM
        model = BertMaskedLM.from_preset(fixtures + "/tiny_bert")
        out["fill_mask"] = len(model.fill_mask("a [MASK] film")["top_tokens"])
    elif case == "sentence_encoder":
        from keras_tfm.models.sentence_encoder import SentenceEncoder
        model = SentenceEncoder.from_preset(fixtures + "/tiny_bert")
        out["embed"] = model.embed(["a good film", "a bad one"]).shape
    print("RESULT " + json.dumps({k: str(v) for k, v in out.items()}))
    """
)


def _seq2seq_config(path):
    from model_harness import tiny_seq2seq

    tokenizer = CharTokenizer.from_corpus(["abcde fghij"])
    model = tiny_seq2seq(vocabulary_size=tokenizer.vocabulary_size)
    model.tokenizer = tokenizer
    with open(path, "w") as f:
        json.dump(model.get_config(), f)


#: The text methods of each model class.
METHODS = {
    "gpt": {"generate", "beam_search"},
    "seq2seq": {"translate", "generate", "beam_search"},
    "classifier": {"predict", "fit", "evaluate"},
    "token_classifier": {"predict"},
    "masked_lm": {"fill_mask"},
    "sentence_encoder": {"embed"},
}


@pytest.mark.parametrize("case", sorted(METHODS))
def test_text_methods_work_after_importing_only_the_model_class(tmp_path, case):
    config = tmp_path / "seq2seq.json"
    if case == "seq2seq":
        _seq2seq_config(config)
    script = tmp_path / "fresh.py"
    script.write_text(FRESH)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(
        [sys.executable, str(script), case, FIXTURES, str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert set(result) == METHODS[case], result  # every text method ran
