"""Checkpoint name ↔ Keras variable mappings, applied in both directions.

A mapping is a list of `Entry`s. Each names one checkpoint tensor, the
variables it fills (one, or three for GPT-2's fused `c_attn`), its
checkpoint shape with the config field behind every dimension, and the two
layout conversions:

    checkpoint array ──to_model──▶ [variable values]      (loading)
    [variable values] ──to_checkpoint──▶ checkpoint array (saving)

The constructors cover the layouts of published checkpoints:

    copy     same layout (embeddings, LayerNorm γ/β, biases)
    linear   PyTorch nn.Linear weight (out, in)  = kernelᵀ
    conv1d   GPT-2 Conv1D weight (in, out)       = kernel
    fused    one tensor split along its last axis into several variables
             (GPT-2 c_attn = [W_q | W_k | W_v])

Kernels of other shapes (e.g. the `(d, heads, head_dim)` query kernel of
multi-head attention) are reshaped to and from the 2-D `(in, out)` matrix.
"""

import dataclasses
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass
class Entry:
    """One checkpoint tensor and the variables it fills.

    Attributes:
        name: checkpoint tensor name.
        variables: the Keras variables it fills.
        shape: the checkpoint shape this model expects.
        fields: config field name of every checkpoint dimension (used in the
            error message of a shape mismatch).
        to_model: checkpoint array → list of arrays (one per variable).
        to_checkpoint: list of variable arrays → checkpoint array.
        optional: a head weight the checkpoint may lack (then initialised and
            reported) instead of an error.
    """

    name: str
    variables: list
    shape: tuple
    fields: tuple
    to_model: Callable
    to_checkpoint: Callable
    optional: bool = False


def copy(name, variable, fields, optional=False, flatten=False):
    """Same values; `flatten`: the checkpoint stores the variable as a vector
    (e.g. a `(heads, head_dim)` attention bias stored as `(d,)`)."""
    shape = (int(np.prod(variable.shape)),) if flatten else tuple(int(d) for d in variable.shape)
    return Entry(
        name,
        [variable],
        shape,
        tuple(fields),
        lambda a: [a.reshape(variable.shape)],
        lambda values: np.asarray(values[0]).reshape(shape),
        optional,
    )


def _matrix(variable, axis_in):
    """(in, out) sizes of a kernel whose first `axis_in` axes are inputs."""
    shape = tuple(variable.shape)
    return int(np.prod(shape[:axis_in])), int(np.prod(shape[axis_in:]))


def linear(name, variable, fields, input_axes=1, optional=False):
    """PyTorch `nn.Linear` weight (out, in) ↔ kernel (in..., out...)."""
    n_in, n_out = _matrix(variable, input_axes)
    return Entry(
        name,
        [variable],
        (n_out, n_in),
        tuple(fields),
        lambda a: [a.T.reshape(variable.shape)],
        lambda values: np.asarray(values[0]).reshape(n_in, n_out).T,
        optional,
    )


def conv1d(name, variable, fields, input_axes=1, optional=False):
    """GPT-2 `Conv1D` weight (in, out) ↔ kernel (in..., out...)."""
    n_in, n_out = _matrix(variable, input_axes)
    return Entry(
        name,
        [variable],
        (n_in, n_out),
        tuple(fields),
        lambda a: [a.reshape(variable.shape)],
        lambda values: np.asarray(values[0]).reshape(n_in, n_out),
        optional,
    )


def fused(name, variables, fields, input_axes=1, optional=False):
    """One (in, Σout) or (Σout,) tensor ↔ several kernels or biases, split on the last axis."""
    sizes = [_matrix(v, input_axes)[1] if input_axes else int(np.prod(v.shape)) for v in variables]
    bounds = np.cumsum(sizes)[:-1]

    def to_model(a):
        return [p.reshape(v.shape) for p, v in zip(np.split(a, bounds, axis=-1), variables)]

    def to_checkpoint(values):
        if input_axes:
            return np.concatenate(
                [np.asarray(x).reshape(_matrix(v, input_axes)) for x, v in zip(values, variables)], axis=1
            )
        return np.concatenate([np.asarray(x).reshape(-1) for x in values])

    shape = (_matrix(variables[0], input_axes)[0], sum(sizes)) if input_axes else (sum(sizes),)
    return Entry(name, list(variables), shape, tuple(fields), to_model, to_checkpoint, optional)


def _mismatch_fields(entry, got, config):
    expected = entry.shape
    fields = []
    if len(got) == len(expected):
        for field, g, e in zip(entry.fields, got, expected):
            if g != e and field not in fields:
                fields.append(field)
    else:
        fields = list(dict.fromkeys(entry.fields))
    described = ", ".join(f"{f}={config.get(f)!r}" if f in config else f for f in fields)
    return described or "the sizes"


