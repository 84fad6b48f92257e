"""HuggingFace BART checkpoints (`model_type: "bart"`) ↔ keras_tfm `Seq2Seq`.

config.json → `Seq2Seq` options (post-LayerNorm, ε 1e-5, biases everywhere):

    vocab_size → vocabulary_size (shared)    d_model → d_model
    encoder_layers, decoder_layers → num_encoder_layers, num_decoder_layers
    encoder_attention_heads = decoder_attention_heads → num_heads
    encoder_ffn_dim = decoder_ffn_dim → d_ff
    activation_function → activation ("gelu" is the exact GELU)
    max_position_embeddings → max_length     scale_embedding → scale_embeddings
    dropout, attention_dropout → dropout, attention_dropout
    tie_word_embeddings (default true) → tie_embeddings
    pad_token_id → pad_id, and the generation defaults (`generation_config`: decoder start
        2, eos 2, forced BOS 0 and forced EOS 2 in the hub files)

and always position="learned" with a table per side (separate_positions), an embedding
LayerNorm (embedding_norm) and the logits bias (logits_bias). Configs of the mBART layout
(`normalize_before`, `add_final_layer_norm` true) are refused: transformers 5 computes BART
without them.

Weights (`BartForConditionalGeneration`, prefix "model."; nn.Linear (out, in) = kernelᵀ):

    {p}shared.weight                           token embedding (V, d), tied output
    {p}{s}.embed_positions.weight              (max_position_embeddings + 2, d): position
                                               p reads row p + 2; rows 0 and 1 are never
                                               read (dropped here, written as zeros)
    {p}{s}.layernorm_embedding.{weight,bias}   embedding LayerNorm
    {p}{s}.layers.{i}.self_attn.{q,k,v,out}_proj.{weight,bias}
    {p}{s}.layers.{i}.self_attn_layer_norm.*   add & norm after self-attention
    {p}decoder.layers.{i}.encoder_attn.{q,k,v,out}_proj.*, encoder_attn_layer_norm.*
    {p}{s}.layers.{i}.fc1.*, fc2.*             FFN fc2(act(fc1 x))
    {p}{s}.layers.{i}.final_layer_norm.*       add & norm after the FFN
    final_logits_bias                          (1, V) added to the logits (absent: zeros)

`layer_entries` (the layers, without embeddings) is Marian's mapping too.
"""

import numpy as np

from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.generation_config import hf_special_ids, read_special_ids

MODEL_TYPE = "bart"
TASKS = ("seq2seq_lm",)
DEFAULT_TASK = "seq2seq_lm"
STATE_DICT_PREFIX = "model."

IGNORED_SUFFIXES = ()
TIED = ("lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
#: Weights whose absence means zeros (their initial value): no warning.
ZEROS_WHEN_MISSING = ("final_logits_bias",)

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}
ACTIVATION_NAMES = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}

#: Rows of `embed_positions` before position 0 (`BartLearnedPositionalEmbedding.offset`).
POSITION_OFFSET = 2


def _same(read, encoder_field, decoder_field, default=None):
    value = read.positive_int(encoder_field, default) if default else read.positive_int(encoder_field)
    if read.get(decoder_field, value) != value:
        raise read.error(decoder_field, f"must equal {encoder_field} = {value} (keras_tfm has one size)")
    return value


def layer_options(read, activation_default):
    """The options BART and Marian share (sizes, activation, dropouts, post-LayerNorm, biases)."""
    activation = read.choice("activation_function", tuple(ACTIVATIONS), default=activation_default)
    return dict(
        d_model=read.positive_int("d_model"),
        num_encoder_layers=read.positive_int("encoder_layers"),
        num_decoder_layers=read.positive_int("decoder_layers"),
        num_heads=_same(read, "encoder_attention_heads", "decoder_attention_heads"),
        d_ff=_same(read, "encoder_ffn_dim", "decoder_ffn_dim"),
        activation=ACTIVATIONS[activation],
        max_length=read.positive_int("max_position_embeddings"),
        dropout=read.rate("dropout", default=0.1),
        attention_dropout=read.rate("attention_dropout", default=0.0),
        norm="layer",
        norm_first=False,
        layer_norm_epsilon=1e-5,
        use_bias=True,
        logits_bias=True,
    )


def builder_options(config, read):
    """`Seq2Seq` keyword arguments from a BART config dict (`read` = a `ConfigReader`)."""
    for field in ("normalize_before", "add_final_layer_norm"):
        if read.get(field, False):
            raise read.error(field, "only false is supported (mBART's pre-norm layout is not BART's)")
    return dict(
        layer_options(read, "gelu"),
        vocabulary_size=read.positive_int("vocab_size"),
        position="learned",
        separate_positions=True,
        embedding_norm=True,
        scale_embeddings=read.boolean("scale_embedding", default=False),
        tie_embeddings=read.boolean("tie_word_embeddings", default=True),
    )


def checkpoint_options(config, read, directory):
    """The special ids and generation defaults beside config.json (`generation_config`)."""
    pad_id, generation = read_special_ids(config, directory, read.path)
    return dict(pad_id=1 if pad_id is None else pad_id, generation_config=generation)


def _linear(prefix, layer, fields, input_axes=1):
    return [
        wm.linear(f"{prefix}.weight", layer.kernel, fields, input_axes),
        wm.copy(f"{prefix}.bias", layer.bias, (fields[0],), flatten=True),
    ]


def _norm(prefix, layer):
    return [
        wm.copy(f"{prefix}.weight", layer.gamma, ("d_model",)),
        wm.copy(f"{prefix}.bias", layer.beta, ("d_model",)),
    ]


