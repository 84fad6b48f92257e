"""HuggingFace Mistral checkpoints (`model_type: "mistral"`) ↔ keras_tfm `gpt` models.

Mistral is the Llama layout (`llama`: same config fields, same weight names, no
biases, rotate-half RoPE, grouped-query attention) with a sliding window:

    sliding_window W → sliding_window W      (null: full attention)

HuggingFace's window (`masking_utils.sliding_window_overlay`) lets the query at
cache slot i see the keys at slots j with i - W < j ≤ i: the last W keys, itself
included, which is `GPT(sliding_window=W)` (`MultiHeadSelfAttention`), applied in
the full forward pass, the prefill and every cached decoding step.
"""

from keras_tfm.checkpoints import llama

STATE_DICT_PREFIX = llama.STATE_DICT_PREFIX
MODEL_TYPE = "mistral"
TASKS = llama.TASKS
DEFAULT_TASK = llama.DEFAULT_TASK
IGNORED_SUFFIXES = llama.IGNORED_SUFFIXES
TIED = llama.TIED

entries = llama.entries


def builder_options(config, read):
    """`gpt` keyword arguments from a Mistral config dict (`read` = a `ConfigReader`)."""
    window = read.get("sliding_window")
    llama.refuse_layer_types(read, "sliding_attention" if window is not None else "full_attention")
    options = llama.layout_options(config, read)
    options["sliding_window"] = None if window is None else read.positive_int("sliding_window")
    return options


def hf_config(model, task):
    """config.json of a Mistral-layout keras_tfm GPT (Llama's fields and `sliding_window`)."""
    config = llama.hf_config(model, task, family="Mistral", allowed=("sliding_window",))
    for field in ("attention_bias", "mlp_bias"):
        del config[field]
    window = llama.parts(model).blocks[0].sliding_window
    config.update(architectures=["MistralForCausalLM"], model_type=MODEL_TYPE, sliding_window=window)
    return config
