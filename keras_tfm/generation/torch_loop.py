"""A loop's steps in chunks: up to `CHUNK` steps per call of one captured graph (PyTorch).

`chunk(keep, step, inputs, mutated)`, called inside a trace (`torch_capture.trace`),
records PyTorch's `while_loop` higher-order operator: while `keep(*inputs)` holds and
fewer than `CHUNK` steps have run, `step(*inputs)` updates the `mutated` inputs in
place; the graph returns the number of steps it ran. Compiled by inductor, the whole
chunk is C++: no Python, no input handling and no allocation between two steps. The
caller calls the graph again while it returns `CHUNK`, so Ctrl-C still raises
`KeyboardInterrupt` between two chunks.

`prepare(graph, invariant)` readies a traced graph for inductor:

* tensor constants inside the loop (a Python scalar turned tensor by Keras) become
  factory calls (scalars) or inputs of the loop (others): inductor's functionalization
  rejects a plain tensor inside the loop's subgraphs;
* loop-invariant code motion: what the step computes from the `invariant` inputs alone
  (the weights and the constants: a fused kernel's concatenation, a cast) is computed
  once per chunk, before the loop, instead of at every step. Views stay in the loop
  (a loop input must not alias another), as do random and in-place operations;
* one-row matrix products (`mm`/`addmm` of a `(1, k)` matrix, a step at batch 1) get
  their row as `as_strided(x, (1, k), (k, 1))` where its storage is a single run of k
  elements: inductor hands ATen such a row with row stride 0, which ATen's BLAS path
  copies before every product.
"""

import functools
import inspect

import torch

#: Steps per call of a chunk's graph: the Python between two chunks costs a few percent
#: of one step, and Ctrl-C waits at most this many steps.
CHUNK = 16


@functools.cache
def unsupported() -> str | None:
    """Why this PyTorch cannot capture a loop's chunks, or None: they update the loop's state
    in place, which PyTorch's `while_loop` operator takes as `mutated_arg_indices` (2.13)."""
    try:
        from torch._higher_order_ops.while_loop import WhileLoopOp
    except ImportError:
        return f"PyTorch {torch.__version__} has no while_loop operator (2.13 has)"
    if "mutated_arg_indices" in inspect.signature(WhileLoopOp.__call__).parameters:
        return None
    return (
        f"PyTorch {torch.__version__}'s while_loop operator cannot update a loop's state in place (2.13 can)"
    )


def chunk(keep, step, inputs, mutated):
    """Inside a trace: up to `CHUNK` runs of `step(*inputs)` (updates the inputs at the
    positions `mutated` in place) while `keep(*inputs)` (a bool scalar tensor) holds.

    Returns:
        int32 scalar tensor, the number of steps run.
    """
    from torch._higher_order_ops.while_loop import while_loop_op

    def cond_fn(count, *xs):
        return torch.logical_and(count < CHUNK, keep(*xs).to(torch.bool).reshape(()))

    def body_fn(count, *xs):
        step(*xs)
        return (count + 1,)

    positions = ",".join(str(1 + i) for i in mutated)  # the count is the loop's first input
    start = torch.zeros((), dtype=torch.int32, device=inputs[0].device if inputs else None)
    (count,) = while_loop_op(cond_fn, body_fn, (start,), tuple(inputs), mutated_arg_indices=positions)
    return count


def prepare(graph, invariant):
    """Readies the loops of a traced `graph` for inductor (module docstring); `invariant`
    are the positions, among the inputs given to `chunk`, that no step changes."""
    for loop in [n for n in graph.graph.nodes if n.target is torch.ops.higher_order.while_loop]:
        _constants_out(graph, loop)
        _hoist_invariants(graph, loop, {1 + i for i in invariant})
        _strided_rows(_subgraphs(graph, loop)[1])
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return graph


def _subgraphs(graph, loop):
    return getattr(graph, loop.args[0].target), getattr(graph, loop.args[1].target)


def _placeholders(subgraph):
    return [n for n in subgraph.graph.nodes if n.op == "placeholder"]


def _add_input(graph, loop, value, meta):
    """Appends `value` (a node of the outer graph) to the loop's inputs and a placeholder
    for it to both subgraphs; returns the body's placeholder."""
    placeholders = []
    for subgraph in _subgraphs(graph, loop):
        with subgraph.graph.inserting_after(_placeholders(subgraph)[-1]):
            placeholder = subgraph.graph.placeholder(f"loop_input_{len(_placeholders(subgraph))}")
        placeholder.meta = dict(meta)
        placeholders.append(placeholder)
    args = list(loop.args)
    args[3] = (*args[3], value)
    loop.args = tuple(args)
    return placeholders[1]


