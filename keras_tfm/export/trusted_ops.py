"""Which TensorFlow ops a SavedModel may hold before `keras-tfm generate` runs it.

A SavedModel is a program: its graph can read, write and delete files (`ReadFile`, `WriteFile`,
`DeleteFile`), run Python (`PyFunc`), start processes of a debugger and more. `keras-tfm generate
--model DIR` therefore reads `saved_model.pb` first, without running or loading anything, and refuses a
SavedModel with an op that keras_tfm's exporters never emit, naming the op and the function that holds
it (`check_saved_model_ops`); `--trust-saved-model` runs such a SavedModel anyway.

Every node is checked: those of each meta graph and those of every function of its library (the
bodies of `While`, `If`, calls, gradients). Two lists, both derived from what `export_for_serving`
writes for every model kind:

    SERVING_OPS      what the signatures, the loader's initializers and the object graph's
                     functions use; allowed everywhere.
    CHECKPOINT_OPS   what only the saver function of the meta graph uses (`SaverDef.save_tensor_name`:
                     SaveV2, MergeV2Checkpoints, which write and delete checkpoint files). No loader and
                     no server runs that function, so these ops are allowed there alone: a signature, an
                     initializer or the restore function that calls them is refused.

`tests/serving_ops.py` exports every model kind (GPT layouts and tokenizers, seq2seq, BERT classifier,
masked LM, sentence encoder; int8, LoRA), collects the ops with `op_uses`, and checks the two lists
(`--write` rewrites them, e.g. after a TensorFlow upgrade); `tests/test_bad_input_cli.py` checks the
exports of its cases against them. Nothing here imports Keras.
"""

import os
import re

from tensorflow.core.protobuf import saved_model_pb2

# fmt: off
#: The op types of keras_tfm's exports outside the saver function (`tests/serving_ops.py --write`).
SERVING_OPS = frozenset(
    {
        "Abs", "AddV2", "All", "Any", "ArgMax", "Assert", "AssignVariableOp", "BatchMatMulV2",
        "BatchMatMulV3", "BiasAdd", "Bitcast", "BitwiseAnd", "BitwiseXor", "BroadcastTo", "Cast", "ConcatV2",
        "Const", "Cos", "Cumsum", "DecodeRaw", "DenseBincount", "Einsum", "EnsureShape", "Equal", "Erfc",
        "Exp", "ExpandDims", "Fill", "FloorDiv", "FloorMod", "GatherNd", "GatherV2", "Greater",
        "GreaterEqual", "HashTableV2", "Identity", "IdentityN", "If", "InvertPermutation", "IsFinite",
        "IsNan", "LeftShift", "Less", "LessEqual", "Log", "LogSoftmax", "LogicalAnd", "LogicalNot",
        "LogicalOr", "LookupTableFindV2", "LookupTableImportV2", "LowerBound", "MatMul", "Max", "Maximum",
        "Mean", "Min", "Minimum", "Mul", "Neg", "NoOp", "NotEqual", "OnesLike", "Pack", "Pad", "PadV2",
        "PartitionedCall", "Placeholder", "Pow", "Prod", "RaggedGather", "RaggedRange",
        "RaggedTensorToTensor", "Range", "ReadVariableOp", "RealDiv", "ReduceJoin", "Relu", "Reshape",
        "RestoreV2", "ReverseV2", "RightShift", "Round", "Rsqrt", "ScatterNd", "SegmentSum", "SelectV2",
        "Shape", "Sigmoid", "Sin", "Size", "Slice", "Softmax", "Split", "Square", "SquaredDifference",
        "Squeeze", "StatefulPartitionedCall", "StatelessIf", "StatelessWhile", "StaticRegexFullMatch",
        "StaticRegexReplace", "StopGradient", "StridedSlice", "StringJoin", "StringLength", "StringLower",
        "StringSplit", "StringSplitV2", "Sub", "Substr", "Sum", "Tanh", "TensorListConcatV2",
        "TensorListFromTensor", "TensorListGetItem", "TensorListLength", "TensorListReserve",
        "TensorListSetItem", "TensorListStack", "TensorScatterUpdate", "Tile", "TopKV2", "Transpose",
        "UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeTranscode", "Unique",
        "UnsortedSegmentJoin", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentSum", "UpperBound",
        "VarHandleOp", "Where", "While", "XlaDynamicUpdateSlice", "ZerosLike",
    }
)
#: The op types found only in the saver function of keras_tfm's exports.
CHECKPOINT_OPS = frozenset(
    {
        "DisableCopyOnRead", "MergeV2Checkpoints", "SaveV2", "Select", "ShardedFilename",
    }
)
# fmt: on


class UntrustedSavedModelError(ValueError):
    """A SavedModel holds ops keras_tfm's exports never emit; `ops` maps each to where it is used."""

    def __init__(self, message, ops):
        super().__init__(message)
        self.ops = ops


def read_saved_model(version_dir):
    """The `SavedModel` protocol buffer of `version_dir` (`saved_model.pb`, or `saved_model.pbtxt`)."""
    saved_model = saved_model_pb2.SavedModel()
    binary = os.path.join(version_dir, "saved_model.pb")
    if os.path.isfile(binary):
        with open(binary, "rb") as f:
            saved_model.ParseFromString(f.read())
        return saved_model
    text = os.path.join(version_dir, "saved_model.pbtxt")
    if not os.path.isfile(text):
        raise FileNotFoundError(f"No SavedModel (saved_model.pb) in {version_dir!r}.")
    from google.protobuf import text_format

    with open(text, encoding="utf-8") as f:
        return text_format.Parse(f.read(), saved_model)


