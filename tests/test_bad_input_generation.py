"""Bad inputs to generation and the data text API (issue 26, part B), in the style of
`tests/test_bad_input.py`: every entry is a bad input to a public API and the clear error it
must raise (exception type + a regex on the message naming the argument), or, marked RECOVERS, a
documented behaviour the case checks itself. Plus one subprocess test: Ctrl-C (SIGINT) stops a
long compiled generation at once.

    python -m pytest tests/test_bad_input_generation.py -q -n 0
"""

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from bad_input_table import RECOVERS, Table, run_case
from model_harness import tiny_gpt, tiny_sentence_encoder, tiny_seq2seq

from keras_tfm.data import LengthBucketedBatches, embed_texts, encode_texts
from keras_tfm.generation import Generator, beam_search, generate
from keras_tfm.generation import prompts as generation_prompts
from keras_tfm.tokenizers import WordPieceTokenizer

V = 37  # vocabulary of the tiny GPT
T = 8  # its max_length
CORPUS = ["hello world", "the cat sat on the mat", "a dog ran in the park", "hello there"]


class Env:
    @functools.cached_property
    def gpt(self):
        return tiny_gpt(vocabulary_size=V, max_length=T, num_layers=1)

    @functools.cached_property
    def generator(self):
        """Run eagerly: the checks run before anything is compiled."""
        return Generator(self.gpt, run_eagerly=True)

    @functools.cached_property
    def seq2seq(self):
        return tiny_seq2seq(num_layers=1)

    @functools.cached_property
    def seq2seq_generator(self):
        return Generator(self.seq2seq, run_eagerly=True)

    @functools.cached_property
    def tokenizer(self):
        return WordPieceTokenizer.from_corpus(CORPUS, vocabulary_size=64)

    @functools.cached_property
    def encoder(self):
        return tiny_sentence_encoder(vocabulary_size=self.tokenizer.vocabulary_size)


@pytest.fixture(scope="module")
def env():
    return Env()


TABLE = Table()
case, simple, CASES = TABLE.case, TABLE.simple, TABLE.cases


def _gen(env, **kwargs):
    args = dict(max_new_tokens=2)
    args.update(kwargs)
    prompts = args.pop("prompts", [[7, 8, 9], [5]])
    return generate(env.generator, prompts, **args)


# ---- pad_id ---------------------------------------------------------------------- #
@case("generate-pad_id-outside-vocabulary", ValueError, r"`pad_id`=1000 is outside .*\[0, 37\)")
def _(env):
    generate(env.gpt, [[7, 8, 9], [5]], max_new_tokens=5, pad_id=1000)


@case("beam_search-pad_id-equal-vocabulary", ValueError, r"`pad_id`=37 is outside .*\[0, 37\)")
def _(env):
    beam_search(env.gpt, [[7, 8, 9]], max_new_tokens=2, num_beams=2, pad_id=V)


@case("Generator-pad_id-outside-vocabulary", ValueError, r"`pad_id`=1000 is outside .*\[0, 37\)")
def _(env):
    Generator(env.gpt, pad_id=1000)


@case("Generator-seq2seq-pad_id-outside-vocabulary", ValueError, r"`pad_id`=99 is outside .*\[0, 32\)")
def _(env):
    Generator(env.seq2seq, pad_id=99)


@case("generate-pad_id-differs-from-the-generator-s", ValueError, r"`pad_id`=5 differs from the generator's")
def _(env):
    generate(env.generator, [[7, 8, 9]], max_new_tokens=2, pad_id=5)


@case("generate-pad_id-in-range-pads-finished-rows", RECOVERS)
def _(env):
    tokens = generate(env.gpt, [[7, 8, 9], [5]], max_new_tokens=4, pad_id=3, eos_id=int(_gen(env)[0, 0]))
    assert tokens[0, 0] != 3 and np.all(tokens[0, 1:] == 3)  # the row stopped on EOS, then pad_id


