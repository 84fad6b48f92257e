"""HuggingFace Qwen2 / Qwen2.5 checkpoints (`model_type: "qwen2"`) ↔ keras_tfm `gpt` models.

Qwen2 is the Llama layout (`llama`: same config fields, rotate-half RoPE,
grouped-query attention, SwiGLU, RMSNorm) with biases on the query, key and
value projections and none on the output projection (`GPT(attention_bias="qkv")`):

    {p}layers.{i}.self_attn.q_proj.bias   (heads·head_dim,)
    {p}layers.{i}.self_attn.k_proj.bias   (kv_heads·head_dim,)
    {p}layers.{i}.self_attn.v_proj.bias   (kv_heads·head_dim,)

`use_sliding_window: false` (every published Qwen2 / Qwen2.5) means full
attention: `sliding_window` and `max_window_layers` are then ignored, as
HuggingFace ignores them; `use_sliding_window: true` (a window on the layers from
`max_window_layers` on) is refused by name. `tie_word_embeddings` is true for the
small models (no `lm_head.weight`) and false for the large ones.
"""

from keras_tfm.checkpoints import llama

STATE_DICT_PREFIX = llama.STATE_DICT_PREFIX
MODEL_TYPE = "qwen2"
TASKS = llama.TASKS
DEFAULT_TASK = llama.DEFAULT_TASK
IGNORED_SUFFIXES = llama.IGNORED_SUFFIXES
TIED = llama.TIED

entries = llama.entries


def builder_options(config, read):
    """`gpt` keyword arguments from a Qwen2 config dict (`read` = a `ConfigReader`)."""
    if read.boolean("use_sliding_window", default=False):
        raise read.error("use_sliding_window", "only false (full attention in every layer) is supported")
    llama.refuse_layer_types(read)
    options = llama.layout_options(config, read)
    options["attention_bias"] = "qkv"
    return options


def hf_config(model, task):
    """config.json of a Qwen2-layout keras_tfm GPT (Llama's fields, full attention)."""
    block = llama.parts(model).blocks[0]
    if block.attention_bias != "qkv":
        raise ValueError(
            f"This model cannot be saved as a Qwen2 checkpoint: it has attention_bias="
            f"{block.attention_bias!r} (Qwen2 has biases on Q, K and V only: 'qkv')."
        )
    config = llama.hf_config(model, task, family="Qwen2", allowed=("attention_bias",))
    for field in ("attention_bias", "mlp_bias"):
        del config[field]
    config.update(
        architectures=["Qwen2ForCausalLM"],
        model_type=MODEL_TYPE,
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=config["num_hidden_layers"],
    )
    return config
