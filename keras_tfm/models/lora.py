"""LoRA fine-tuning of any keras_tfm model: `model.enable_lora(rank)`, `model.merge_lora()`.

Low-rank adaptation (Hu et al. 2021) freezes a pretrained projection `W` and
learns a low-rank update:

    h = x (W + (α / r) · A B),      A: (d_in, r),  B: (r, d_out),  B₀ = 0

Keras's own `Dense.enable_lora(rank)` / `EinsumDense.enable_lora(rank)` add
`A` (`lora_kernel_a`) and `B` (`lora_kernel_b`) to a layer and freeze its
kernel; this module picks the layers of a model (through its block attributes:
`encoder_blocks` / `decoder_blocks`, each block's `self_attention_layer`,
`cross_attention_layer` and `feed_forward`, never layer names), freezes every
other weight, and folds the update back into the kernels for export.

Saving: Keras stores a LoRA layer's *merged* kernel `W + (α/r)·A·B` and zeroes
`A`, `B` on load. The model's config records the LoRA options, so a loaded
model has LoRA enabled again, and its `lora_weights` attribute (a weightless
`LoraWeights` layer, restored after the projections) stores `A`, `B` and puts
back `W`, so the loaded model continues training exactly where it stopped.
"""

import keras
import numpy as np
from keras import ops

from keras_tfm.checks import check_choice, check_positive_float, check_positive_int
from keras_tfm.resources import check_allocation

#: Names of the projections LoRA can adapt, and where they live in a block.
ATTENTION_TARGETS = {
    "query": "query_dense",
    "key": "key_dense",
    "value": "value_dense",
    "attention_output": "output_dense",
}
FEED_FORWARD_TARGETS = {"ffn_inner": "inner_dense", "ffn_gate": "gate_dense", "ffn_output": "output_dense"}
TARGETS = tuple(ATTENTION_TARGETS) + tuple(FEED_FORWARD_TARGETS)
DEFAULT_TARGET = ("query", "value")


def check_target(target):
    """`target` as a tuple of known projection names (a str is one name)."""
    if isinstance(target, str):
        target = (target,)
    if not isinstance(target, (tuple, list)) or not target:
        raise ValueError(
            f"`target` must be a non-empty tuple of names from {list(TARGETS)}; received {target!r}."
        )
    return tuple(check_choice("target", name, TARGETS) for name in target)


def model_blocks(model):
    """The `TransformerBlock`s of a keras_tfm model (encoder, then decoder)."""
    blocks, seen = [], set()
    for attribute in ("encoder_blocks", "decoder_blocks"):
        for block in getattr(model, attribute, None) or []:
            if id(block) not in seen:
                seen.add(id(block))
                blocks.append(block)
    if not blocks:
        raise TypeError(
            f"{type(model).__name__} exposes no `encoder_blocks` / `decoder_blocks`: "
            "LoRA needs a keras_tfm model (GPT, BertEncoder and its heads, Seq2Seq, ViT)."
        )
    return blocks


def projections(model):
    """`(target name, layer)` for every LoRA-able projection of `model`, block
    by block: self-attention, cross-attention, then the feed-forward."""
    pairs = []
    for block in model_blocks(model):
        for attention in (block.self_attention_layer, block.cross_attention_layer):
            if attention is not None:
                pairs += [(name, getattr(attention, attr)) for name, attr in ATTENTION_TARGETS.items()]
        for name, attr in FEED_FORWARD_TARGETS.items():
            layer = getattr(block.feed_forward, attr)
            if layer is not None:
                pairs.append((name, layer))
    return pairs


def target_layers(model, target):
    """The Dense/EinsumDense layers named by `target` (order of `projections`)."""
    target = check_target(target)
    layers = [layer for name, layer in projections(model) if name in target]
    found = {name for name, _ in projections(model)}
    missing = [name for name in target if name not in found]
    if missing:
        raise ValueError(
            f"`target` {missing} matches no layer of this {type(model).__name__} "
            "(e.g. 'ffn_gate' needs a gated activation such as 'swiglu')."
        )
    return layers


def lora_options(rank, target, alpha):
    """Checked LoRA options as the JSON-friendly dict stored in the model config."""
    rank = check_positive_int("rank", rank)
    alpha = float(rank) if alpha is None else check_positive_float("alpha", alpha)
    return {"rank": rank, "target": list(check_target(target)), "alpha": alpha}


