"""`memory_plan`: the bytes per device of one training step, before building anything.

For N devices and each layout of `get_layout_map` (`keras_tfm.models.layout`):

    layout  mesh (data × model)   weights                       batch per device
    "data"  N × 1                 replicated (DataParallel)     ⌈batch / N⌉
    "model" N/M × M               Megatron split over M         ⌈batch / (N/M)⌉
    "full"  N/M × M               Megatron over M, d_model over N/M (FSDP)   ⌈batch / (N/M)⌉

with M = `model_devices` (default min(N, 8): tensor parallelism inside one 8-accelerator host).
A variable split into k parts (`layout.shard_count`: the product of the devices along its split
axes; a dimension an axis does not divide stays whole, as in `get_layout_map`) costs its bytes / k.

    parameters  Σ_v bytes(v) / k_v                      every variable (frozen ones included)
    gradients   Σ_{v trainable} bytes(v) / k_v          same layout as the variable
    optimizer   slots · gradients + 8                   slots: adamw/adam 2 (m, v), sgd 0;
                                                        + the iteration and learning-rate scalars
    activations c · b · s · L · (4·d + 2·H·d_h/M_h + 2·G·d_h/M_g + 2·H·s/M_h + k_f·d_ff/M_f)
                + 4 · b · s · 6·V/M_V  +  c · b · s · 2·d
        the tensors a block keeps for its backward pass, per token: its input, two norm outputs
        and the attention residual (4·d), queries and context (2·H·d_h), keys and values
        (2·G·d_h), attention scores and probabilities (2·H·s: standard attention), the FFN's
        pre-activation, activation and its intermediate (k_f = 3; gated: 6 with the gate and
        the product); then the float32 logits with their softmax and gradients (6·V) and the
        embedding output with its gradient (2·d). The coefficients are fitted to the compiled
        step (XLA's buffer assignment of `jax.jit(step).lower(...).compile()` on CPU, float32,
        GPT-2 and Llama layouts); `tests/distribution_cases.py` holds the total to it (20 %).
        c: compute-dtype bytes, b: batch per device, s: max_length, L: blocks; M_h / M_g /
        M_f / M_V: the model devices where heads / key-value heads / d_ff / vocabulary divide,
        else 1. `remat=True` keeps each block's input (d per token and block) plus one
        block's tensors.

`lora_rank` adds LoRA's A and B to the query and value projections (Keras's shapes: A = kernel
shape[:-1] + (r,), B = (r, d_h)) and freezes everything else: gradients and optimizer state
then cover A and B only. `precision`: "float32", "mixed_bfloat16" / "mixed_float16" (float32
variables, 2-byte activations), "bfloat16" / "float16" (2-byte variables and activations).
The total is the sum of the four terms (no allocator slack, no fragmentation, no input pipeline).
"""

import dataclasses
import math

from keras_tfm.checks import check_choice, check_positive_int
from keras_tfm.models import layout
from keras_tfm.models.param_counts import gpt_options, gpt_variable_shapes

