"""PyTorch generation gives TensorFlow's tokens (run by `.ci/run`'s PyTorch pass).

PyTorch is not in the test extra (from the registry it is a CUDA build of
several GB), so the README's test command cannot run this file; `.ci/run`
installs the CPU build and runs it with `KERAS_BACKEND=torch`. The models are
built here (PyTorch), their weights saved, and a TensorFlow subprocess
(`generation_backends_worker.py`) runs the cases of `test_generation_backends.py`
on the same weights as the reference.
"""

import os

import generation_backends_worker as worker
import keras
from bad_input_table import interactive_sigint
from test_generation_backends import assert_same_results, start_worker, worker_results


def test_torch_gives_tensorflows_tokens(tmp_path):
    assert keras.backend.backend() == "torch", "run with KERAS_BACKEND=torch (see .ci/run)"
    gpt, seq2seq = worker.build_gpt(), worker.build_seq2seq()
    gpt.save_weights(os.path.join(tmp_path, "gpt.weights.h5"))
    seq2seq.save_weights(os.path.join(tmp_path, "seq2seq.weights.h5"))
    tensorflow = start_worker(str(tmp_path), "tensorflow")
    got = worker.cases(gpt, seq2seq)
    reference = worker_results("tensorflow", tensorflow)
    assert reference["backend"] == "tensorflow"
    assert_same_results(got, reference, "torch")


# --------------------------------------------------------------------------- compiled PyTorch
# `generation.torch_compile`: the prefill and each loop's step captured as aten graphs, then
# compiled by inductor in a background thread (`torch_compile.wait()` waits for it).
import _thread  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from keras_tfm import generation, models  # noqa: E402
from keras_tfm.generation import compiled, torch_compile, torch_loop  # noqa: E402

SAMPLE = dict(sampler="sample", temperature=1.2, top_k=20, top_p=0.9)


@pytest.fixture(scope="module")
def gpt():
    keras.utils.set_random_seed(3)
    return models.gpt("tiny")


def compile_counts(generator):
    assert torch_compile.wait(timeout=600), "inductor did not finish in 10 minutes"
    return [fn.compiler.compile_count for fn in generator._cache.functions.values()]


def test_compiled_torch_gives_eager_tokens_and_compiles_once(gpt):
    """A second seed, HuggingFace-style beams and a second call against the uncompiled loops:
    the tokens are equal from the traced graphs (first call) and from inductor's kernels (after
    `wait`), nothing runs eagerly, and a later call captures and compiles nothing."""
    eager, fast = generation.Generator(gpt, run_eagerly=True), generation.Generator(gpt)
    for seed in (5, 11):
        want = eager.generate(worker.GPT_PROMPTS, 12, seed=seed, **SAMPLE)
        np.testing.assert_array_equal(fast.generate(worker.GPT_PROMPTS, 12, seed=seed, **SAMPLE), want)
        torch_compile.wait()
        np.testing.assert_array_equal(fast.generate(worker.GPT_PROMPTS, 12, seed=seed, **SAMPLE), want)
    hf = dict(num_beams=3, length_penalty_style="hf", early_stopping=True)
    for got, want in zip(
        fast.beam_search(worker.GPT_PROMPTS, 6, **hf), eager.beam_search(worker.GPT_PROMPTS, 6, **hf)
    ):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    counts = compile_counts(fast)
    assert all(n >= 2 for n in counts), counts  # the prefill and a loop step of each function
    compilers = [fn.compiler for fn in fast._cache.functions.values()]
    assert all(c.eager_reason is None and c.trace_count == c.compile_count for c in compilers)
    fast.generate(worker.GPT_PROMPTS, 12, seed=5, **SAMPLE)
    assert compile_counts(fast) == counts and [c.trace_count for c in compilers] == counts


def test_sliding_window_is_captured_with_eager_tokens(gpt):
    """A call past `max_length` (the sliding window): seeded sampling and beam search give the
    eager tokens from the traced graphs and from inductor's kernels; a second call captures
    nothing new."""
    new = gpt.max_length + 8
    eager, fast = generation.Generator(gpt, run_eagerly=True), generation.Generator(gpt)
    want = eager.generate(worker.GPT_PROMPTS, new, seed=5, **SAMPLE)
    want_beams = eager.beam_search(worker.GPT_PROMPTS, new, num_beams=2)
    for _ in range(2):  # traced, then compiled
        np.testing.assert_array_equal(fast.generate(worker.GPT_PROMPTS, new, seed=5, **SAMPLE), want)
        for got, expected in zip(fast.beam_search(worker.GPT_PROMPTS, new, num_beams=2), want_beams):
            np.testing.assert_allclose(got, expected, rtol=1e-5)
        counts = compile_counts(fast)
    compilers = [fn.compiler for fn in fast._cache.functions.values()]
    assert all(c.eager_reason is None and c.trace_count == c.compile_count >= 2 for c in compilers)
    assert compile_counts(fast) == counts