def enable_lora(model, rank, target=DEFAULT_TARGET, alpha=None):
    """Adds LoRA to the `target` projections of `model`; every other weight is frozen.

    Args:
        model: a keras_tfm model (built; GPT, BertEncoder / heads, Seq2Seq, ViT).
        rank: LoRA rank `r` (positive int).
        target: projection names from `TARGETS` ("query", "key", "value",
            "attention_output", "ffn_inner", "ffn_gate", "ffn_output"), in
            self- and cross-attention alike.
        alpha: scale numerator `α` (update = (α/r)·A·B); default `rank`.

    Returns:
        The checked options dict (`rank`, `target`, `alpha`).

    Raises:
        ValueError / TypeError: bad rank, alpha or target name, a target with
            no layer in this model, LoRA already enabled, a quantized target.
    """
    options = lora_options(rank, target, alpha)
    if lora_enabled(model):
        raise ValueError("LoRA is already enabled on this model; call `merge_lora()` first to add another.")
    layers = target_layers(model, options["target"])
    quantized = [layer.path for layer in layers if layer.quantization_mode is not None]
    if quantized:
        raise ValueError(f"LoRA on quantized layers is not supported; quantized targets: {quantized}.")
    # A: kernel.shape[:-1] + (r,), B: (r, kernel.shape[-1]), float32.
    sizes = [int(np.prod(layer.kernel.shape[:-1])) + int(layer.kernel.shape[-1]) for layer in layers]
    check_allocation(
        f"`rank`={options['rank']} on {len(layers)} layers (the LoRA matrices A and B)",
        options["rank"] * sum(sizes) * 4,
    )
    for layer in model.layers:
        layer.trainable = False  # recursive: every variable of the model
    for layer in layers:
        layer.trainable = True
        layer.enable_lora(options["rank"], lora_alpha=options["alpha"])
        if layer.bias is not None:
            layer.bias.trainable = False  # only A and B train
    return options


def lora_enabled(model):
    """Whether any projection of `model` has LoRA enabled."""
    return any(layer.lora_enabled for _, layer in projections(model))


def merge_lora(model, target):
    """Folds `W + (α/r)·A·B` into each `target` layer's kernel and turns LoRA
    off there (the layer's call is then the plain `x·W + b`); every weight is
    trainable again. `A` and `B` stay as unused zero variables of the layers
    (Keras cannot drop a variable), so a saved merged model holds no LoRA.
    A ValueError (nothing changed) when a LoRA layer is quantized.
    """
    quantized = [
        f"{layer.path} ({layer.quantization_mode})"
        for layer in target_layers(model, target)
        if layer.lora_enabled and layer.quantization_mode is not None
    ]
    if quantized:
        raise ValueError(
            f"merge_lora() cannot fold LoRA into quantized kernels; quantized LoRA layers: {quantized}. "
            "Merge before `quantize()`: `merge_lora()`, then `quantize(mode)` (the quantized model with "
            "LoRA unmerged computes correctly as it is)."
        )
    for layer in target_layers(model, target):
        if not layer.lora_enabled:
            continue
        merged = ops.convert_to_numpy(layer.kernel)  # Keras's kernel property: W + (α/r)·A·B
        layer.lora_enabled = False  # now `layer.kernel` is the kernel variable itself
        layer.kernel.assign(merged)
        for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
            variable.assign(ops.zeros(variable.shape, variable.dtype))
            variable.trainable = False
    for layer in model.layers:
        layer.trainable = True
    for layer in target_layers(model, target):
        for variable in (getattr(layer, "lora_kernel_a", None), getattr(layer, "lora_kernel_b", None)):
            if variable is not None:
                variable.trainable = False


@keras.saving.register_keras_serializable(package="keras_tfm")
class LoraWeights(keras.layers.Layer):
    """Saves and restores the LoRA matrices `A`, `B` of a model's projections.

    A weightless layer kept as the model's `lora_weights` attribute. Keras
    restores it after the model's layers (whose LoRA matrices it has just set to
    zero while loading their merged kernels), so it writes `A`, `B` back and
    replaces each merged kernel by `W = merged − (α/r)·A·B`.

    Args:
        layers: the LoRA-enabled Dense / EinsumDense layers (in a fixed order).
    """

    def __init__(self, layers=(), **kwargs):
        super().__init__(**kwargs)
        # A plain tuple (not tracked): the layers belong to the model.
        object.__setattr__(self, "adapted_layers", tuple(layers))
        self.built = True

    def save_own_variables(self, store):
        for i, layer in enumerate(self.adapted_layers):
            store[f"{i}_a"] = ops.convert_to_numpy(layer.lora_kernel_a)
            store[f"{i}_b"] = ops.convert_to_numpy(layer.lora_kernel_b)

    def load_own_variables(self, store):
        if len(store) != 2 * len(self.adapted_layers):
            raise ValueError(
                f"The file holds LoRA matrices for {len(store) // 2} layers; this model has "
                f"{len(self.adapted_layers)} LoRA layers."
            )
        for i, layer in enumerate(self.adapted_layers):
            a, b = np.asarray(store[f"{i}_a"]), np.asarray(store[f"{i}_b"])
            merged = ops.convert_to_numpy(layer.kernel)  # A = B = 0 now: the stored merged kernel
            layer.lora_kernel_a.assign(a)
            layer.lora_kernel_b.assign(b)
            delta = ops.convert_to_numpy(layer.kernel) - merged  # (α/r)·A·B
            layer.lora_enabled = False
            layer.kernel.assign(merged - delta)
            layer.lora_enabled = True