# ---- beam search with zero new tokens --------------------------------------------- #
@case("beam_search-max_new_tokens-0", ValueError, r"`max_new_tokens` must be >= 1; received 0")
def _(env):
    beam_search(env.generator, [[7, 8, 9]], max_new_tokens=0, num_beams=3)


@case("beam_search-max_new_tokens-1-has-no-sentinel-score", RECOVERS)
def _(env):
    _, scores, lengths = beam_search(env.generator, [[7, 8, 9]], max_new_tokens=1, num_beams=3)
    assert np.all(scores > -1e6) and np.all(lengths == 1)


# ---- cache_dtype ------------------------------------------------------------------- #
def _set_cache_dtype(model, value):
    model.cache_dtype = value


for _dtype in ("int8", "int32", "bool", "bogus", "float64"):

    @case(f"GPT-cache_dtype-{_dtype}", ValueError, rf"`cache_dtype` must be one of .*received '{_dtype}'")
    def _(env, _dtype=_dtype):
        _set_cache_dtype(env.gpt, _dtype)

    @case(f"Seq2Seq-cache_dtype-{_dtype}", ValueError, rf"`cache_dtype` must be one of .*received '{_dtype}'")
    def _(env, _dtype=_dtype):
        _set_cache_dtype(env.seq2seq, _dtype)


@case("GPT-cache_dtype-bfloat16-and-None-accepted", RECOVERS)
def _(env):
    import tensorflow as tf

    try:
        env.gpt.cache_dtype = tf.bfloat16
        assert env.gpt.cache_dtype == "bfloat16"
        assert env.gpt.init_caches(1, 4)[0].dtype.size == 2  # bfloat16 (or its bits as uint16)
        assert _gen(env).shape == (2, 2)
    finally:
        env.gpt.cache_dtype = None
    assert env.gpt.init_caches(1, 4)[0].dtype == tf.float32


@case("GPT-init_caches-dtype-int8", ValueError, r"`dtype` must be one of .*received 'int8'")
def _(env):
    env.gpt.init_caches(1, 4, dtype="int8")


@case("Seq2Seq-init_caches-dtype-int32", ValueError, r"`dtype` must be one of .*received 'int32'")
def _(env):
    env.seq2seq.init_caches(1, 4, dtype="int32")


@case("generate-rechecks-a-cache_dtype-set-past-the-property", ValueError, r"`cache_dtype` must be one of")
def _(env):
    object.__setattr__(env.gpt, "cache_dtype", "int8")  # e.g. a subclass storing it directly
    try:
        _gen(env)
    finally:
        env.gpt.cache_dtype = None


# ---- max_new_tokens bound ---------------------------------------------------------- #
@case("generate-max_new_tokens-1e9", ValueError, r"`max_new_tokens`=1000000000 exceeds the limit")
def _(env):
    generate(env.gpt, [[7, 8, 9]], max_new_tokens=10**9)


@case("beam_search-max_new_tokens-over-the-limit", ValueError, r"`max_new_tokens`=\d+ exceeds the limit")
def _(env):
    beam_search(env.generator, [[7, 8, 9]], max_new_tokens=generation_prompts.MAX_NEW_TOKENS + 1, num_beams=2)


@case("generate-output_scores-too-large", ValueError, r"`output_scores`=True would return .* GiB")
def _(env):
    _gen(env, prompts=[[7]] * 64, max_new_tokens=generation_prompts.MAX_NEW_TOKENS, output_scores=True)


# ---- other generation arguments --------------------------------------------------- #
@case("generate-seed-beyond-int32", ValueError, r"`seed` must be a seed in \[0, 2147483647\]")
def _(env):
    _gen(env, sampler="sample", seed=2**32 + 1)


@case(
    "generate-seed-array-beyond-int32-would-wrap",
    ValueError,
    r"`seed` entries must be seeds in \[0, 2147483647\]",
)
def _(env):
    _gen(env, sampler="sample", seed=np.array([2**40, 2], np.int64))


@case("generate-seed-negative", ValueError, r"`seed` must be a seed in \[0, 2147483647\]")
def _(env):
    _gen(env, sampler="sample", seed=-1)