def test_compiler_failure_falls_back_with_one_warning(gpt, monkeypatch):
    """A compiler that fails (here: in the background thread) leaves the traced graphs running,
    with one warning naming the reason; a missing compiler likewise; capturing off runs eagerly."""

    def broken(fn, example_inputs):
        raise RuntimeError("no C++ toolchain here")

    monkeypatch.setattr(torch_compile, "compile_graph", broken)
    monkeypatch.setattr(torch_compile, "_WARNED", set())
    want = generation.Generator(gpt, run_eagerly=True).generate(worker.GPT_PROMPTS, 6, eos_id=63)
    generator = generation.Generator(gpt)
    with pytest.warns(RuntimeWarning, match="runs uncompiled on PyTorch.*no C\\+\\+ toolchain here"):
        got = generator.generate(worker.GPT_PROMPTS, 6, eos_id=63)
        torch_compile.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no second warning
        again = generator.generate(worker.GPT_PROMPTS, 6, eos_id=63)
        generation.Generator(gpt).beam_search(worker.GPT_PROMPTS, 3, num_beams=2)
        torch_compile.wait()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(again, want)
    assert compile_counts(generator) == [0] and generator._cache.functions

    monkeypatch.setattr(torch_compile, "compiler_problem", lambda device: "no C++ compiler (test)")
    with pytest.warns(RuntimeWarning, match="runs uncompiled on PyTorch.*no C\\+\\+ compiler \\(test\\)"):
        got = generation.Generator(gpt).generate(worker.GPT_PROMPTS, 6, eos_id=63)
    np.testing.assert_array_equal(got, want)

    assert torch_loop.unsupported() is None  # the PyTorch of .ci/run
    monkeypatch.setattr(torch_loop, "unsupported", lambda: "an older while_loop (test)")
    old = generation.Generator(gpt)
    with pytest.warns(RuntimeWarning, match="runs eagerly on PyTorch.*an older while_loop \\(test\\)"):
        got = old.generate(worker.GPT_PROMPTS, 6, eos_id=63)
    np.testing.assert_array_equal(got, want)
    assert [fn.compiler.trace_count for fn in old._cache.functions.values()] == [0]

    monkeypatch.setenv(torch_compile.ENV_SWITCH, "0")
    off = generation.Generator(gpt)
    with pytest.warns(RuntimeWarning, match="runs eagerly on PyTorch.*KERAS_TFM_TORCH_COMPILE='0'"):
        got = off.generate(worker.GPT_PROMPTS, 6, eos_id=63)
    np.testing.assert_array_equal(got, want)
    assert [fn.compiler.trace_count for fn in off._cache.functions.values()] == [0]


def small_dense():
    """A seeded `Dense(4)` without bias, the model of the loop tests below."""
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, use_bias=False)])


def tanh_loop(model, x, n):
    """`x <- tanh(model(x))` `n` times in `compiled.while_loop`: the final state {"x", "i"}."""

    def body(state):
        return ({"x": keras.ops.tanh(model(state["x"])), "i": state["i"] + 1},)

    state = {"x": x, "i": keras.ops.zeros((), "int32")}
    (state,) = compiled.while_loop(lambda s: s["i"] < n, body, (state,))
    return state


def test_ctrl_c_stops_a_compiled_loop():
    """The compiled loop runs in Python: Ctrl-C (SIGINT) stops it between two steps."""
    model = small_dense()
    run = compiled.compile_function(lambda n: {"i": tanh_loop(model, keras.ops.ones((2, 4)), n)["i"]}, model)
    assert int(run(keras.ops.convert_to_tensor(3))["i"]) == 3 and run.compiler.trace_count == 1
    assert torch_compile.wait(timeout=600) and run.compiler.compile_count == 1
    timer = threading.Timer(0.5, _thread.interrupt_main)  # what Ctrl-C does
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt), interactive_sigint():
        run(keras.ops.convert_to_tensor(2**30))
    timer.cancel()
    assert time.perf_counter() - start < 10.0 and run.compiler.compile_count == 1


def test_call_during_a_compile_uses_one_thread(monkeypatch):
    """While inductor compiles in the background a call runs on one intra-op thread (the
    compiler holds cores), and the caller's thread count comes back after it."""
    model = small_dense()
    seen = []

    def fn(x):
        seen.append(torch.get_num_threads())
        return {"y": model(x)}

    run = compiled.compile_function(fn, model)
    before = torch.get_num_threads()
    monkeypatch.setattr(torch_compile._WORKER, "pending", 1)
    run(keras.ops.ones((1, 4)))
    monkeypatch.setattr(torch_compile._WORKER, "pending", 0)
    run(keras.ops.ones((1, 4)))
    assert seen == [1, before] and torch.get_num_threads() == before