def _attr_functions(attr_value):
    """The function names an `AttrValue` refers to (a `func`, a `list(func)`, nested attributes)."""
    names = set()
    kind = attr_value.WhichOneof("value")
    if kind == "func":
        names.add(attr_value.func.name)
        for nested in attr_value.func.attr.values():
            names |= _attr_functions(nested)
    elif kind == "list":
        for func in attr_value.list.func:
            names.add(func.name)
            for nested in func.attr.values():
                names |= _attr_functions(nested)
    return names


def _node_calls(node, functions):
    """The library functions `node` calls: through its attributes, or as its op (a direct call)."""
    calls = set()
    for value in node.attr.values():
        calls |= _attr_functions(value)
    if node.op in functions:
        calls.add(node.op)
    return calls & set(functions)


def _closure(roots, calls):
    """Every function reachable from `roots` through `calls` {function: called functions}."""
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(calls.get(name, ()))
    return seen


def _input_closure(nodes, roots):
    """The names of the graph nodes `roots` depend on (themselves included), through data and control
    inputs."""
    seen, stack = set(), [r for r in roots if r in nodes]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for source in nodes[name].input:
            source = re.sub(r"^\^|:\d+$", "", source)
            if source in nodes:
                stack.append(source)
    return seen


def _meta_graph_ops(meta_graph, uses):
    """Adds to `uses` {op: {(part, place)}} the ops of `meta_graph`: part "checkpoint" for the nodes and
    functions only the saver function reaches, else "serving"."""
    graph = meta_graph.graph_def
    functions = {f.signature.name: f for f in graph.library.function}
    calls = {
        name: set().union(*(_node_calls(n, functions) for n in f.node_def)) if f.node_def else set()
        for name, f in functions.items()
    }
    nodes = {node.name: node for node in graph.node}
    save = meta_graph.saver_def.save_tensor_name.split(":")[0] if meta_graph.HasField("saver_def") else ""
    saver_nodes = _input_closure(nodes, [save]) if save else set()
    # A node the signatures, the restore op or the initializers need is a serving node, also when the
    # save op needs it too (a variable's handle).
    serving_nodes = set(nodes) - saver_nodes
    serving_nodes |= _input_closure(nodes, serving_nodes)
    saver_only = saver_nodes - serving_nodes
    saver_functions = _closure(set().union(*(_node_calls(nodes[n], functions) for n in saver_only)), calls)
    serving_roots = (
        set().union(*(_node_calls(nodes[n], functions) for n in serving_nodes)) if nodes else set()
    )
    serving_roots |= set(meta_graph.object_graph_def.concrete_functions)
    serving_roots |= set(functions) - saver_functions  # any function no saver node calls
    serving_functions = _closure(serving_roots, calls)
    for name, node in nodes.items():
        if node.op not in functions:
            part = "checkpoint" if name in saver_only else "serving"
            uses.setdefault(node.op, set()).add((part, "the graph"))
    for name, function in functions.items():
        part = "serving" if name in serving_functions else "checkpoint"
        for node in function.node_def:
            if node.op not in functions:
                uses.setdefault(node.op, set()).add((part, name))


def op_uses(version_dir):
    """{op type: {(part, place)}} of the SavedModel in `version_dir`, read from `saved_model.pb` without
    loading it. `part` is "checkpoint" for what only the saver function reaches, else "serving"; `place`
    is the function holding the node, or "the graph" (the meta graph's own nodes)."""
    uses = {}
    for meta_graph in read_saved_model(version_dir).meta_graphs:
        _meta_graph_ops(meta_graph, uses)
    return uses


def untrusted_ops(version_dir):
    """{op type: sorted places} of the ops of `version_dir` that `SERVING_OPS` and `CHECKPOINT_OPS` do
    not allow where they are used ({} for a keras_tfm export)."""
    refused = {}
    for op, places in op_uses(version_dir).items():
        for part, place in places:
            allowed = op in SERVING_OPS or (part == "checkpoint" and op in CHECKPOINT_OPS)
            if not allowed:
                refused.setdefault(op, set()).add(place)
    return {op: sorted(places) for op, places in sorted(refused.items())}


def check_saved_model_ops(version_dir):
    """Refuses a SavedModel whose graph holds ops keras_tfm's exports never emit (module docstring).

    Raises:
        UntrustedSavedModelError: a ValueError naming each such op and a function that holds it.
        FileNotFoundError: `version_dir` holds no SavedModel.
    """
    refused = untrusted_ops(version_dir)
    if refused:
        listed = ", ".join(f"{op} (in {places[0]})" for op, places in list(refused.items())[:8])
        more = f" and {len(refused) - 8} more" if len(refused) > 8 else ""
        raise UntrustedSavedModelError(
            f"the SavedModel in {os.fspath(version_dir)!r} holds ops keras_tfm's exports never emit: "
            f"{listed}{more}. A SavedModel is a program (it can read and write files); run only one "
            "you trust, with --trust-saved-model.",
            refused,
        )


__all__ = [
    "CHECKPOINT_OPS",
    "SERVING_OPS",
    "UntrustedSavedModelError",
    "check_saved_model_ops",
    "op_uses",
    "untrusted_ops",
]