@case("generate-return_lengths-string", TypeError, r"`return_lengths` must be a bool")
def _(env):
    _gen(env, return_lengths="no")


@case("generate-output_scores-string", TypeError, r"`output_scores` must be a bool")
def _(env):
    _gen(env, output_scores="false")


@case("generate-unknown-keyword", TypeError, r"`generate` got unexpected keyword argument\(s\) \['top_n'\]")
def _(env):
    _gen(env, top_n=5)


@case("generate-bos_id-to-a-GPT", TypeError, r"`generate` got unexpected keyword argument\(s\) \['bos_id'\]")
def _(env):
    _gen(env, bos_id=1)


@case(
    "beam_search-sampler-keyword",
    TypeError,
    r"`beam_search` got unexpected keyword argument\(s\) \['sampler'\]",
)
def _(env):
    beam_search(env.generator, [[7, 8]], max_new_tokens=2, num_beams=2, sampler="sample")


@case("generate-prompt_lengths-2-D", ValueError, r"`prompt_lengths` must be 1-D .* shape \(1, 2\)")
def _(env):
    _gen(env, prompts=np.array([[7, 8, 9], [5, 0, 0]]), prompt_lengths=[[3, 1]])


@case("generate-prompt_lengths-scalar", ValueError, r"`prompt_lengths` must be 1-D")
def _(env):
    _gen(env, prompts=np.array([[7, 8, 9]]), prompt_lengths=3)


@case("beam_search-length_penalty-huge", ValueError, r"`length_penalty` must be in \[0\.0, 5\.0\]")
def _(env):
    beam_search(env.generator, [[7, 8]], max_new_tokens=2, num_beams=2, length_penalty=1e30)


@case("Generator-bos_id-outside-vocabulary", ValueError, r"`bos_id`=1000 is outside .*\[1, 32\)")
def _(env):
    Generator(env.seq2seq, bos_id=1000)


@case("generate-seq2seq-bos_id-outside-vocabulary", ValueError, r"`bos_id`=32 is outside .*\[1, 32\)")
def _(env):
    generate(env.seq2seq_generator, [[3, 4, 5]], max_new_tokens=2, bos_id=32)


@case(
    "generate-seq2seq-bos_id-and-decoder_prompt_ids",
    ValueError,
    r"Pass `bos_id` or `decoder_prompt_ids`, not both",
)
def _(env):
    generate(env.seq2seq_generator, [[3, 4, 5]], max_new_tokens=2, bos_id=2, decoder_prompt_ids=[[1]])


@case(
    "generate-seq2seq-prompt_lengths-keyword",
    TypeError,
    r"unexpected keyword argument\(s\) \['prompt_lengths'\]",
)
def _(env):
    generate(env.seq2seq_generator, [[3, 4, 5]], max_new_tokens=2, bos_id=1, prompt_lengths=[3])


# ---- data: texts ------------------------------------------------------------------- #
@case("embed_texts-a-str", TypeError, r"`texts` must be a list of texts; received a single str .*\[text\]")
def _(env):
    embed_texts(env.encoder, env.tokenizer, "hello world")


@case("encode_texts-a-str", TypeError, r"`texts` must be a list of texts; received a single str")
def _(env):
    encode_texts(env.tokenizer, "hello world", 16)


@case("encode_texts-bytes", TypeError, r"`texts` must be a list of texts; received a single bytes")
def _(env):
    encode_texts(env.tokenizer, b"hello world", 16)


@case("encode_texts-non-string-item", TypeError, r"`texts\[1\]` must be a str .*received 3")
def _(env):
    encode_texts(env.tokenizer, ["hello", 3], 16)


@case("embed_texts-one-text-in-a-list", RECOVERS)
def _(env):
    one = embed_texts(env.encoder, env.tokenizer, ["hello world"])
    both = embed_texts(env.encoder, env.tokenizer, ["hello world", "the cat"])
    assert one.shape == (1, both.shape[1])
    np.testing.assert_allclose(one[0], both[0], atol=1e-5)


