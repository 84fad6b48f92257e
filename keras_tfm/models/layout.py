"""Model parallelism with Keras's distribution API: the `LayoutMap` of a keras_tfm model.

`Model.get_layout_map(device_mesh)` (every model class; on the class or on a model) returns a
`keras.distribution.LayoutMap` for `keras.distribution.ModelParallel`. Megatron-style tensor
parallelism along the mesh's model axis (M devices): each projection pair splits so that the
activations between them stay split and one all-reduce joins them.

    weight (shape)                         split along the model axis
    token embedding E (V, d)               vocabulary rows (the tied output h Eᵀ: vocabulary columns)
    query / key / value kernel (d, H|G, d_h)   heads (column parallel; G key/value heads with GQA)
    attention output kernel (H, d_h, d)    heads (row parallel)
    FFN inner and gate kernels (d, d_ff)   columns (column parallel)
    FFN output kernel (d_ff, d)            rows (row parallel)
    untied head kernel (d, V)              vocabulary columns
    biases of split outputs                split to match (query/key/value, inner, gate, head, MLM bias)
    everything else                        replicated: norms, row-parallel output biases, position
                                           and segment embeddings, pooler, classifiers, patch projection

`fully_sharded=True` also splits the d_model dimension of those weights (and of the position and
segment embeddings, pooler, classifiers and patch projection) along the data axis (B devices):
ZeRO-3 / FSDP on top of the tensor parallelism, each device then holds 1/(B·M) of them. LoRA's
`A`, `B` follow their kernel: `A` of a row-parallel projection and `B` of a column-parallel one
are split like the kernel's split dimension. Optimizer slots take their variable's layout (Keras).

A split dimension that the mesh axis does not divide (the tiny presets' 2 key/value heads on 4
devices, MiniLM's 30522-token vocabulary on 8) is replicated along that axis instead, with a
`UserWarning` naming the variable: never JAX's indivisible-sharding error. The map checks the sizes
of the model it lays out: `model.get_layout_map(mesh)` knows them; a map from the class
(`GPT.get_layout_map(mesh)`) learns them when a keras_tfm model is constructed under the
distribution (each constructor calls `bind_sizes` before it creates a variable), so builders,
`from_pretrained` and `.keras` loading inside `distribution.scope()` create every variable in
its final layout. Only the JAX backend implements `ModelParallel`; this module uses
`keras.distribution` alone.
"""

import functools
import re
import warnings

import keras

#: A split dimension: (mesh axis role, the size that must divide). D: the d_model dimension,
#: split along the data axis only when fully sharded.
D = ("data", "d_model")


def _model(size_name):
    return ("model", size_name)


_P = r"(?:.*/)?"
_ATTENTION = _P + r"(?:self|cross)_attention/"
_FFN = _P + r"feed_forward/"

#: (variable path regex, per-dimension split: None or (role, size name)). The first full match
#: applies; a variable no rule matches is replicated.
RULES = (
    (_P + r"embedding/token_embedding/embeddings", (_model("vocabulary"), D)),
    (_P + r"encoder_embedding/token_embedding/embeddings", (_model("source_vocabulary"), D)),
    (_P + r"decoder_embedding/token_embedding/embeddings", (_model("target_vocabulary"), D)),
    (_P + r"(?:encoder_|decoder_)?embedding/position_embedding/embeddings", (None, D)),
    (_P + r"segment_embedding/embeddings", (None, D)),
    (_ATTENTION + r"query/kernel", (D, _model("num_heads"), None)),
    (_ATTENTION + r"(?:key|value)/kernel", (D, _model("num_key_value_heads"), None)),
    (_ATTENTION + r"query/bias", (_model("num_heads"), None)),
    (_ATTENTION + r"(?:key|value)/bias", (_model("num_key_value_heads"), None)),
    (_ATTENTION + r"query/lora_kernel_a", (D, _model("num_heads"), None)),
    (_ATTENTION + r"(?:key|value)/lora_kernel_a", (D, _model("num_key_value_heads"), None)),
    (_ATTENTION + r"attention_output/kernel", (_model("num_heads"), None, D)),
    (_ATTENTION + r"attention_output/lora_kernel_a", (_model("num_heads"), None, None)),
    (_ATTENTION + r"attention_output/lora_kernel_b", (None, D)),
    (_FFN + r"(?:inner|gate)/kernel", (D, _model("d_ff"))),
    (_FFN + r"(?:inner|gate)/bias", (_model("d_ff"),)),
    (_FFN + r"(?:inner|gate)/lora_kernel_a", (D, None)),
    (_FFN + r"(?:inner|gate)/lora_kernel_b", (None, _model("d_ff"))),
    (_FFN + r"output/kernel", (_model("d_ff"), D)),
    (_FFN + r"output/lora_kernel_a", (_model("d_ff"), None)),
    (_FFN + r"output/lora_kernel_b", (None, D)),
    (_P + r"lm_head/logits/kernel", (D, _model("output_vocabulary"))),
    (_P + r"lm_head/logits/bias", (_model("output_vocabulary"),)),
    (_P + r"mlm_output_bias/bias", (_model("vocabulary"),)),
    (_P + r"(?:pooler|mlm_transform_dense|classifier)/kernel", (D, None)),
    (_P + r"patch_embedding/projection/kernel", (None, None, None, D)),
)