def _attention(prefix, layer, D):
    out = []
    for name, dense in (("q", layer.query_dense), ("k", layer.key_dense), ("v", layer.value_dense)):
        out += _linear(f"{prefix}.{name}_proj", dense, (D, D))
    return out + _linear(f"{prefix}.out_proj", layer.output_dense, (D, D), input_axes=2)


def layer_entries(model, prefix):
    """The mapping of the encoder and decoder layers (BART's and Marian's names)."""
    D, F = "d_model", "encoder_ffn_dim"
    out = []
    for side in ("encoder", "decoder"):
        for i, block in enumerate(getattr(model, f"{side}_blocks")):
            b = f"{prefix}{side}.layers.{i}"
            out += _attention(f"{b}.self_attn", block.self_attention_layer, D)
            out += _norm(f"{b}.self_attn_layer_norm", block.self_attention_norm)
            if block.cross_attention_layer is not None:
                out += _attention(f"{b}.encoder_attn", block.cross_attention_layer, D)
                out += _norm(f"{b}.encoder_attn_layer_norm", block.cross_attention_norm)
            out += _linear(f"{b}.fc1", block.feed_forward.inner_dense, (F, D))
            out += _linear(f"{b}.fc2", block.feed_forward.output_dense, (D, F))
            out += _norm(f"{b}.final_layer_norm", block.feed_forward_norm)
    return out


def logits_bias_entry(model):
    """`final_logits_bias` (1, V) ↔ the model's `LogitsBias` (V,)."""
    variable = model.logits_bias.bias
    size = int(variable.shape[0])
    return wm.Entry(
        "final_logits_bias",
        [variable],
        (1, size),
        ("1", "vocab_size"),
        lambda a: [a.reshape(size)],
        lambda values: np.asarray(values[0]).reshape(1, size),
        optional=True,
    )


def _positions(name, embedding):
    """`embed_positions` (P + 2, d) ↔ the learned table (P, d): rows 0 and 1 are never read."""
    variable = embedding.position_embedding.position_embeddings
    rows, width = (int(d) for d in variable.shape)
    return wm.Entry(
        name,
        [variable],
        (rows + POSITION_OFFSET, width),
        ("max_position_embeddings+2", "d_model"),
        lambda a: [a[POSITION_OFFSET:]],
        lambda values: np.concatenate(
            [np.zeros((POSITION_OFFSET, width), np.float32), np.asarray(values[0])]
        ),
    )


def entries(model, prefix="model."):
    """The weight mapping of a BART-layout `Seq2Seq` (module docstring)."""
    wm.check_model_class(model, ("Seq2Seq",), "a keras_tfm Seq2Seq")
    out = [
        wm.copy(f"{prefix}shared.weight", model.encoder_token_embedding.embeddings, ("vocab_size", "d_model"))
    ]
    for side in ("encoder", "decoder"):
        out.append(_positions(f"{prefix}{side}.embed_positions.weight", getattr(model, f"{side}_embedding")))
        out += _norm(f"{prefix}{side}.layernorm_embedding", getattr(model, f"{side}_embedding_norm"))
    out += layer_entries(model, prefix)
    if model.head is not None:
        out.append(wm.linear("lm_head.weight", model.head.dense.kernel, ("vocab_size", "d_model")))
    return out + [logits_bias_entry(model)]


def layer_problems(model, block):
    """What a model lacks of BART's / Marian's layer layout (for `check_layout`)."""
    problems = []
    if block.norm != "layer" or block.attention_scale is not None or block.activation not in ACTIVATION_NAMES:
        problems.append(
            f"norm={block.norm!r}, attention_scale={block.attention_scale}, activation={block.activation!r}"
        )
    if model.logits_bias is None or model.logits_scale != 1.0 or model.pad_id is None:
        problems.append("no logits bias, a logits scale or no pad_id")
    if model.head is not None and model.head.use_bias:
        problems.append("an lm_head bias")
    return problems


def layer_config(model, block):
    """The config.json fields BART and Marian share."""
    return {
        "d_model": int(model.d_model),
        "encoder_layers": len(model.encoder_blocks),
        "decoder_layers": len(model.decoder_blocks),
        "encoder_attention_heads": int(model.num_heads),
        "decoder_attention_heads": int(model.num_heads),
        "encoder_ffn_dim": int(block.d_ff),
        "decoder_ffn_dim": int(block.d_ff),
        "activation_function": ACTIVATION_NAMES[block.activation],
        "max_position_embeddings": int(model.max_length),
        "dropout": float(block.dropout),
        "attention_dropout": float(block.attention_dropout),
        "activation_dropout": 0.0,
        "scale_embedding": bool(model.encoder_token_embedding.scale),
        "tie_word_embeddings": bool(model.tie_embeddings),
        "is_encoder_decoder": True,
        "init_std": 0.02,
        **{k: v for k, v in hf_special_ids(model).items() if v is not None},
    }


def hf_config(model, task):
    """config.json for a BART-layout `Seq2Seq` (raises for options BART lacks)."""
    block = model.encoder_blocks[0]
    extra = layer_problems(model, block)
    if model.encoder_embedding_norm is None or model.encoder_embedding is model.decoder_embedding:
        extra.append("no embedding norm or one position table for both sides (BART has both per side)")
    if not model.shared_embeddings or model.encoder_embedding.position != "learned":
        extra.append("separate vocabularies or positions other than 'learned'")
    wm.check_layout(
        "BART", block, norm_first=False, position=None, use_bias=True, has_final_norm=False, extra=extra
    )
    config = {"architectures": ["BartForConditionalGeneration"], "model_type": MODEL_TYPE}
    config.update(layer_config(model, block), vocab_size=int(model.vocabulary_size))
    config.setdefault("bos_token_id", 0)
    return config
