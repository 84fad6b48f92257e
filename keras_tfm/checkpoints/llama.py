"""HuggingFace Llama checkpoints (`model_type: "llama"`) ↔ keras_tfm `gpt` models.

config.json → `gpt` options (pre-RMSNorm, SwiGLU, RoPE, no biases):

    vocab_size → vocabulary_size             max_position_embeddings → max_length
    num_hidden_layers → num_layers           num_attention_heads → num_heads
    hidden_size → d_model                    intermediate_size → d_ff
    num_key_value_heads → num_key_value_heads (null: num_heads)
    head_dim → key_dim (null: hidden_size / num_attention_heads)
    rope_theta (or rope_parameters.rope_theta) → rope_max_wavelength
    rms_norm_eps → layer_norm_epsilon         tie_word_embeddings → tie_embeddings
    hidden_act "silu" → activation "swiglu"   attention_dropout → attention_dropout

Weights (`prefix` = "model." for `LlamaForCausalLM`, "" for `LlamaModel`;
PyTorch `nn.Linear` stores (out, in) = kernelᵀ):

    {p}embed_tokens.weight                     token embedding (V, d)
    {p}layers.{i}.input_layernorm.weight       pre-attention RMSNorm scale
    {p}layers.{i}.self_attn.{q,k,v}_proj.weight  (heads·head_dim, d); k/v with the
                                               key/value heads (grouped-query attention)
    {p}layers.{i}.self_attn.o_proj.weight      (d, heads·head_dim)
    {p}layers.{i}.post_attention_layernorm.weight  pre-FFN RMSNorm scale
    {p}layers.{i}.mlp.gate_proj.weight         SwiGLU gate (silu branch)
    {p}layers.{i}.mlp.up_proj.weight           SwiGLU linear branch (`inner_dense`)
    {p}layers.{i}.mlp.down_proj.weight         FFN output
    {p}norm.weight                             final RMSNorm scale
    lm_head.weight                             (V, d), absent when tied

Rotary layout: HuggingFace's Llama applies RoPE with `rotate_half` (dimension i
pairs with i + head_dim/2, frequencies base^(-2i/head_dim)), and its checkpoints
store q/k_proj in that layout; `RotaryEmbedding` uses the same pairing, so the
projections are copied without a permutation (Meta's original interleaved
checkpoints are permuted by HuggingFace's conversion script, not here).
"""

from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.gpt2 import parts  # the same GPT attributes hold the weights

#: Name prefix of a `LlamaForCausalLM` state dict (LlamaModel names have none).
STATE_DICT_PREFIX = "model."

MODEL_TYPE = "llama"

TASKS = ("causal_lm",)
DEFAULT_TASK = "causal_lm"

#: Non-weight buffers of older transformers versions.
IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)
TIED = ("lm_head.weight",)


def rope_theta(config, read):
    """`rope_theta`, top level (transformers 4) or in `rope_parameters` (5)."""
    field = "rope_parameters" if config.get("rope_parameters") is not None else "rope_scaling"
    parameters = read.nested(field)
    if parameters.get("rope_type", parameters.get("type", "default")) != "default":
        raise read.error(field, "only the default rotary embedding (no scaling) is supported")
    if "rope_theta" in config:
        return read.positive_float("rope_theta")
    return parameters.positive_float("rope_theta", default=10000.0)


