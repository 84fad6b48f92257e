"""HuggingFace T5 checkpoints (`model_type: "t5"`: T5 v1.0, v1.1, Flan-T5) ↔ keras_tfm `Seq2Seq`.

config.json → `Seq2Seq` options (pre-RMSNorm, no biases, no √d scales, relative positions):

    vocab_size → vocabulary_size (shared)    d_model → d_model
    num_layers → num_encoder_layers          num_decoder_layers → num_decoder_layers
    num_heads → num_heads                    d_kv → key_dim
    d_ff → d_ff                              layer_norm_epsilon → layer_norm_epsilon
    relative_attention_num_buckets, relative_attention_max_distance → relative_*
    feed_forward_proj "relu" → "relu"; "gated-gelu" → "geglu_tanh" (HF runs gelu_new);
        "gated-silu" → "swiglu"; "gelu" → "gelu"
    tie_word_embeddings (absent: true) → tie_embeddings, and logits_scale = d_model^-0.5
        when tied (v1.0); a transformers-5 config's `scale_decoder_outputs` is the scale
        itself, with an untied head when the file holds an `lm_head.weight`
    dropout_rate → dropout                   n_positions (absent: 512) → max_length
    pad_token_id → pad_id, and the generation defaults (`generation_config`)

and always position="relative" with one bias table per stack (share_position_bias),
attention_scale=1 (T5 has no 1/√d_k), norm="rms", norm_first, use_bias=False,
scale_embeddings=False.

Weights (`T5ForConditionalGeneration`, no name prefix; nn.Linear (out, in) = kernelᵀ):

    shared.weight                                      embedding (V, d) of both sides
    encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight
                                                       encoder table (buckets, heads)
    decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight   decoder table
    {s}.block.{i}.layer.0.SelfAttention.{q,k,v,o}.weight    self-attention
    {s}.block.{i}.layer.0.layer_norm.weight            its pre-norm (RMS scale)
    decoder.block.{i}.layer.1.EncDecAttention.{q,k,v,o}.weight, layer.1.layer_norm.weight
    {s}.block.{i}.layer.{1|2}.DenseReluDense.wi.weight (d_ff, d); gated: wi_0 (the
        activated gate) and wi_1 (the linear branch); wo.weight (d, d_ff)
    {s}.block.{i}.layer.{1|2}.layer_norm.weight        FFN pre-norm
    {s}.final_layer_norm.weight                        final norm of the stack
    lm_head.weight                                     (V, d), untied models only

Copies of `shared.weight` (`encoder.embed_tokens`, `decoder.embed_tokens`) and the unused
cross-attention table of old files are ignored.
"""

import os

from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.files import weight_files
from keras_tfm.checkpoints.generation_config import read_special_ids

MODEL_TYPE = "t5"
TASKS = ("seq2seq_lm",)
DEFAULT_TASK = "seq2seq_lm"
STATE_DICT_PREFIX = ""

IGNORED_SUFFIXES = ("EncDecAttention.relative_attention_bias.weight",)
TIED = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")

#: feed_forward_proj → activation (HF: `gated-gelu` runs gelu_new, the tanh form).
ACTIVATIONS = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "silu": "silu",
    "gated-gelu": "geglu_tanh",
    "gated-gelu_new": "geglu_tanh",
    "gated-silu": "swiglu",
}
FEED_FORWARD_PROJ = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}
FEED_FORWARD_PROJ.update({"geglu_tanh": "gated-gelu", "swiglu": "gated-silu"})

#: The longest sequence when the config names none (T5 positions are relative: any length runs).
DEFAULT_MAX_LENGTH = 512


def _scaled_output(config):
    """Whether the logits are scaled by d_model^-0.5: transformers 5's `scale_decoder_outputs`,
    else a tied head (4.x files: `tie_word_embeddings` absent or true)."""
    if "scale_decoder_outputs" in config:
        return config["scale_decoder_outputs"] is not False
    return config.get("tie_word_embeddings", True) is not False