@case("tokenizer-call-a-str-is-one-text", RECOVERS)
def _(env):  # a tokenizer mirrors its input's shape: a scalar string gives one id sequence
    assert env.tokenizer("hello world").numpy().tolist() == env.tokenizer(["hello world"])[0].numpy().tolist()


@case("LengthBucketedBatches-rows-a-str", TypeError, r"`rows` must be a list of token id arrays")
def _(env):
    LengthBucketedBatches("hello world", None, 2)


@case("LengthBucketedBatches-rows-one-flat-list-of-ids", ValueError, r"`rows\[0\]` must be a non-empty 1-D")
def _(env):
    LengthBucketedBatches([2, 5, 7], None, 2)


@case("LengthBucketedBatches-labels-count", ValueError, r"`labels` must hold one label per row \(2\)")
def _(env):
    LengthBucketedBatches([[2, 5], [7]], [0, 1, 1], 2)


@case("LengthBucketedBatches-pad_id-string", TypeError, r"`pad_id` must be an int")
def _(env):
    LengthBucketedBatches([[2, 5], [7]], None, 2, pad_id="0")


@case("LengthBucketedBatches-shuffle-string", TypeError, r"`shuffle` must be a bool")
def _(env):
    LengthBucketedBatches([[2, 5], [7]], None, 2, shuffle="False")


@pytest.mark.parametrize(("fn", "exc", "match"), CASES)
def test_bad_input_generation(env, fn, exc, match):
    run_case(env, fn, exc, match)


def test_case_ids_are_unique():
    TABLE.assert_ids_unique()


# ---- Ctrl-C ------------------------------------------------------------------------ #
_LONG_GENERATION = textwrap.dedent(
    """
    import signal, sys, time
    # SIGINT raises KeyboardInterrupt as in an interactive process, also where the suite runs with
    # SIGINT ignored (a background job), which this child would inherit.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {tests!r})
    from model_harness import tiny_gpt
    from keras_tfm.generation import Generator
    generator = Generator(tiny_gpt(vocabulary_size=37, max_length=16))
    short = generator.generate([[7, 8, 9]], 4)  # compiled once, before the long call
    print("GENERATING", flush=True)
    try:
        generator.generate([[7, 8, 9]], 1 << 20)  # minutes of compiled steps
    except KeyboardInterrupt:
        print("INTERRUPTED", time.monotonic(), flush=True)
        if {reraise}:
            raise
    # Caught (a notebook): the next call works while the abandoned loop still runs.
    assert (generator.generate([[7, 8, 9]], 4) == short).all()
    print("AGAIN", flush=True)
    """
)


@pytest.mark.parametrize(("reraise", "expected_status"), [(True, -signal.SIGINT), (False, 0)])
def test_ctrl_c_interrupts_a_long_compiled_generation(tmp_path, reraise, expected_status):
    """SIGINT during a compiled generation of 2^20 tokens: KeyboardInterrupt within about a second.
    Unhandled, the process ends as an interrupted Python process does (killed by SIGINT, not an
    abort); caught, the next generation works and the process exits with status 0 although the
    abandoned loop still runs (`generation.compiled.interruptible_call`)."""
    script = tmp_path / "long_generation.py"
    tests = os.path.dirname(os.path.abspath(__file__))
    script.write_text(_LONG_GENERATION.format(tests=tests, reraise=reraise))
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        assert child.stdout.readline().strip() == "GENERATING", child.stderr.read()[-3000:]
        time.sleep(3.0)  # inside the compiled loop (the call runs for minutes)
        assert child.poll() is None
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().split()
        assert line and line[0] == "INTERRUPTED", child.stderr.read()[-3000:]
        assert float(line[1]) - sent < 1.5, f"KeyboardInterrupt {float(line[1]) - sent:.1f} s after SIGINT"
        status = child.wait(timeout=60)
        rest, stderr = child.stdout.read(), child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
    assert status == expected_status, (status, stderr[-3000:])
    if reraise:
        assert "KeyboardInterrupt" in stderr and "AGAIN" not in rest
    else:
        assert rest.strip() == "AGAIN", stderr[-3000:]