def layout_options(config, read):
    """The `gpt` keyword arguments of the Llama layout that Mistral and Qwen2 share."""
    read.choice("hidden_act", ("silu",), default="silu")
    if read.get("pretraining_tp", 1) != 1:
        raise read.error("pretraining_tp", "only 1 is supported")
    d_model = read.positive_int("hidden_size")
    num_heads = read.positive_int("num_attention_heads")
    kv_heads = read.get("num_key_value_heads")
    head_dim = read.get("head_dim")
    return dict(
        vocabulary_size=read.positive_int("vocab_size"),
        max_length=read.positive_int("max_position_embeddings"),
        num_layers=read.positive_int("num_hidden_layers"),
        num_heads=num_heads,
        d_model=d_model,
        d_ff=read.positive_int("intermediate_size"),
        num_key_value_heads=None if kv_heads is None else read.positive_int("num_key_value_heads"),
        key_dim=None if head_dim in (None, d_model // num_heads) else read.positive_int("head_dim"),
        position="rope",
        rope_max_wavelength=rope_theta(config, read),
        norm="rms",
        activation="swiglu",
        use_bias=False,
        layer_norm_epsilon=read.positive_float("rms_norm_eps", default=1e-6),
        dropout=0.0,
        attention_dropout=read.rate("attention_dropout", default=0.0),
        tie_embeddings=read.boolean("tie_word_embeddings", default=False),
    )


def refuse_layer_types(read, supported="full_attention"):
    """A transformers-5 `layer_types` list must name `supported` attention in every layer."""
    types = read.get("layer_types")
    if types is not None and (not isinstance(types, list) or any(t != supported for t in types)):
        raise read.error("layer_types", f"only {supported!r} in every layer is supported")


def builder_options(config, read):
    """`gpt` keyword arguments from a config dict (`read` = a `ConfigReader`)."""
    for field in ("attention_bias", "mlp_bias"):
        if read.boolean(field, default=False):
            raise read.error(field, "only false (no projection biases) is supported")
    refuse_layer_types(read)
    return layout_options(config, read)


def entries(model, prefix="model."):
    """The weight mapping of a Llama-layout keras_tfm GPT (see the module docstring)."""
    p = parts(model)
    D, V, F = "hidden_size", "vocab_size", "intermediate_size"
    Q, KV = "num_attention_heads*head_dim", "num_key_value_heads*head_dim"
    out = [wm.copy(f"{prefix}embed_tokens.weight", p.token_embeddings, (V, D))]
    for i, block in enumerate(p.blocks):
        b = f"{prefix}layers.{i}"
        attention, ffn = block.self_attention_layer, block.feed_forward
        out.append(wm.copy(f"{b}.input_layernorm.weight", block.self_attention_norm.scale, (D,)))
        out.append(wm.linear(f"{b}.self_attn.q_proj.weight", attention.query_dense.kernel, (Q, D)))
        out.append(wm.linear(f"{b}.self_attn.k_proj.weight", attention.key_dense.kernel, (KV, D)))
        out.append(wm.linear(f"{b}.self_attn.v_proj.weight", attention.value_dense.kernel, (KV, D)))
        for name, layer, size in (("q", attention.query_dense, Q), ("k", attention.key_dense, KV)) + (
            ("v", attention.value_dense, KV),
        ):
            if layer.bias is not None:  # Qwen2: biases on Q, K and V
                out.append(wm.copy(f"{b}.self_attn.{name}_proj.bias", layer.bias, (size,), flatten=True))
        out.append(
            wm.linear(f"{b}.self_attn.o_proj.weight", attention.output_dense.kernel, (D, Q), input_axes=2)
        )
        out.append(wm.copy(f"{b}.post_attention_layernorm.weight", block.feed_forward_norm.scale, (D,)))
        out.append(wm.linear(f"{b}.mlp.gate_proj.weight", ffn.gate_dense.kernel, (F, D)))
        out.append(wm.linear(f"{b}.mlp.up_proj.weight", ffn.inner_dense.kernel, (F, D)))
        out.append(wm.linear(f"{b}.mlp.down_proj.weight", ffn.output_dense.kernel, (D, F)))
    out.append(wm.copy(f"{prefix}norm.weight", p.final_norm.scale, (D,)))
    if p.lm_head is not None:
        out.append(wm.linear("lm_head.weight", p.lm_head.kernel, (V, D)))
    return out


def is_llama_layout(model):
    """Whether a keras_tfm GPT has Llama's layout (RMSNorm, SwiGLU, RoPE, no biases)."""
    block = parts(model).blocks[0]
    return block.norm == "rms" and block.activation == "swiglu"


def hf_config(model, task, family="Llama", allowed=()):
    """config.json for a Llama-layout keras_tfm GPT (raises for options Llama lacks). Mistral
    and Qwen2 (`family`) allow their own GPT options (`allowed`: "sliding_window",
    "attention_bias") and add their fields."""
    p = parts(model)
    block = p.blocks[0]
    d_model = int(p.token_embeddings.shape[1])
    head_dim = block.key_dim or d_model // block.num_heads
    problems = []
    if block.norm != "rms":
        problems.append(f"norm='layer' ({family} uses RMSNorm)")
    if "attention_bias" not in allowed and block.attention_bias not in (None, False):
        problems.append(f"attention_bias={block.attention_bias!r} ({family} has no attention biases)")
    if "sliding_window" not in allowed and block.sliding_window is not None:
        problems.append(f"sliding_window={block.sliding_window} ({family} attends to every position)")
    wm.check_layout(
        family,
        block,
        norm_first=True,
        position="rope",
        use_bias=False,
        has_final_norm=p.final_norm is not None,
        extra=problems,
    )
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": MODEL_TYPE,
        "vocab_size": int(p.token_embeddings.shape[0]),
        "hidden_size": d_model,
        "intermediate_size": int(block.d_ff),
        "num_hidden_layers": len(p.blocks),
        "num_attention_heads": int(block.num_heads),
        "num_key_value_heads": int(block.num_key_value_heads or block.num_heads),
        "head_dim": int(head_dim),
        "max_position_embeddings": int(model.max_length),
        "rope_theta": float(block.rope_max_wavelength),
        "rms_norm_eps": float(block.layer_norm_epsilon),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": float(block.attention_dropout),
        "tie_word_embeddings": p.lm_head is None,
        "initializer_range": 0.02,
    }