#: The sizes a model binds (`model_sizes`); a rule's size name is one of them.
SIZE_NAMES = (
    "vocabulary",
    "source_vocabulary",
    "target_vocabulary",
    "output_vocabulary",
    "d_model",
    "num_heads",
    "num_key_value_heads",
    "d_ff",
)


def model_sizes(d_model, num_heads, d_ff, num_key_value_heads=None, vocabulary=None, **vocabularies):
    """The sizes a layout map checks for one model: d_model, heads, key/value heads (default
    `num_heads`), d_ff and the vocabularies (`vocabulary`, `source_vocabulary`,
    `target_vocabulary`, `output_vocabulary`; None for a model without one)."""
    sizes = dict(
        d_model=d_model,
        num_heads=num_heads,
        num_key_value_heads=num_key_value_heads or num_heads,
        d_ff=d_ff,
        vocabulary=vocabulary,
        source_vocabulary=vocabulary,
        target_vocabulary=vocabulary,
        output_vocabulary=vocabulary,
    )
    sizes.update(vocabularies)
    return sizes


class TransformerLayoutMap(keras.distribution.LayoutMap):
    """A `keras.distribution.LayoutMap` holding the keras_tfm rules (`RULES`), which falls back
    to replication along an axis that does not divide a split dimension (warning once per
    variable). Entries a user sets explicitly are returned as set."""

    def __init__(self, device_mesh, model_dim, data_dim, fully_sharded=False, sizes=None):
        super().__init__(device_mesh)
        self.model_dim, self.data_dim, self.fully_sharded = model_dim, data_dim, fully_sharded
        self._rules = {}
        for pattern, dims in RULES:
            self[pattern] = tuple(self._axis(dim) for dim in dims)
            self._rules[pattern] = dims
        self._sizes = None
        self._checked = {}
        if sizes is not None:
            self.bind(sizes)

    def _axis(self, dim):
        if dim is None or (dim[0] == "data" and not self.fully_sharded):
            return None
        return self.model_dim if dim[0] == "model" else self.data_dim

    def axis_size(self, axis_name) -> int:
        """Devices along the mesh axis `axis_name`."""
        mesh = self.device_mesh
        return int(mesh.shape[list(mesh.axis_names).index(axis_name)])

    @property
    def sizes(self) -> dict | None:
        """The bound model sizes (`model_sizes`), or None before a model binds them."""
        return None if self._sizes is None else dict(self._sizes)

    def bind(self, sizes: dict) -> None:
        """Checks later look-ups against `sizes` (from `model_sizes`)."""
        self._sizes = dict(sizes)
        self._checked = {}

    def __getitem__(self, key):
        layout = super().__getitem__(key)
        if layout is None or self._sizes is None:
            return layout
        if key not in self._checked:
            pattern = next((p for p in self._rules if re.fullmatch(p, key)), None)
            self._checked[key] = layout if pattern is None else self._checked_layout(key, pattern, layout)
        return self._checked[key]

    def _checked_layout(self, path, pattern, layout):
        axes = checked_axes(path, self._rules[pattern], layout.axes, self.axis_size, self._sizes, warn=True)
        if axes == tuple(layout.axes):
            return layout
        return keras.distribution.TensorLayout(axes, self.device_mesh)