def test_compile_takes_the_callers_thread_count(monkeypatch):
    """Inductor decides how many threads a kernel's loops use by the compiling thread's count:
    the background compile of a call's graphs takes that of the caller."""
    model = small_dense()
    seen = []

    def record(graph, example_inputs):
        seen.append(torch.get_num_threads())
        return graph

    monkeypatch.setattr(torch_compile, "compile_graph", record)
    run = compiled.compile_function(lambda x: {"x": tanh_loop(model, x, 3)["x"]}, model)
    before = torch.get_num_threads()
    try:
        for threads, rows in ((1, 1), (before, 2)):  # a new input shape: a new graph to compile
            torch.set_num_threads(threads)
            run(keras.ops.ones((rows, 4)))
            assert torch_compile.wait(timeout=60)
    finally:
        torch.set_num_threads(before)
    assert seen == [1, before] and run.compiler.compile_count == 2


def test_loop_runs_in_chunks_with_weight_only_work_hoisted(monkeypatch):
    """A loop runs in chunks of `torch_loop.CHUNK` steps with the eager values, whatever its
    length; what a step computes from the weights alone (here a concatenation) runs before the
    loop, and a tensor constant of the step (not a scalar) becomes an input of the loop."""
    monkeypatch.setattr(torch_compile, "compiler_problem", lambda device: "traced only (test)")
    monkeypatch.setattr(torch_compile, "_WARNED", set())
    model = small_dense()
    table = np.linspace(-1.0, 1.0, 8, dtype="float32").reshape(2, 4)

    def loop(n):
        def body(state):
            kernel = keras.ops.concatenate([model.layers[0].kernel, 2.0 * model.layers[0].kernel], axis=1)
            x = keras.ops.matmul(state["x"], kernel)[:, 2:6] + keras.ops.convert_to_tensor(table)
            return ({"x": keras.ops.tanh(x), "i": state["i"] + 1},)

        state = {"x": keras.ops.ones((2, 4)), "i": keras.ops.zeros((), "int32")}
        (state,) = compiled.while_loop(lambda s: s["i"] < n, body, (state,))
        return state

    run = compiled.compile_function(loop, model)
    chunk = torch_loop.CHUNK
    with pytest.warns(RuntimeWarning, match="runs uncompiled on PyTorch.*traced only \\(test\\)"):
        run(keras.ops.convert_to_tensor(1))
    for n in (3, chunk, chunk + 1, 2 * chunk + 5):
        got, want = run(keras.ops.convert_to_tensor(n)), loop(n)
        assert int(got["i"]) == n
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(got["x"]), keras.ops.convert_to_numpy(want["x"])
        )
    assert run.compiler.trace_count == 1
    (graph,) = run.compiler.graphs.values()
    (node,) = [n for n in graph.traced.graph.nodes if n.target is torch.ops.higher_order.while_loop]
    body = getattr(graph.traced, node.args[1].target)

    def targets(g):
        return {n.target for n in g.graph.nodes}

    assert torch.ops.aten.cat.default in targets(graph.traced)
    assert torch.ops.aten.cat.default not in targets(body)
    assert not [n for n in body.graph.nodes if n.op == "get_attr"]  # the table came in as an input


def test_one_row_products_pass_their_row_with_its_stride(gpt):
    """At batch 1 a step's matrix products take one-row matrices; `torch_loop` passes a row
    through `as_strided` (inductor would give it row stride 0, which ATen copies) only where
    its storage holds just that row. Tokens equal the eager ones, traced and compiled."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def products(state, weight):
        whole = torch.mm(torch.tanh(state).reshape(1, 8)[:, :4], weight)  # storage: 8 values
        return torch.mm(torch.tanh(whole).reshape(1, 1, 4).reshape(1, 4), weight)  # storage: 4

    state, weight = torch.randn(2, 4), torch.randn(4, 4)
    graph = make_fx(products)(state, weight)
    torch_loop._strided_rows(graph)
    strided = [n for n in graph.graph.nodes if n.target is torch.ops.aten.as_strided.default]
    assert len(strided) == 1 and strided[0].args[1:] == ([1, 4], [4, 1], 0)
    assert torch.equal(graph(state, weight), products(state, weight))

    eager, fast = generation.Generator(gpt, run_eagerly=True), generation.Generator(gpt)
    prompt = worker.GPT_PROMPTS[1:]
    want = [eager.generate(prompt, 12), eager.generate(prompt, 12, seed=5, **SAMPLE)]
    for _ in range(2):  # traced, then compiled
        np.testing.assert_array_equal(fast.generate(prompt, 12), want[0])
        np.testing.assert_array_equal(fast.generate(prompt, 12, seed=5, **SAMPLE), want[1])
        compile_counts(fast)
    loops = [
        getattr(g.traced, n.args[1].target)
        for fn in fast._cache.functions.values()
        for g in fn.compiler.graphs.values()
        for n in g.traced.graph.nodes
        if n.target is torch.ops.higher_order.while_loop
    ]
    assert loops and all(
        torch.ops.aten.as_strided.default in {n.target for n in body.graph.nodes} for body in loops
    )
