"""Suite-wide pytest set-up: the order of the test files, one-thread TensorFlow pools under xdist.

`pyproject.toml` runs the suite on two xdist workers with `--dist loadfile --no-loadscope-reorder`:
each file runs whole on one worker, the files are handed out in collection order, and a worker
takes the next file when it is about to finish its current one.

Ageing. A worker process slows down as it ages: every exported SavedModel and compiled loop leaves
hundreds of thousands of live Python objects, and each of Python's full (generation-2) garbage
collections walks all of them. After `test_cli_workflow.py`, the int8 tests of
`test_sublayer_calls.py` spent 15 s of their 18 s in those collections (`-n 0`). So at the start of each
file the survivors of the earlier files are collected once and frozen (`gc.freeze`: later
collections skip them); the same tests then took 2.5 s.

Order. The slow files go first (`SLOWEST_FIRST`, longest processing time first), so the short
files fill the gaps and the two workers finish at about the same time. xdist's default order (most
tests first) had left the slowest file for the end with the other worker idle.

Under xdist each worker (and the subprocesses its tests start) sizes TensorFlow's thread pools to
one thread: the two workers already keep the two cores busy, and pools sized for the whole machine
make the workers' threads time-share the cores. A one-core run (`taskset -c 1`) uses one-thread
pools too, so the suite is checked in that configuration.
"""

import gc
import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):  # before TensorFlow starts its thread pools
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

#: The slowest files, slowest first: CPU seconds of each file (its subprocesses included; from
#: `KERAS_TFM_TEST_CPU`) in a full two-worker run, or with `-n 0` for a file changed since (issue 34).
#: The others follow in their usual (alphabetical) order. Keep the heaviest files at the top when
#: their cost changes.
SLOWEST_FIRST = (
    "test_export.py",  # 251 (four exports, each loaded by two loaders in a subprocess)
    "test_cli_workflow.py",  # 238 (eight `keras-tfm` subprocesses)
    "test_training.py",  # 231 (five worker subprocesses, XLA train steps in bfloat16)
    "test_examples_cli.py",  # 227 (the four examples end to end)
    "test_docs.py",  # 193 (one export, a compiled generation loop)
    "test_distribution.py",  # 154 (one JAX subprocess on 8 virtual devices)
    "test_bad_input_cli.py",  # 146
    "test_models.py",  # 136
    "test_litert.py",  # 136 (five LiteRT conversions, a short training)
    "test_generation.py",  # 128
    "test_finetune_seq2seq_cli.py",  # 122
    "test_families_seq2seq.py",  # 115 (a T5 export; four Unigram tokenizers traced)
    "test_long_generation.py",  # 114
    "test_backends.py",  # 111
    "test_routes.py",  # 110 (six fresh subprocesses)
    "test_generation_backends.py",  # 106 (a JAX subprocess)
    "test_pretrained.py",  # 104
    # Under 104 in that run (in their order of earlier -n 0 timings):
    "test_families_decoders.py",  # a Mistral export, HF beam search under XLA
    "test_sublayer_calls.py",
    "test_tokenizers_pretrained.py",
    "test_bad_input.py",
    "test_efficient_attention.py",
    "test_attention_auto.py",
)


def pytest_collection_modifyitems(items):
    """Orders the files: `SLOWEST_FIRST` in that order, then the others (a stable sort: the order
    inside a file, and of the other files, is kept)."""
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOWEST_FIRST)))


@pytest.fixture(scope="module", autouse=True)
def freeze_earlier_files_objects():
    """Collects the garbage of the earlier files once, then freezes what survives (see Ageing)."""
    gc.collect()
    gc.freeze()
    yield


# --------------------------------------------------------------------------- CPU time per file
#: `KERAS_TFM_TEST_CPU=path.jsonl`: each test file's CPU seconds (this process and the subprocesses
#: it waited for) are appended to that file, one JSON line per file; a measure of a file's cost
#: that a busy machine does not inflate as much as wall time (for ordering `SLOWEST_FIRST`).
_CPU_LOG = os.environ.get("KERAS_TFM_TEST_CPU")


@pytest.fixture(scope="module", autouse=True)
def cpu_seconds_of_the_file(request):
    if not _CPU_LOG:
        yield
        return
    import json
    import resource
    import time

    def used():
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    start, wall = used(), time.perf_counter()
    yield
    line = {
        "file": request.path.name,
        "cpu": round(used() - start, 1),
        "wall": round(time.perf_counter() - wall, 1),
    }
    with open(_CPU_LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
