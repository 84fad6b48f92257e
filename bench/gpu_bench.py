"""GPU bench on the JAX backend: keras_tfm GPT training speed and MFU, a PyTorch peer, generation tokens/s.

`bench/gpu.sh` runs this on a GPU machine with JAX (CUDA) and PyTorch but no TensorFlow; with `--cpu`
it runs a tiny configuration on the CPU (what the tests run). Needs KERAS_BACKEND=jax (gpu.sh sets it).

Rows:
  * keras_tfm   `keras_tfm.models.gpt` under the dtype policy (mixed_bfloat16 by default), compiled
                with XLA (`jit_compile=True`), trained with `model.fit` on in-memory token batches,
                `steps_per_execution` steps per compiled call; attention_impl="fused"
                (`keras.ops.dot_product_attention`: cuDNN flash attention on a JAX GPU) when
                keras_tfm registers it, else its default ("auto"); the row says which.
  * torch       the same GPT (pre-norm, GELU-tanh, learned positions, tied head) in PyTorch with
                bf16 autocast, `scaled_dot_product_attention(is_causal=True)` (FlashAttention on
                an H100), fused AdamW, `torch.compile` unless --no-torch-compile.
  * sharded     the keras_tfm row on every device JAX sees, under `keras.distribution.ModelParallel`
                with `GPT.get_layout_map` on a (N / M) × M mesh (M = the largest divisor of N
                that divides the heads: Megatron split over M devices, the batch over N / M);
                MFU against N times the peak. Skipped, with the reason, on one device.
  * generation  keras_tfm's cached generation when `keras_tfm.generation` runs on this backend,
                else greedy decoding that recomputes the whole (fixed-size) window per token
                inside one `jax.jit` loop (labelled "uncached").

FLOPs per training step: 6·N·tokens + 12·L·T·d·tokens (N = 12·L·d² + d·V: block and output
projection parameters; the second term is attention's QKᵀ and AV, counted in full as in nanoGPT
and the PaLM paper's MFU), forward + backward. MFU divides the achieved FLOP/s by the dense bf16
peak measured in the same run (a large `jnp.dot`, best of several).
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from _common import compile_lm, keras_tfm_gpt, step_flops, torch_gpt_trainer  # noqa: E402

CONFIGS = {
    # CPU smoke size: seconds on 2 cores.
    "tiny": dict(num_layers=1, num_heads=2, d_model=32, seq_len=32, batch=4, vocab=65),
    # bench/train_speed.py's medium GPT, with a GPU-sized batch.
    "medium": dict(num_layers=6, num_heads=6, d_model=384, seq_len=256, batch=64, vocab=65),
    # GPT-2 small's shape at T = 1024 (vocab padded to 50304 as in nanoGPT).
    "large": dict(num_layers=12, num_heads=12, d_model=768, seq_len=1024, batch=16, vocab=50304),
}


def matmul_peak(n, dtype="bfloat16", repeats=10):
    """Measured dense matmul FLOP/s of an n×n·n×n `jnp.dot` in `dtype` (best of `repeats`)."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (n, n), jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.split(key)[0], (n, n), jnp.float32).astype(dtype)
    dot = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
    dot(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        dot(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def fused_attention_impl():
    """keras_tfm's fused (flash) attention implementation if registered, else "auto"."""
    from keras_tfm.layers import ATTENTION_IMPLS

    return "fused" if "fused" in ATTENTION_IMPLS else "auto"


def keras_runner(c, data, policy, attention_impl, steps_per_execution):
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        model = keras_tfm_gpt(c, attention_impl=attention_impl)
    finally:
        keras.config.set_dtype_policy("float32")
    compile_lm(model, jit_compile=True, steps_per_execution=steps_per_execution)
    x, y = data
    batch = c["batch"]
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)  # compile + warm up

    def run():
        t = time.perf_counter()
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)  # ends with a host sync
        return (time.perf_counter() - t) / (len(x) // batch)

    return model, run


def sharded_runner(c, data, policy, attention_impl, steps_per_execution):
    """`(run, label)` of the keras_tfm row under ModelParallel on all devices, or `(None, reason)`."""
    devices = keras.distribution.list_devices()
    n = len(devices)
    if n < 2:
        return None, f"skipped: one device ({devices[0]}); the sharded run needs several"
    model_devices = max(m for m in range(1, n + 1) if n % m == 0 and c["num_heads"] % m == 0)
    if c["batch"] % (n // model_devices):
        return None, f"skipped: batch {c['batch']} does not split over {n // model_devices} data devices"
    from keras_tfm.models import GPT

    mesh = keras.distribution.DeviceMesh((n // model_devices, model_devices), ("batch", "model"), devices)
    distribution = keras.distribution.ModelParallel(
        layout_map=GPT.get_layout_map(mesh), batch_dim_name="batch"
    )
    with distribution.scope():
        _, run = keras_runner(c, data, policy, attention_impl, steps_per_execution)
    return (
        run,
        f"keras_tfm GPT, ModelParallel on a {n // model_devices} x {model_devices} mesh of {n} devices",
    )


def torch_runner(c, data, compile_model):
    """The same GPT in PyTorch: bf16 autocast on CUDA, SDPA (flash), fused AdamW, torch.compile."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    batch = c["batch"]
    batches = tuple(a.reshape(-1, batch, a.shape[-1]) for a in data)
    step, n = torch_gpt_trainer(
        c, batches, device=device, tied_head=True, gelu="tanh", compile_model=compile_model
    )
    for i in range(min(3, n)):
        step(i)
    if device == "cuda":
        torch.cuda.synchronize()

    def run():
        t = time.perf_counter()
        for i in range(n):
            loss = step(i)
        float(loss.detach())  # host sync
        return (time.perf_counter() - t) / n

    info = f"torch {torch.__version__} on {device}, {'torch.compile' if compile_model else 'eager'}"
    return run, info


def generation_tokens_per_second(model, c, batch, new_tokens, reps):
    """(tokens/s, label) of greedy generation with `model`."""
    prompt_len = max(1, c["seq_len"] // 4)
    new_tokens = min(new_tokens, c["seq_len"] - prompt_len)
    rng = np.random.default_rng(0)
    prompts = rng.integers(1, c["vocab"], (batch, prompt_len)).astype("int32")
    try:
        from keras_tfm import generation

        def run():
            out = generation.generate(model, prompts.tolist(), max_new_tokens=new_tokens, sampler="greedy")
            return np.asarray(keras.ops.convert_to_numpy(out))

        label = "cached (keras_tfm.generation)"
    except (ImportError, RuntimeError):
        import jax
        import jax.numpy as jnp

        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        @jax.jit
        def decode(trainable, non_trainable, buffer):
            def body(t, buf):
                logits, _ = model.stateless_call(trainable, non_trainable, buf, training=False)
                token = jnp.argmax(logits[:, t - 1, :], axis=-1).astype(buf.dtype)
                return buf.at[:, t].set(token)

            return jax.lax.fori_loop(prompt_len, prompt_len + new_tokens, body, buffer)

        buffer = jnp.zeros((batch, c["seq_len"]), "int32").at[:, :prompt_len].set(prompts)

        def run():
            return np.asarray(decode(trainable, non_trainable, buffer))

        label = f"uncached (window {c['seq_len']} recomputed per token, one jax.jit loop)"
    run()  # compile
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return batch * new_tokens / statistics.median(times), label


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu", action="store_true", help="tiny CPU run (smoke test; what the tests run)")
    p.add_argument("--configs", nargs="+", default=None, choices=sorted(CONFIGS))
    p.add_argument("--policy", default="mixed_bfloat16")
    p.add_argument("--steps", type=int, default=None, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--steps-per-execution", type=int, default=10)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-torch-compile", action="store_true")
    p.add_argument("--gen-batch", type=int, default=None)
    p.add_argument("--gen-tokens", type=int, default=None)
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)

    if keras.backend.backend() != "jax":
        sys.exit(f"gpu_bench runs on the JAX backend (KERAS_BACKEND=jax); got {keras.backend.backend()!r}.")
    import jax

    device = jax.devices()[0]
    if not args.cpu and device.platform != "gpu":
        sys.exit(f"No GPU visible to JAX (devices: {jax.devices()}); use --cpu for the CPU smoke run.")
    configs = args.configs or (["tiny"] if args.cpu else ["medium", "large"])
    steps = args.steps or (4 if args.cpu else 50)
    rounds = args.rounds or (1 if args.cpu else 3)
    spe = min(args.steps_per_execution, steps)
    gen_batch = args.gen_batch or (2 if args.cpu else 8)
    gen_tokens = args.gen_tokens or (8 if args.cpu else 128)

    peak = matmul_peak(256 if args.cpu else 8192)
    results = {
        "device": str(getattr(device, "device_kind", device)),
        "platform": device.platform,
        "jax": jax.__version__,
        "keras": keras.version(),
        "policy": args.policy,
        "bf16_matmul_peak_tflops": peak / 1e12,
        "configs": {},
    }
    print(
        f"device {results['device']} ({device.platform}); jax {jax.__version__}, keras {keras.version()}; "
        f"measured bf16 matmul peak {peak / 1e12:.1f} TFLOP/s",
        flush=True,
    )
    impl = fused_attention_impl()
    for name in configs:
        c = CONFIGS[name]
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, c["vocab"], (steps * c["batch"], c["seq_len"] + 1)).astype("int32")
        data = (tokens[:, :-1], tokens[:, 1:])
        runners, rows = {}, {}
        t = time.perf_counter()
        model, runners["keras_tfm"] = keras_runner(c, data, args.policy, impl, spe)
        print(f"[{name}] keras_tfm built + compiled in {time.perf_counter() - t:.1f} s", flush=True)
        labels = {"keras_tfm": f"keras_tfm GPT, jax.jit, {args.policy}, attention_impl={impl!r}"}
        if not args.no_torch:
            try:
                t = time.perf_counter()
                compile_torch = not (
                    args.no_torch_compile or args.cpu
                )  # torch.compile takes minutes on a CPU
                runners["torch"], labels["torch"] = torch_runner(c, data, compile_torch)
                print(f"[{name}] torch ready in {time.perf_counter() - t:.1f} s", flush=True)
            except ImportError:
                print(f"[{name}] torch: not installed; not measured", flush=True)
        run, labels["sharded"] = sharded_runner(c, data, args.policy, impl, spe)
        if run is None:
            print(f"[{name}] sharded: {labels['sharded']}", flush=True)
            rows["sharded"] = {"what": labels["sharded"]}
        else:
            runners["sharded"] = run
        times = {k: [] for k in runners}
        for _ in range(rounds):
            for key, run in runners.items():
                times[key].append(run())
        flops, tok = step_flops(c), c["batch"] * c["seq_len"]
        print(
            f"\n[{name}] {c}: {flops / 1e12:.3f} TFLOP per step; median of {rounds} rounds of {steps} steps"
        )
        print(f"{'row':10s} {'ms/step':>9s} {'tokens/s':>11s} {'MFU':>7s}  what")
        for key, ts in times.items():
            med = statistics.median(ts)
            scale = len(keras.distribution.list_devices()) if key == "sharded" else 1  # peak of all devices
            rows[key] = {
                "ms_per_step": med * 1e3,
                "tokens_per_s": tok / med,
                "mfu": flops / med / (peak * scale),
                "what": labels[key],
            }
            print(
                f"{key:10s} {med * 1e3:9.2f} {tok / med:11.0f} {flops / med / peak / scale:7.1%}  {labels[key]}"
            )
        gen_tps, gen_label = generation_tokens_per_second(model, c, gen_batch, gen_tokens, reps=rounds + 1)
        rows["generation"] = {"tokens_per_s": gen_tps, "batch": gen_batch, "what": gen_label}
        print(f"{'generate':10s} {'':9s} {gen_tps:11.0f} {'':7s}  greedy, batch {gen_batch}, {gen_label}\n")
        results["configs"][name] = {"config": c, "step_tflop": flops / 1e12, "rows": rows}
        del model
    if args.json:
        tmp = args.json + ".part"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, args.json)
    return results


if __name__ == "__main__":
    main()