def rule_for(path):
    """The per-dimension split of `RULES` for a variable path (None: no rule, replicated)."""
    return next((dims for pattern, dims in RULES if re.fullmatch(pattern, path)), None)


def checked_axes(path, dims, axes, axis_size, sizes, warn=False):
    """`axes` (a mesh axis name or None per dimension, from the rule `dims`) with every split
    dimension whose size (`sizes[name]`) the axis (`axis_size(axis)` devices) does not divide
    replaced by None; `warn` names the variable in a UserWarning for each."""
    axes = list(axes)
    for index, (axis, dim) in enumerate(zip(axes, dims)):
        if axis is None:
            continue
        size, devices = sizes.get(dim[1]), axis_size(axis)
        if size is not None and size % devices:
            if warn:
                warnings.warn(
                    f"get_layout_map: `{path}` dimension {index} ({dim[1]}={size}) is not divisible by the "
                    f"{axis!r} mesh axis ({devices} devices); it is replicated along {axis!r}.",
                    stacklevel=3,
                )
            axes[index] = None
    return tuple(axes)


def shard_count(path, sizes, data_devices, model_devices, fully_sharded=False):
    """Into how many parts `get_layout_map` splits the variable `path` on a (data, model) mesh of
    these sizes: the product of the devices along its split axes (1: replicated)."""
    dims = rule_for(path)
    if dims is None:
        return 1
    devices = {"data": data_devices, "model": model_devices}
    axes = tuple(None if d is None or (d[0] == "data" and not fully_sharded) else d[0] for d in dims)
    axes = checked_axes(path, dims, axes, devices.__getitem__, sizes)
    count = 1
    for axis in axes:
        count *= 1 if axis is None else devices[axis]
    return count


def _check_mesh(device_mesh, model_parallel_dim_name, data_parallel_dim_name):
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise TypeError(
            f"`device_mesh` must be a keras.distribution.DeviceMesh; received {type(device_mesh).__name__}."
        )
    names = list(device_mesh.axis_names)
    for argument, value in (
        ("model_parallel_dim_name", model_parallel_dim_name),
        ("data_parallel_dim_name", data_parallel_dim_name),
    ):
        if value not in names:
            raise ValueError(f"`{argument}` must be an axis of `device_mesh` {names}; received {value!r}.")
    if model_parallel_dim_name == data_parallel_dim_name:
        raise ValueError(
            f"`model_parallel_dim_name` and `data_parallel_dim_name` must differ; both are {model_parallel_dim_name!r}."
        )


def layout_map(
    sizes,
    device_mesh,
    model_parallel_dim_name: str = "model",
    data_parallel_dim_name: str = "batch",
    fully_sharded: bool = False,
) -> TransformerLayoutMap:
    """The `TransformerLayoutMap` on `device_mesh` (sizes bound when `sizes` is given)."""
    _check_mesh(device_mesh, model_parallel_dim_name, data_parallel_dim_name)
    if not isinstance(fully_sharded, bool):
        raise TypeError(f"`fully_sharded` must be a bool; received {fully_sharded!r}.")
    return TransformerLayoutMap(
        device_mesh, model_parallel_dim_name, data_parallel_dim_name, fully_sharded, sizes
    )


def bind_sizes(sizes: dict) -> dict:
    """Binds `sizes` to the current distribution's map when it is a `TransformerLayoutMap` (a
    model constructor calls this before creating its variables); returns `sizes`."""
    distribution = keras.distribution.distribution()
    current = getattr(distribution, "_layout_map", None)
    if isinstance(current, TransformerLayoutMap):
        current.bind(sizes)
    return sizes


class class_or_instance_method:  # noqa: N801 (used as a decorator, like classmethod)
    """A method bound to the instance when called on one, else to the class (`get_layout_map`:
    a model's sizes are known, a class's are bound later)."""

    def __init__(self, function):
        self.function = function
        functools.update_wrapper(self, function)

    def __get__(self, instance, owner):
        return functools.partial(self.function, owner if instance is None else instance)


__all__ = [
    "RULES",
    "TransformerLayoutMap",
    "bind_sizes",
    "class_or_instance_method",
    "layout_map",
    "model_sizes",
]
