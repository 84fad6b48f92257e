"""Generation speed per Keras backend, side by side: keras_tfm on TensorFlow, JAX and PyTorch,
and KerasHub's `GPT2CausalLM.generate` on PyTorch as the peer.

Model: the tiny GPT of `bench/generate.py` (4 layers, 4 heads, d_model 128, d_ff 512,
vocabulary 65, max_length 2048; random weights, seed 0) and a KerasHub GPT-2 of the same
sizes (`GPT2Backbone`, random weights, greedy sampler, `preprocessor=None`). Workload: prompt
16 -> 256 new tokens, greedy, batch 1 and 8; the first call's time (trace and compile
included), then the median of `--reps` calls. On PyTorch the first call runs the captured aten
graphs while inductor compiles them in a background thread afterwards: `second s` is a second
call made at once, while inductor compiles (the two share the interpreter); `ready s` is the time
from the first call's start until those compilations are done (`torch_compile.wait()`); the median
is taken after it, on the compiled kernels.

Rows (one subprocess per backend, one backend after the other: `KERAS_BACKEND` is fixed at
import):
  tensorflow  keras_tfm generate      `Generator.generate` (XLA `tf.function`)
  jax         keras_tfm generate      the same loop, `jax.jit`
  torch       keras_tfm generate      the same loop, prefill and chunks of steps captured as
                                      aten graphs and compiled by inductor (`generation.torch_compile`)
  torch       keras_tfm eager         `--eager`: the same, uncompiled (`run_eagerly=True`)
  torch       keras_hub GPT2CausalLM  KerasHub's `generate` (`--no-hub`: skipped)
The `tokens` column is a digest of the generated ids: equal digests, equal tokens.

`--gpu` lets JAX and PyTorch take the machine's GPU (else JAX is held to the CPU; Keras's
PyTorch backend takes CUDA where it sees it); each backend's device is printed above the rows.
`--threads N` sets every backend's intra-op threads (PyTorch `torch.set_num_threads`,
TensorFlow's thread pools, XLA's Eigen pool off for 1). `--cold` gives PyTorch an empty
inductor cache, so its first call compiles from nothing (else inductor's on-disk cache from an
earlier run may serve it). `--sync` compiles in the calling thread (`KERAS_TFM_TORCH_COMPILE=sync`):
the first call then includes inductor's time.

Usage:  python bench/generate_backends.py [--reps 3] [--backends tensorflow,jax,torch]
            [--threads N] [--gpu] [--cold] [--sync] [--eager] [--no-hub] [--output bench/results_generate_backends.txt]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import D_MODEL, LAYERS, NEW, PROMPT, VOCAB, generation_gpt, keras_hub_gpt2_generate

HERE = os.path.dirname(os.path.abspath(__file__))
BATCHES = (1, 8)


def prompts(batch):
    import numpy as np

    return np.random.default_rng(0).integers(1, VOCAB, size=(batch, PROMPT)).astype(np.int32)


def timed(fn, reps, settle=None):
    """(first-call seconds, second-call seconds and seconds until `settle()` returns after
    the first call's start (both None without `settle`), median seconds of `reps` later calls,
    last result). The second call runs at once, while a background compile may still run."""
    import numpy as np

    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    ready = second = None
    if settle is not None:
        mark = time.perf_counter()
        out = fn()
        second = time.perf_counter() - mark
        settle()
        ready = time.perf_counter() - start
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return first, second, ready, float(np.median(times)), out


def hub_generate(batch):
    """KerasHub's GPT-2 of the same sizes (`_common.keras_hub_gpt2_generate`): the new tokens."""
    run = keras_hub_gpt2_generate(prompts(batch), NEW)
    return lambda: run()[:, PROMPT:]


def worker(backend, reps, hub, eager):
    """Runs one backend's rows; prints one JSON line per row."""
    import keras
    import numpy as np

    from keras_tfm.generation import Generator

    assert keras.backend.backend() == backend, (keras.backend.backend(), backend)
    model = generation_gpt()

    settle = None
    if backend == "torch":
        from keras_tfm.generation import torch_compile

        settle = torch_compile.wait  # inductor compiles in the background after a first call

    def row(name, batch, make, n, settle=None):
        try:
            first, second, ready, median, out = timed(make(), n, settle)
        except Exception as error:  # noqa: BLE001 - report the row as failed, go on
            print(
                json.dumps(
                    dict(backend=backend, name=name, batch=batch, error=f"{type(error).__name__}: {error}")
                )
            )
            return
        digest = hashlib.md5(np.ascontiguousarray(np.asarray(out, np.int32)).tobytes()).hexdigest()[:8]
        result = dict(
            backend=backend,
            name=name,
            batch=batch,
            first=first,
            second=second,
            ready=ready,
            median=median,
            tokens=digest,
        )
        print(json.dumps(dict(result, load=os.getloadavg()[0])), flush=True)

    print(json.dumps(dict(backend=backend, device=device_name(backend, model))), flush=True)
    generator = Generator(model)
    for batch in BATCHES:
        ids = prompts(batch)
        row("keras_tfm generate", batch, lambda: lambda: generator.generate(ids, NEW), reps, settle)
        if backend == "torch" and eager:
            slow = Generator(model, run_eagerly=True)
            row("keras_tfm eager", batch, lambda: lambda: slow.generate(ids, NEW), 1)
        if backend == "torch" and hub:
            row("keras_hub GPT2CausalLM", batch, lambda: hub_generate(batch), reps)