def builder_options(config, read):
    """`Seq2Seq` keyword arguments from a T5 config dict (`read` = a `ConfigReader`)."""
    projection = read.choice("feed_forward_proj", tuple(ACTIVATIONS), default="relu")
    d_model, num_heads = read.positive_int("d_model"), read.positive_int("num_heads")
    scaled = _scaled_output(config)
    num_layers = read.positive_int("num_layers")
    return dict(
        vocabulary_size=read.positive_int("vocab_size"),
        max_length=read.positive_int("n_positions", default=DEFAULT_MAX_LENGTH),
        num_encoder_layers=num_layers,
        num_decoder_layers=read.positive_int("num_decoder_layers", default=num_layers),
        num_heads=num_heads,
        d_model=d_model,
        key_dim=read.positive_int("d_kv"),
        d_ff=read.positive_int("d_ff"),
        dropout=read.rate("dropout_rate", default=0.1),
        position="relative",
        relative_num_buckets=read.positive_int("relative_attention_num_buckets", default=32),
        relative_max_distance=read.positive_int("relative_attention_max_distance", default=128),
        share_position_bias=True,
        attention_scale=1.0,
        norm="rms",
        norm_first=True,
        layer_norm_epsilon=read.positive_float("layer_norm_epsilon", default=1e-6),
        activation=ACTIVATIONS[projection],
        use_bias=False,
        scale_embeddings=False,
        tie_embeddings=scaled,
        logits_scale=d_model**-0.5 if scaled else 1.0,
    )


def checkpoint_options(config, read, directory):
    """The options read beside config.json: the special ids (`generation_config`), and for a
    transformers-5 config the head (untied when the file holds an `lm_head.weight`)."""
    pad_id, generation = read_special_ids(config, directory, read.path)
    options = dict(pad_id=0 if pad_id is None else pad_id, generation_config=generation)
    if "scale_decoder_outputs" in config and not _scaled_output(config):
        options["tie_embeddings"] = "lm_head.weight" not in _weight_names(directory)
    return options


def _weight_names(directory):
    from safetensors import safe_open

    files, weight_map = weight_files(directory)
    if weight_map is not None:
        return set(weight_map)
    with safe_open(os.path.join(directory, files[0]), framework="numpy") as handle:
        return set(handle.keys())


def _attention(prefix, layer, D, Q):
    return [
        wm.linear(f"{prefix}.q.weight", layer.query_dense.kernel, (Q, D)),
        wm.linear(f"{prefix}.k.weight", layer.key_dense.kernel, (Q, D)),
        wm.linear(f"{prefix}.v.weight", layer.value_dense.kernel, (Q, D)),
        wm.linear(f"{prefix}.o.weight", layer.output_dense.kernel, (D, Q), input_axes=2),
    ]


def _feed_forward(prefix, ffn, D, F):
    out = [wm.linear(f"{prefix}.wo.weight", ffn.output_dense.kernel, (D, F))]
    if ffn.gate_dense is None:
        return out + [wm.linear(f"{prefix}.wi.weight", ffn.inner_dense.kernel, (F, D))]
    return out + [
        wm.linear(f"{prefix}.wi_0.weight", ffn.gate_dense.kernel, (F, D)),
        wm.linear(f"{prefix}.wi_1.weight", ffn.inner_dense.kernel, (F, D)),
    ]