def _constants_out(graph, loop):
    for subgraph in _subgraphs(graph, loop):
        for node in [n for n in subgraph.graph.nodes if n.op == "get_attr"]:
            value = getattr(subgraph, node.target)
            if not isinstance(value, torch.Tensor):
                continue
            users = list(node.users)
            if value.dim() == 0 and all(u.target is torch.ops.aten.lift_fresh_copy.default for u in users):
                for user in users:
                    with subgraph.graph.inserting_before(user):
                        factory = subgraph.graph.call_function(
                            torch.ops.aten.scalar_tensor.default,
                            (value.item(),),
                            {"dtype": value.dtype, "device": value.device},
                        )
                    factory.meta = dict(user.meta)
                    user.replace_all_uses_with(factory)
                    subgraph.graph.erase_node(user)
            else:
                name = f"_loop_constant_{id(value)}"
                graph.register_buffer(name, value, persistent=False)
                with graph.graph.inserting_before(loop):
                    outer = graph.graph.get_attr(name)
                node.replace_all_uses_with(_add_input(graph, loop, outer, node.meta))
            subgraph.graph.erase_node(node)
            delattr(subgraph, node.target)
        subgraph.recompile()


def _schema(node):
    return getattr(node.target, "_schema", None) if node.op == "call_function" else None


def _is_view(node):
    return _schema(node) is not None and any(r.alias_info is not None for r in _schema(node).returns)


def _view_chain(node):
    """`node`, the node it is a view of, and so on down to its storage (the last)."""
    chain = [node]
    while _is_view(chain[-1]) and chain[-1].args:
        chain.append(chain[-1].args[0])
    return chain


def _hoist_invariants(graph, loop, invariant_positions):
    cond, body = _subgraphs(graph, loop)
    placeholders = _placeholders(body)
    written = set()  # nodes an in-place operation of the step writes (through views)
    for node in body.graph.nodes:
        if _schema(node) is not None and _schema(node).is_mutable:
            for x in node.all_input_nodes:
                written.update(_view_chain(x))
    invariant = {placeholders[i] for i in invariant_positions} - written
    hoisted = []
    for node in body.graph.nodes:
        schema = _schema(node)
        if schema is None or schema.is_mutable or node in written:
            continue
        if torch.Tag.nondeterministic_seeded in node.target.tags:
            continue
        inputs = node.all_input_nodes
        if all(x in invariant for x in inputs):
            invariant.add(node)  # a factory (no inputs) too, but it stays where it is used
            if inputs and not _is_view(node):
                hoisted.append(node)
    kept = set(hoisted)
    frontier = [n for n in hoisted if any(u not in kept for u in n.users)]
    if not frontier:
        return
    outer_inputs = [*loop.args[2], *loop.args[3]]
    copies = {p: outer_inputs[i] for i, p in enumerate(placeholders)}
    with graph.graph.inserting_before(loop):
        for node in body.graph.nodes:
            if node in invariant and node.op == "call_function":
                copies[node] = graph.graph.node_copy(node, lambda x: copies[x])
    for node in frontier:
        node.replace_all_uses_with(_add_input(graph, loop, copies[node], node.meta))
    body.graph.eliminate_dead_code()
    body.recompile()
    cond.recompile()


_PRODUCTS = {torch.ops.aten.mm.default: 0, torch.ops.aten.addmm.default: 1}  # op -> matrix argument


def _strided_rows(body):
    """Passes each one-row matrix of a product in `body` through `as_strided` with row
    stride k (module docstring). Only where the row's storage (the node its views start
    from) holds exactly its k elements in one dimension: then any layout inductor gives
    that storage has stride 1 along it and offset 0, so the new strides read the same
    elements."""
    for node in list(body.graph.nodes):
        position = _PRODUCTS.get(node.target) if node.op == "call_function" else None
        if position is None:
            continue
        row = node.args[position]
        value = row.meta.get("val")
        if value is None or value.dim() != 2 or value.shape[0] != 1 or value.stride(1) != 1:
            continue
        k = value.shape[1]
        stored = _view_chain(row)[-1].meta.get("val")
        if stored is None or stored.numel() != k or sum(size != 1 for size in stored.shape) > 1:
            continue
        with body.graph.inserting_before(node):
            strided = body.graph.call_function(torch.ops.aten.as_strided.default, (row, [1, k], [k, 1], 0))
        node.replace_input_with(row, strided)
    body.recompile()
