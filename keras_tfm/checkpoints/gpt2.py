"""HuggingFace GPT-2 checkpoints (`model_type: "gpt2"`) ↔ keras_tfm `gpt` models.

config.json → `gpt` options:

    vocab_size → vocabulary_size       n_positions → max_length
    n_layer → num_layers               n_head → num_heads
    n_embd → d_model                   n_inner → d_ff (null: 4·n_embd)
    activation_function → activation   layer_norm_epsilon → layer_norm_epsilon
    resid_pdrop → dropout              attn_pdrop → attention_dropout
    tie_word_embeddings → tie_embeddings

Weights (`prefix` = "transformer." for `GPT2LMHeadModel`, "" for `GPT2Model`;
GPT-2's `Conv1D` stores (in, out) matrices, i.e. already Keras kernels):

    {p}wte.weight                  token embedding (V, d)
    {p}wpe.weight                  position table (P, d)
    {p}h.{i}.ln_1.*                pre-attention LayerNorm
    {p}h.{i}.attn.c_attn.{weight,bias}
                                   fused [W_q | W_k | W_v] (d, 3d), split into the
                                   three (d, heads, d/heads) kernels
    {p}h.{i}.attn.c_proj.*         attention output (d, d) → (heads, d/heads, d)
    {p}h.{i}.ln_2.*                pre-FFN LayerNorm
    {p}h.{i}.mlp.c_fc.*            FFN inner (d, n_inner)
    {p}h.{i}.mlp.c_proj.*          FFN output (n_inner, d)
    {p}ln_f.*                      final LayerNorm
    lm_head.weight                 tied to wte (not stored) unless
                                   tie_word_embeddings is false: (V, d) = kernelᵀ
"""

import types

from keras_tfm.checkpoints import weight_mapping as wm

#: Name prefix of a `GPT2LMHeadModel` state dict (GPT2Model names have none).
STATE_DICT_PREFIX = "transformer."

MODEL_TYPE = "gpt2"

TASKS = ("causal_lm",)

ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
ACTIVATION_NAMES = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu", "silu": "silu"}

#: Causal-mask buffers stored by old transformers versions (not weights).
IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")
TIED = ("lm_head.weight",)


def builder_options(config, read):
    """`gpt` keyword arguments from a config dict (`read` = a `ConfigReader`)."""
    if read.get("add_cross_attention", False):
        raise read.error("add_cross_attention", "cross-attention GPT-2 is not supported")
    if read.get("scale_attn_weights", True) is not True:
        raise read.error("scale_attn_weights", "only scaled attention (true) is supported")
    if read.get("scale_attn_by_inverse_layer_idx", False):
        raise read.error("scale_attn_by_inverse_layer_idx", "only false is supported")
    d_model = read.positive_int("n_embd")
    inner = read.get("n_inner")
    activation = read.choice("activation_function", tuple(ACTIVATIONS), default="gelu_new")
    return dict(
        vocabulary_size=read.positive_int("vocab_size"),
        max_length=read.positive_int("n_positions"),
        num_layers=read.positive_int("n_layer"),
        num_heads=read.positive_int("n_head"),
        d_model=d_model,
        d_ff=4 * d_model if inner is None else read.positive_int("n_inner"),
        activation=ACTIVATIONS[activation],
        layer_norm_epsilon=read.positive_float("layer_norm_epsilon", default=1e-5),
        dropout=read.rate("resid_pdrop", default=0.1),
        attention_dropout=read.rate("attn_pdrop", default=0.1),
        tie_embeddings=read.boolean("tie_word_embeddings", default=True),
    )


def parts(model):
    """The layers of a keras_tfm GPT model that hold checkpoint weights."""
    wm.check_model_class(model, ("GPT",), "a keras_tfm GPT model (`keras_tfm.models.gpt`)")
    return types.SimpleNamespace(
        token_embeddings=model.token_embedding.embeddings,
        position_embeddings=getattr(model.position_embedding, "position_embeddings", None),
        blocks=list(model.blocks),
        final_norm=model.final_norm,
        lm_head=None if model.head is None else model.head.dense,
    )


def _norm(prefix, layer):
    return [
        wm.copy(f"{prefix}.weight", layer.gamma, ("n_embd",)),
        wm.copy(f"{prefix}.bias", layer.beta, ("n_embd",)),
    ]


def entries(model, prefix="transformer."):
    """The weight mapping of a keras_tfm GPT model (see the module docstring)."""
    p = parts(model)
    D, V, P, F = "n_embd", "vocab_size", "n_positions", "n_inner"
    out = [
        wm.copy(f"{prefix}wte.weight", p.token_embeddings, (V, D)),
        wm.copy(f"{prefix}wpe.weight", p.position_embeddings, (P, D)),
    ]
    for i, block in enumerate(p.blocks):
        b = f"{prefix}h.{i}"
        attention = block.self_attention_layer
        qkv = [attention.query_dense, attention.key_dense, attention.value_dense]
        out += _norm(f"{b}.ln_1", block.self_attention_norm)
        out.append(wm.fused(f"{b}.attn.c_attn.weight", [l.kernel for l in qkv], (D, D)))
        out.append(wm.fused(f"{b}.attn.c_attn.bias", [l.bias for l in qkv], (D,), input_axes=0))
        out.append(wm.conv1d(f"{b}.attn.c_proj.weight", attention.output_dense.kernel, (D, D), input_axes=2))
        out.append(wm.copy(f"{b}.attn.c_proj.bias", attention.output_dense.bias, (D,)))
        out += _norm(f"{b}.ln_2", block.feed_forward_norm)
        out.append(wm.conv1d(f"{b}.mlp.c_fc.weight", block.feed_forward.inner_dense.kernel, (D, F)))
        out.append(wm.copy(f"{b}.mlp.c_fc.bias", block.feed_forward.inner_dense.bias, (F,)))
        out.append(wm.conv1d(f"{b}.mlp.c_proj.weight", block.feed_forward.output_dense.kernel, (F, D)))
        out.append(wm.copy(f"{b}.mlp.c_proj.bias", block.feed_forward.output_dense.bias, (D,)))
    out += _norm(f"{prefix}ln_f", p.final_norm)
    if p.lm_head is not None:
        out.append(wm.linear("lm_head.weight", p.lm_head.kernel, (V, D)))
    return out


def hf_config(model, task):
    """config.json for a keras_tfm GPT model (raises for options GPT-2 lacks)."""
    p = parts(model)
    block = p.blocks[0]
    d_model = int(p.token_embeddings.shape[1])
    wm.check_layout(
        "GPT-2",
        block,
        norm_first=True,
        position=None,
        use_bias=True,
        has_final_norm=p.final_norm is not None,
        positions_table=p.position_embeddings is not None,
        d_model=d_model,
        extra=["an lm_head bias"] if p.lm_head is not None and p.lm_head.use_bias else [],
    )
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": MODEL_TYPE,
        "vocab_size": int(p.token_embeddings.shape[0]),
        "n_positions": int(p.position_embeddings.shape[0]),
        "n_embd": d_model,
        "n_layer": len(p.blocks),
        "n_head": int(block.num_heads),
        "n_inner": int(block.d_ff),
        "activation_function": ACTIVATION_NAMES[block.activation],
        "layer_norm_epsilon": float(block.layer_norm_epsilon),
        "resid_pdrop": float(block.dropout),
        "embd_pdrop": float(block.dropout),
        "attn_pdrop": float(block.attention_dropout),
        "tie_word_embeddings": p.lm_head is None,
        "scale_attn_weights": True,
        "initializer_range": 0.02,
    }