#: precision → (variable bytes, activation bytes).
PRECISIONS = {
    "float32": (4, 4),
    "mixed_bfloat16": (4, 2),
    "mixed_float16": (4, 2),
    "bfloat16": (2, 2),
    "float16": (2, 2),
}
#: Optimizer state per trainable variable, in copies of it.
OPTIMIZER_SLOTS = {"adamw": 2, "adam": 2, "sgd": 0}
#: The optimizer's scalars: its iteration count (int32) and learning rate (float32).
OPTIMIZER_SCALARS = 8
LAYOUTS = ("data", "model", "full")
LORA_TARGETS = ("query", "value")


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Bytes per device of one training step in one layout.

    Attributes:
        layout: "data", "model" or "full".
        mesh: (data devices, model devices).
        batch_per_device: examples each device computes.
        parameters, gradients, optimizer, activations: bytes per device (module docstring).
    """

    layout: str
    mesh: tuple[int, int]
    batch_per_device: int
    parameters: int
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        """parameters + gradients + optimizer + activations."""
        return self.parameters + self.gradients + self.optimizer + self.activations

    def fits(self, device_bytes: float) -> bool:
        """Whether the total fits a device of `device_bytes`."""
        return self.total <= device_bytes


@dataclasses.dataclass(frozen=True)
class _Variable:
    path: str
    shape: tuple
    itemsize: int
    trainable: bool


def _lora_variables(variables, rank):
    """LoRA's A, B for the query and value kernels of `variables`; every other variable frozen."""
    out = [dataclasses.replace(v, trainable=False) for v in variables]
    for v in variables:
        parts = v.path.rsplit("/", 2)
        if len(parts) == 3 and parts[1] in LORA_TARGETS and parts[2] == "kernel" and "attention" in parts[0]:
            base = v.path[: -len("kernel")]
            out.append(_Variable(base + "lora_kernel_a", v.shape[:-1] + (rank,), v.itemsize, True))
            out.append(_Variable(base + "lora_kernel_b", (rank, v.shape[-1]), v.itemsize, True))
    return out


def _describe(preset_or_model, variable_bytes):
    """(variables, sizes, architecture dict) of a GPT preset name or a built keras_tfm model."""
    if isinstance(preset_or_model, str):
        o = gpt_options(preset_or_model)
        key_dim = o["key_dim"] or o["d_model"] // o["num_heads"]
        variables = [_Variable(p, s, variable_bytes, True) for p, s in gpt_variable_shapes(preset_or_model)]
        sizes = layout.model_sizes(
            o["d_model"], o["num_heads"], o["d_ff"], o["num_key_value_heads"], o["vocabulary_size"]
        )
        arch = dict(layers=o["num_layers"], key_dim=key_dim, gated=o["activation"] in ("swiglu", "geglu"))
        arch["max_length"] = o["max_length"]
        return variables, sizes, arch
    sizes = getattr(preset_or_model, "_layout_sizes", None)
    if sizes is None:
        raise TypeError(
            "`preset_or_model` must be a gpt preset name or a keras_tfm model (GPT, BertEncoder and its "
            f"tasks, Seq2Seq, ViT); received {type(preset_or_model).__name__}."
        )
    variables = [
        _Variable(v.path, tuple(v.shape), _itemsize(v.dtype), v.trainable) for v in preset_or_model.weights
    ]
    blocks = {v.path.split("/")[0] for v in variables if "_block_" in v.path.split("/")[0]}
    key_dim = next(v.shape[-1] for v in variables if v.path.endswith("query/kernel"))
    gated = any(v.path.endswith("feed_forward/gate/kernel") for v in variables)
    arch = dict(layers=len(blocks), key_dim=key_dim, gated=gated)
    arch["max_length"] = getattr(preset_or_model, "max_length", None)  # ViT: none (its patches)
    return variables, sizes, arch


def _itemsize(dtype):
    return {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}.get(str(dtype), 4)


def _split(size, devices):
    return devices if size and size % devices == 0 else 1


def _activations(sizes, arch, batch, max_length, compute_bytes, model_devices, remat):
    d, heads, kv, d_ff = sizes["d_model"], sizes["num_heads"], sizes["num_key_value_heads"], sizes["d_ff"]
    dh, s = arch["key_dim"], max_length
    per_token = (
        4 * d
        + (2 * heads * dh + 2 * heads * s) / _split(heads, model_devices)
        + 2 * kv * dh / _split(kv, model_devices)
        + (6 if arch["gated"] else 3) * d_ff / _split(d_ff, model_devices)
    )
    tokens = batch * max_length
    layers = arch["layers"]
    blocks = compute_bytes * tokens * (layers * per_token if not remat else layers * d + per_token)
    vocabulary = sizes.get("output_vocabulary") or 0
    logits = 4 * 6 * tokens * vocabulary / _split(vocabulary, model_devices)
    return int(blocks + logits + compute_bytes * tokens * 2 * d)