def entries(model, prefix=""):
    """The weight mapping of a T5-layout `Seq2Seq` (module docstring)."""
    wm.check_model_class(model, ("Seq2Seq",), "a keras_tfm Seq2Seq")
    D, V, F, Q = "d_model", "vocab_size", "d_ff", "num_heads*d_kv"
    B, H = "relative_attention_num_buckets", "num_heads"
    out = [wm.copy(f"{prefix}shared.weight", model.encoder_token_embedding.embeddings, (V, D))]
    for side in ("encoder", "decoder"):
        table = getattr(model, f"{side}_position_bias")
        bias = f"{prefix}{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        out.append(wm.copy(bias, table.embeddings, (B, H)))
        for i, block in enumerate(getattr(model, f"{side}_blocks")):
            b = f"{prefix}{side}.block.{i}.layer"
            out += _attention(f"{b}.0.SelfAttention", block.self_attention_layer, D, Q)
            out.append(wm.copy(f"{b}.0.layer_norm.weight", block.self_attention_norm.scale, (D,)))
            ffn = 1
            if block.cross_attention_layer is not None:
                out += _attention(f"{b}.1.EncDecAttention", block.cross_attention_layer, D, Q)
                out.append(wm.copy(f"{b}.1.layer_norm.weight", block.cross_attention_norm.scale, (D,)))
                ffn = 2
            out += _feed_forward(f"{b}.{ffn}.DenseReluDense", block.feed_forward, D, F)
            out.append(wm.copy(f"{b}.{ffn}.layer_norm.weight", block.feed_forward_norm.scale, (D,)))
        out.append(
            wm.copy(
                f"{prefix}{side}.final_layer_norm.weight", getattr(model, f"{side}_final_norm").scale, (D,)
            )
        )
    if model.head is not None:
        out.append(wm.linear(f"{prefix}lm_head.weight", model.head.dense.kernel, (V, D)))
    return out


def save_entries(model, task):
    """The mapping `save_pretrained` writes (T5ForConditionalGeneration's layout)."""
    return entries(model)


def _layout_problems(model, block):
    d_model = model.d_model
    problems = []
    if not model.shared_embeddings:
        problems.append("separate source and target embeddings (T5 shares one)")
    if model.encoder_position_bias is None:
        problems.append("no shared relative position tables (share_position_bias=False)")
    if block.norm != "rms" or block.attention_scale != 1.0:
        problems.append(f"norm={block.norm!r}, attention_scale={block.attention_scale} (T5: 'rms', 1.0)")
    if block.activation not in FEED_FORWARD_PROJ:
        problems.append(f"activation={block.activation!r}")
    if model.encoder_token_embedding.scale or model.encoder_embedding_norm is not None:
        problems.append("an embedding scale or norm (T5 has neither)")
    if model.logits_bias is not None or (model.head is not None and model.head.use_bias):
        problems.append("a logits bias")
    scaled = abs(model.logits_scale - d_model**-0.5) < 1e-6 * d_model**-0.5
    if model.tie_embeddings != scaled or (not scaled and model.logits_scale != 1.0):
        problems.append(
            f"tie_embeddings={model.tie_embeddings} with logits_scale={model.logits_scale} (T5: tied with "
            "d_model^-0.5, or untied with 1)"
        )
    if model.pad_id is None:
        problems.append("no pad_id (T5 pads with 0 and masks by it, not by mask_zero)")
    return problems


def hf_config(model, task):
    """config.json (transformers 4.x form, read by 4.x and 5.x) for a T5-layout `Seq2Seq`."""
    from keras_tfm.checkpoints.generation_config import hf_special_ids

    block = model.encoder_blocks[0]
    wm.check_layout(
        "T5",
        block,
        norm_first=True,
        position="relative",
        use_bias=False,
        has_final_norm=model.encoder_final_norm is not None,
        extra=_layout_problems(model, block),
    )
    table = model.encoder_position_bias
    config = {
        "architectures": ["T5ForConditionalGeneration"],
        "model_type": MODEL_TYPE,
        "vocab_size": int(model.vocabulary_size),
        "d_model": int(model.d_model),
        "d_kv": int(model.key_dim),
        "d_ff": int(block.d_ff),
        "num_layers": len(model.encoder_blocks),
        "num_decoder_layers": len(model.decoder_blocks),
        "num_heads": int(model.num_heads),
        "relative_attention_num_buckets": int(table.num_buckets),
        "relative_attention_max_distance": int(table.max_distance),
        "layer_norm_epsilon": float(block.layer_norm_epsilon),
        "feed_forward_proj": FEED_FORWARD_PROJ[block.activation],
        "dropout_rate": float(block.dropout),
        "n_positions": int(model.max_length),
        "tie_word_embeddings": bool(model.tie_embeddings),
        "is_encoder_decoder": True,
        "initializer_factor": 1.0,
    }
    config.update({k: v for k, v in hf_special_ids(model).items() if v is not None})
    return config