def check_values(name, array, source):
    """Raises a ValueError naming the tensor and its file unless `array` is a float tensor
    whose values are all finite (one pass over it)."""
    dtype = np.dtype(array.dtype)
    if dtype.kind != "f" and "float" not in dtype.name:
        raise ValueError(
            f"{source}: tensor {name!r} has dtype {dtype.name}; expected a float tensor (the weight is "
            "a float variable: integer codes without their quantization scales cannot be loaded; "
            "dequantize the checkpoint to float first)."
        )
    finite = np.isfinite(array)
    if not finite.all():
        bad = np.argwhere(~finite)
        raise ValueError(
            f"{source}: tensor {name!r} has {len(bad)} non-finite value(s) (NaN or ±inf), the first at "
            f"index {tuple(int(i) for i in bad[0])}; the checkpoint is damaged."
        )


def collect(entries, tensors, sources, config, config_file):
    """Matches checkpoint tensors to `entries` and checks every shape.

    Nothing is assigned here, so a failure leaves the model untouched.

    Returns:
        `(pairs, missing_optional)`: `[(entry, array)]` to assign and the names
        of optional entries the checkpoint lacks.

    Raises:
        ValueError: a required tensor is missing, a shape disagrees with
            the config (naming the tensor, its file, both shapes and the
            config field to check), or a tensor is not float or holds NaN / ±inf.
    """
    pairs, missing_optional, missing = [], [], []
    for entry in entries:
        if entry.name not in tensors:
            (missing_optional if entry.optional else missing).append(entry.name)
            continue
        array = tensors[entry.name]
        if tuple(array.shape) != entry.shape:
            raise ValueError(
                f"{sources.get(entry.name, 'checkpoint')}: weight {entry.name!r} has shape "
                f"{tuple(array.shape)}, but the model built from {config_file} expects {entry.shape}; check "
                f"{config_file} field(s) {_mismatch_fields(entry, tuple(array.shape), config)}."
            )
        check_values(entry.name, array, sources.get(entry.name, "checkpoint"))
        pairs.append((entry, array))
    if missing:
        files = sorted(set(sources.values())) or ["checkpoint"]
        raise ValueError(
            f"{', '.join(files)}: missing {len(missing)} weight(s) the model needs: "
            f"{missing[:8]}{' ...' if len(missing) > 8 else ''} (is this a checkpoint of the architecture "
            f"{config_file} names?)."
        )
    return pairs, missing_optional


def assign(pairs):
    """Assigns the checked `(entry, array)` pairs of `collect`."""
    for entry, array in pairs:
        for variable, value in zip(entry.variables, entry.to_model(np.asarray(array))):
            variable.assign(np.asarray(value, dtype=variable.dtype))


def to_tensors(entries):
    """{checkpoint name: float32 array} of the model's current weights."""
    tensors = {}
    for entry in entries:
        values = [np.asarray(v.numpy()) for v in entry.variables]
        tensors[entry.name] = np.ascontiguousarray(entry.to_checkpoint(values), dtype=np.float32)
    return tensors


def check_layout(
    family,
    block,
    *,
    norm_first,
    position,
    use_bias,
    has_final_norm,
    positions_table=True,
    d_model=None,
    extra=(),
):
    """Raises a ValueError listing every option where a model departs from a
    checkpoint family's fixed layout (e.g. a post-norm model saved as GPT-2).

    Args:
        family: the family's name for the message ("BERT", "GPT-2", "Llama").
        block: the model's first `TransformerBlock`.
        norm_first: the family's norm placement (pre-norm families also need
            the final norm: `has_final_norm`).
        position: the family's attention position scheme, or None for learned
            absolute positions (`positions_table`: the model has that table).
        use_bias: whether the family's projections have biases.
        d_model: when given, `key_dim` must be `d_model / num_heads`.
        extra: further problems found by the family module.
    """
    problems = []
    if block.norm_first != norm_first or has_final_norm != norm_first:
        problems.append(f"norm_first={block.norm_first} ({family} is {'pre' if norm_first else 'post'}-norm)")
    if position is None and (block.position is not None or not positions_table):
        problems.append(f"position={block.position or 'sinusoidal'!r} (only learned positions)")
    elif position is not None and block.position != position:
        problems.append(f"position={block.position!r} ({family} uses {position!r})")
    if block.use_bias != use_bias:
        problems.append(f"use_bias={block.use_bias}")
    if d_model is not None and block.key_dim not in (None, d_model // block.num_heads):
        problems.append(f"key_dim={block.key_dim}")
    problems += list(extra)
    if problems:
        raise ValueError(
            f"This model cannot be saved as a {family} checkpoint: it has {', '.join(problems)}."
        )


def state_dict_prefix(names, prefix):
    """`prefix` when a checkpoint's weight names carry it (a model with a head), else "" (the bare model)."""
    return prefix if any(name.startswith(prefix) for name in names) else ""


def is_model_class(model, names):
    """Whether `model` is an instance of a keras_tfm model class named in `names` (or of a
    subclass): the converters read models through their attributes and import no model class."""
    return any(c.__name__ in names and c.__module__.startswith("keras_tfm.") for c in type(model).__mro__)


def check_model_class(model, names, expected):
    """A TypeError naming `expected` and the class received unless `model` is a keras_tfm
    model of a class named in `names` (`is_model_class`)."""
    if not is_model_class(model, names):
        raise TypeError(f"Expected {expected}; received {type(model).__name__}.")