def memory_plan(
    preset_or_model,
    devices: int = 1,
    batch: int = 8,
    max_length: int = 1024,
    precision: str = "mixed_bfloat16",
    optimizer: str = "adamw",
    lora_rank: int | None = None,
    remat: bool = False,
    model_devices: int | None = None,
) -> dict[str, MemoryPlan]:
    """Bytes per device of one training step for the data-, model- and fully-sharded layouts.

    Args:
        preset_or_model: a `gpt` preset name ("gpt2_medium", "llama2_7b", ...; nothing is
            built) or a built keras_tfm model (its variables, LoRA included).
        devices: accelerators N.
        batch: the global batch (examples per step).
        max_length: tokens per example, at most the model's `max_length`.
        precision: "float32", "mixed_bfloat16", "mixed_float16", "bfloat16" or "float16".
            A built model's variables count with their own dtype.
        optimizer: "adamw", "adam" or "sgd".
        lora_rank: LoRA rank on the query and value projections (everything else frozen); None
            for full fine-tuning (a built model with LoRA enabled counts as it is).
        remat: rematerialise each block in the backward pass (keep only block inputs).
        model_devices: M, the model axis of the "model" and "full" layouts; must divide
            `devices` (default min(devices, 8)).

    Returns:
        {"data": MemoryPlan, "model": MemoryPlan, "full": MemoryPlan} (formulas: module
        docstring).

    Raises:
        ValueError / TypeError: an unknown preset, precision or optimizer, a size that is not a
        positive int, `model_devices` not dividing `devices`, a `max_length` beyond the
        model's `max_length`.
    """
    devices = check_positive_int("devices", devices)
    batch = check_positive_int("batch", batch)
    max_length = check_positive_int("max_length", max_length)
    check_choice("precision", precision, list(PRECISIONS))
    check_choice("optimizer", optimizer, list(OPTIMIZER_SLOTS))
    check_positive_int("lora_rank", lora_rank, allow_none=True)
    if not isinstance(remat, bool):
        raise TypeError(f"`remat` must be a bool; received {remat!r}.")
    model_devices = (
        min(devices, 8) if model_devices is None else check_positive_int("model_devices", model_devices)
    )
    if devices % model_devices:
        raise ValueError(f"`model_devices` must divide `devices`={devices}; received {model_devices}.")
    variable_bytes, compute_bytes = PRECISIONS[precision]
    variables, sizes, arch = _describe(preset_or_model, variable_bytes)
    if arch["max_length"] is not None and max_length > arch["max_length"]:
        described = repr(preset_or_model) if isinstance(preset_or_model, str) else "the model"
        raise ValueError(
            f"`max_length`={max_length} exceeds the model's max_length {arch['max_length']} "
            f"({described} has {arch['max_length']} positions)."
        )
    if lora_rank is not None and not any("lora_kernel" in v.path for v in variables):
        variables = _lora_variables(variables, lora_rank)
    meshes = {"data": (devices, 1), "model": (devices // model_devices, model_devices)}
    meshes["full"] = meshes["model"]
    plans = {}
    for name in LAYOUTS:
        data_devices, tensor_devices = meshes[name]
        parameters = gradients = 0
        for v in variables:
            count = layout.shard_count(
                v.path, sizes, data_devices, tensor_devices, fully_sharded=name == "full"
            )
            share = math.prod(v.shape) * v.itemsize // count
            parameters += share
            gradients += share if v.trainable else 0
        per_device = -(-batch // data_devices)
        plans[name] = MemoryPlan(
            layout=name,
            mesh=(data_devices, tensor_devices),
            batch_per_device=per_device,
            parameters=parameters,
            gradients=gradients,
            optimizer=OPTIMIZER_SLOTS[optimizer] * gradients + OPTIMIZER_SCALARS,
            activations=_activations(
                sizes, arch, per_device, max_length, compute_bytes, tensor_devices, remat
            ),
        )
    return plans


__all__ = ["LAYOUTS", "OPTIMIZER_SLOTS", "PRECISIONS", "MemoryPlan", "memory_plan"]