def device_name(backend, model):
    """Where `model`'s weights live: the accelerator's name, or "cpu"."""
    value = model.variables[0].value
    if backend == "jax":
        (device,) = value.devices()
        return device.device_kind if device.platform != "cpu" else "cpu"
    if backend == "torch" and value.device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(value.device)
    return str(getattr(value, "device", "cpu")).lower()


def environment(backend, threads, cold, sync=False, gpu=False):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    if not gpu:
        env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    if threads:
        env.update(
            TF_NUM_INTRAOP_THREADS=str(threads),
            TF_NUM_INTEROP_THREADS=str(threads),
            OMP_NUM_THREADS=str(threads),
            KERAS_TFM_BENCH_THREADS=str(threads),
        )
        if backend == "jax" and threads == 1:
            env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
    if sync and backend == "torch":
        env["KERAS_TFM_TORCH_COMPILE"] = "sync"
    if cold and backend == "torch":
        env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
    return env


def run_worker(backend, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker", backend, "--reps", str(args.reps)]
    command += ["--no-hub"] * args.no_hub + ["--eager"] * args.eager
    proc = subprocess.run(
        command,
        env=environment(backend, args.threads, args.cold, args.sync, args.gpu),
        capture_output=True,
        text=True,
        check=False,
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode:
        rows.append(
            dict(backend=backend, name="worker", batch=0, error=proc.stderr.strip().splitlines()[-1:])
        )
    return rows


def table(rows, emit):
    ok = [r for r in rows if "error" not in r]
    jax = {r["batch"]: r for r in ok if r["backend"] == "jax"}
    hub = {r["batch"]: r for r in ok if r["name"].startswith("keras_hub")}
    emit(
        f"{'backend':<11} {'implementation':<23} {'batch':>5} {'first s':>8} {'second s':>8} {'ready s':>8} "
        f"{'run s':>8} "
        f"{'tokens/s':>9} "
        f"{'JAX/this':>8} {'this/hub':>8} {'tokens':>8} {'load':>5}"
    )
    for batch in BATCHES:
        for r in (r for r in ok if r["batch"] == batch):
            tps = batch * NEW / r["median"]
            vs_jax = f"{r['median'] / jax[batch]['median']:.2f}x" if batch in jax else "-"
            vs_hub = f"{hub[batch]['median'] / r['median']:.1f}x" if batch in hub else "-"
            ready = "-" if r.get("ready") is None else f"{r['ready']:.1f}"
            second = "-" if r.get("second") is None else f"{r['second']:.2f}"
            emit(
                f"{r['backend']:<11} {r['name']:<23} {batch:>5} {r['first']:>8.2f} {second:>8} {ready:>8} "
                f"{r['median']:>8.3f} "
                f"{tps:>9.0f} {vs_jax:>8} {vs_hub:>8} {r['tokens']:>8} {r['load']:>5.1f}"
            )
    for r in rows:
        if "error" in r:
            emit(f"# {r['backend']} {r['name']} batch {r['batch']} failed: {r['error']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument(
        "--threads", type=int, default=0, help="intra-op threads of every backend (0: defaults)"
    )
    parser.add_argument("--gpu", action="store_true", help="JAX and PyTorch on the GPU (JAX: else CPU)")
    parser.add_argument("--cold", action="store_true", help="PyTorch with an empty inductor cache")
    parser.add_argument("--sync", action="store_true", help="PyTorch compiles in the calling thread")
    parser.add_argument("--eager", action="store_true", help="also the uncompiled PyTorch row (slow)")
    parser.add_argument("--no-hub", action="store_true", help="skip the KerasHub row")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--output", default=os.path.join(HERE, "results_generate_backends.txt"))
    args = parser.parse_args(argv)
    if args.worker:
        threads = int(os.environ.get("KERAS_TFM_BENCH_THREADS", "0"))
        if threads and args.worker == "torch":
            import torch

            torch.set_num_threads(threads)
        return worker(args.worker, args.reps, not args.no_hub, args.eager)

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    emit(
        f"# keras_tfm generation per backend ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); tiny GPT "
        f"({LAYERS} layers, d_model {D_MODEL}), prompt {PROMPT} -> {NEW} new tokens, greedy; median of "
        f"{args.reps} after the first call; {os.cpu_count()} CPUs; threads {args.threads or 'default'}; "
        f"inductor cache {'cold' if args.cold else 'as found'}; PyTorch compiles "
        f"{'in the calling thread' if args.sync else 'in the background'}"
    )
    rows = []
    for backend in args.backends.split(","):
        emit(f"# {backend}: load average {os.getloadavg()[0]:.2f} at start")
        new = run_worker(backend, args)
        emit(f"# {backend}: device {', '.join(r['device'] for r in new if 'device' in r) or 'unknown'}")
        rows += [r for r in new if "device" not in r]
    emit()
    table(rows, emit)
    with open(args.output + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(args.output + ".tmp", args.output)
    print(f"saved {args.output}")


if __name__ == "__main__":
    sys.exit(main())
