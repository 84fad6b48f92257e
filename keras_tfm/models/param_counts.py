"""Analytic parameter counts of the builders' models, without building them.

A published size (GPT-2 small, Llama 2 7B, the Transformer base) is checked
against its paper's figure without allocating a single weight:

    per block  attention  d·(H·d_h) + 2·d·(G·d_h) + (H·d_h)·d   (+ biases)
               FFN        2·d·d_ff, gated 3·d·d_ff               (+ biases)
               norms      2·d (LayerNorm) or d (RMSNorm) each
    model      embeddings V·d (+ P·d learned positions), untied head V·d (+ V)

with H heads of size d_h and G key/value heads. Position schemes with
weights inside attention ("relative") are not counted.
"""

import inspect

from keras_tfm.layers.feed_forward import GATED_ACTIVATIONS
from keras_tfm.models.gpt import GPT
from keras_tfm.models.options import check_required
from keras_tfm.models.presets import preset_options
from keras_tfm.models.seq2seq import Seq2Seq, resolve_vocabularies, seq2seq_options


def with_defaults(model_class, options):
    """`options` completed by the defaults of `model_class`'s constructor."""
    merged = {
        name: parameter.default
        for name, parameter in inspect.signature(model_class).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    merged.update(options)
    return merged


def norm_num_params(d_model, norm):
    """Weights of one norm: γ, β (LayerNorm) or γ (RMSNorm)."""
    return d_model if norm == "rms" else 2 * d_model


def block_num_params(
    d_model,
    num_heads,
    d_ff,
    key_dim=None,
    num_key_value_heads=None,
    use_bias=True,
    activation="relu",
    norm="layer",
    cross_attention=False,
):
    """Weights of one `TransformerBlock` with these options."""
    key_dim = key_dim or d_model // num_heads
    inner, kv = num_heads * key_dim, (num_key_value_heads or num_heads) * key_dim
    bias = 1 if use_bias else 0
    attention = 2 * d_model * inner + 2 * d_model * kv + bias * (inner + 2 * kv + d_model)
    gated = activation in GATED_ACTIVATIONS
    ffn = (3 if gated else 2) * d_model * d_ff + bias * ((2 if gated else 1) * d_ff + d_model)
    sublayers = 3 if cross_attention else 2
    return sublayers * norm_num_params(d_model, norm) + ffn + attention * (2 if cross_attention else 1)


def _block_options(o):
    """`block_num_params` keyword arguments from a builder's complete options."""
    return dict(
        d_model=o["d_model"],
        num_heads=o["num_heads"],
        d_ff=o["d_ff"] or 4 * o["d_model"],
        key_dim=o["key_dim"],
        num_key_value_heads=o["num_key_value_heads"],
        use_bias=o["use_bias"],
        activation=o["activation"],
        norm=o["norm"],
    )


def head_num_params(d_model, vocabulary_size, tie_embeddings, lm_head_use_bias):
    """Weights of the untied output head (0 when tied)."""
    if tie_embeddings:
        return 0
    return vocabulary_size * d_model + (vocabulary_size if lm_head_use_bias else 0)


def gpt_num_params(preset: str | None = None, **options) -> int:
    """Parameter count of `gpt(preset, **options)`, without building it.

    Example: `gpt_num_params("llama2_7b")` is 6,738,415,616.
    """
    o = with_defaults(GPT, preset_options(GPT, "gpt", preset, options))
    check_required(
        "gpt",
        vocabulary_size=o["vocabulary_size"],
        max_length=o["max_length"],
        num_layers=o["num_layers"],
        num_heads=o["num_heads"],
        d_model=o["d_model"],
    )
    d, vocabulary = o["d_model"], o["vocabulary_size"]
    block = block_num_params(**_block_options(o))
    embeddings = vocabulary * d + (o["max_length"] * d if o["position"] == "learned" else 0)
    final_norm = norm_num_params(d, o["norm"]) if o["norm_first"] else 0
    head = head_num_params(d, vocabulary, o["tie_embeddings"], o["lm_head_use_bias"])
    return int(embeddings + o["num_layers"] * block + final_norm + head)


def seq2seq_num_params(preset: str | None = None, **options) -> int:
    """Parameter count of `seq2seq(preset, **options)`, without building it
    (shared or separate embeddings, learned positions add max_length·d per
    embedding, tied or untied output)."""
    o = with_defaults(Seq2Seq, seq2seq_options(preset, options))
    check_required("seq2seq", max_length=o["max_length"], num_heads=o["num_heads"], d_model=o["d_model"])
    source, target, shared = resolve_vocabularies(
        o["vocabulary_size"], o["source_vocabulary_size"], o["target_vocabulary_size"], o["share_embeddings"]
    )
    d, block_options = o["d_model"], _block_options(o)
    encoder_layers = o["num_encoder_layers"] or o["num_layers"]
    decoder_layers = o["num_decoder_layers"] or o["num_layers"]
    embeddings = source * d if shared else (source + target) * d
    if o["position"] == "learned":
        embeddings += o["max_length"] * d * (1 if shared else 2)
    blocks = encoder_layers * block_num_params(**block_options) + decoder_layers * block_num_params(
        **block_options, cross_attention=True
    )
    final_norms = 2 * norm_num_params(d, o["norm"]) if o["norm_first"] else 0
    head = head_num_params(d, target, o["tie_embeddings"], o["lm_head_use_bias"])
    return int(embeddings + blocks + final_norms + head)


def gpt_options(preset: str | None = None, **options) -> dict:
    """The complete constructor arguments of `gpt(preset, **options)` (defaults filled in)."""
    o = with_defaults(GPT, preset_options(GPT, "gpt", preset, options))
    o["d_ff"] = o["d_ff"] or 4 * o["d_model"]
    return o


def gpt_variable_shapes(preset: str | None = None, **options) -> list[tuple[str, tuple[int, ...]]]:
    """`(variable path, shape)` of every weight of `gpt(preset, **options)`, in the model's
    order, without building it (the paths `get_layout_map` lays out; the sizes add up to
    `gpt_num_params`)."""
    o = gpt_options(preset, **options)
    d, vocabulary, heads = o["d_model"], o["vocabulary_size"], o["num_heads"]
    key_dim = o["key_dim"] or d // heads
    num_key_value_heads = o["num_key_value_heads"] or heads
    norm = ("scale",) if o["norm"] == "rms" else ("gamma", "beta")
    shapes = [("embedding/token_embedding/embeddings", (vocabulary, d))]
    if o["position"] == "learned":
        shapes.append(("embedding/position_embedding/embeddings", (o["max_length"], d)))
    ffn = ["inner", "output"] + (["gate"] if o["activation"] in GATED_ACTIVATIONS else [])
    for i in range(o["num_layers"]):
        block = f"decoder_block_{i}"
        for name, count in (("query", heads), ("key", num_key_value_heads), ("value", num_key_value_heads)):
            shapes.append((f"{block}/self_attention/{name}/kernel", (d, count, key_dim)))
            if o["use_bias"]:
                shapes.append((f"{block}/self_attention/{name}/bias", (count, key_dim)))
        shapes.append((f"{block}/self_attention/attention_output/kernel", (heads, key_dim, d)))
        if o["use_bias"]:
            shapes.append((f"{block}/self_attention/attention_output/bias", (d,)))
        shapes += [(f"{block}/self_attention_norm/{w}", (d,)) for w in norm]
        for name in ffn:
            shapes.append(
                (
                    f"{block}/feed_forward/{name}/kernel",
                    (o["d_ff"], d) if name == "output" else (d, o["d_ff"]),
                )
            )
            if o["use_bias"]:
                shapes.append(
                    (f"{block}/feed_forward/{name}/bias", (d,) if name == "output" else (o["d_ff"],))
                )
        shapes += [(f"{block}/feed_forward_norm/{w}", (d,)) for w in norm]
    if o["norm_first"]:
        shapes += [(f"final_norm/{w}", (d,)) for w in norm]
    if not o["tie_embeddings"]:
        shapes.append(("lm_head/logits/kernel", (d, vocabulary)))
        if o["lm_head_use_bias"]:
            shapes.append(("lm_head/logits/bias", (vocabulary,)))
    return shapes


__all__ = ["block_num_params", "gpt_num_params", "gpt_options", "gpt_variable_shapes", "seq2seq_num_params"]
