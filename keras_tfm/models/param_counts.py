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
from keras_tfm.models.gpt import GPT, GPT_SIZES
from keras_tfm.models.parts import preset_options
from keras_tfm.models.seq2seq import Seq2Seq, resolve_vocabularies, seq2seq_options


def _with_defaults(model_class, options):
    """`options` completed by the class defaults (d_ff = 4·d_model)."""
    merged = {
        name: parameter.default
        for name, parameter in inspect.signature(model_class).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    merged.update(options)
    if merged.get("d_ff") is None:
        merged["d_ff"] = 4 * merged["d_model"]
    return merged


def block_num_params(o, cross_attention=False):
    """Weights of one `TransformerBlock` with the options `o` (a model config)."""
    d, ff, heads = o["d_model"], o["d_ff"], o["num_heads"]
    head_dim = o.get("key_dim") or d // heads
    inner, kv = heads * head_dim, (o.get("num_key_value_heads") or heads) * head_dim
    bias = 1 if o.get("use_bias", True) else 0
    attention = 2 * d * inner + 2 * d * kv + bias * (inner + 2 * kv + d)
    gated = o.get("activation") in GATED_ACTIVATIONS
    ffn = (3 if gated else 2) * d * ff + bias * ((2 if gated else 1) * ff + d)
    norm = d if o.get("norm") == "rms" else 2 * d
    sublayers = 3 if cross_attention else 2
    return sublayers * norm + ffn + attention * (2 if cross_attention else 1)


def _final_norm(o):
    if not o.get("norm_first"):
        return 0
    return o["d_model"] if o.get("norm") == "rms" else 2 * o["d_model"]


def _head(o, vocabulary_size):
    if o.get("tie_embeddings", True):
        return 0
    return vocabulary_size * o["d_model"] + (vocabulary_size if o.get("lm_head_use_bias") else 0)


def gpt_num_params(preset=None, **options):
    """Parameter count of `gpt(preset, **options)`, without building it.

    Example: `gpt_num_params("llama2_7b")` is 6,738,415,616.
    """
    o = _with_defaults(GPT, preset_options(GPT, "gpt", preset, options, GPT_SIZES))
    d, vocabulary = o["d_model"], o["vocabulary_size"]
    embeddings = vocabulary * d + (o["max_length"] * d if o["position"] == "learned" else 0)
    total = embeddings + o["num_layers"] * block_num_params(o) + _final_norm(o) + _head(o, vocabulary)
    return int(total)


def seq2seq_num_params(preset=None, **options):
    """Parameter count of `seq2seq(preset, **options)`, without building it
    (shared or separate embeddings, learned positions add max_length·d per
    embedding, tied or untied output)."""
    o = _with_defaults(Seq2Seq, seq2seq_options(preset, options))
    src, tgt, shared = resolve_vocabularies(
        o["vocabulary_size"], o["source_vocabulary_size"], o["target_vocabulary_size"], o["share_embeddings"]
    )
    d = o["d_model"]
    n_enc = o["num_encoder_layers"] or o["num_layers"]
    n_dec = o["num_decoder_layers"] or o["num_layers"]
    embeddings = src * d if shared else (src + tgt) * d
    if o["position"] == "learned":
        embeddings += o["max_length"] * d * (1 if shared else 2)
    blocks = n_enc * block_num_params(o) + n_dec * block_num_params(o, cross_attention=True)
    return int(embeddings + blocks + 2 * _final_norm(o) + _head(o, tgt))


__all__ = ["block_num_params", "gpt_num_params", "seq2seq_num_params"]
