"""HuggingFace Marian / OPUS-MT checkpoints (`model_type: "marian"`) ↔ keras_tfm `Seq2Seq`.

config.json → `Seq2Seq` options: BART's layer options (`bart.layer_options`: post-LayerNorm
ε 1e-5, biases everywhere, one size for both stacks), and

    vocab_size → vocabulary_size (shared), or with share_encoder_decoder_embeddings false
        vocab_size → source_vocabulary_size, decoder_vocab_size → target_vocabulary_size
    activation_function ("swish" = SiLU) → activation
    scale_embedding (true in the hub files) → scale_embeddings (√d_model)
    pad_token_id → pad_id (V - 1: also the decoder start), and the generation defaults
        (`generation_config`: eos 0, forced EOS 0, `bad_words_ids` [[pad]] suppressed)

with position="sinusoidal_halves" (Marian's fixed sinusoid: sin(p / 10000^(2i/d)) in the
first half of the features, cos in the second, positions from 0), no embedding norm, the
logits bias, and the output tied to the (decoder) embedding. Old keys transformers 5
ignores (`static_position_embeddings`, `normalize_embedding`, `normalize_before`,
`add_final_layer_norm`) are ignored here too.

Weights (`MarianMTModel`, prefix "model."): BART's layer names (`bart.layer_entries`) and

    {p}shared.weight                 token embedding (V, d) of both sides, tied output
    {p}encoder.embed_tokens.weight, {p}decoder.embed_tokens.weight, lm_head.weight
                                     the embeddings of a model with separate vocabularies
                                     (lm_head tied to the decoder's)
    final_logits_bias                (1, V_target) (absent: zeros)
    {p}{s}.embed_positions.weight    the fixed sinusoid, never saved; ignored when present
"""

from keras_tfm.checkpoints import bart
from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.generation_config import read_special_ids

MODEL_TYPE = "marian"
TASKS = ("seq2seq_lm",)
DEFAULT_TASK = "seq2seq_lm"
STATE_DICT_PREFIX = "model."

IGNORED_SUFFIXES = ("embed_positions.weight",)
TIED = ("lm_head.weight",)
ZEROS_WHEN_MISSING = ("final_logits_bias",)


def builder_options(config, read):
    """`Seq2Seq` keyword arguments from a Marian config dict (`read` = a `ConfigReader`)."""
    vocabulary = read.positive_int("vocab_size")
    shared = read.boolean("share_encoder_decoder_embeddings", default=True)
    sizes = dict(vocabulary_size=vocabulary)
    if not shared:
        target = read.positive_int("decoder_vocab_size", default=vocabulary)
        sizes = dict(source_vocabulary_size=vocabulary, target_vocabulary_size=target, share_embeddings=False)
    return dict(
        bart.layer_options(read, "swish"),
        **sizes,
        position="sinusoidal_halves",
        scale_embeddings=read.boolean("scale_embedding", default=False),
        tie_embeddings=True,
    )


def checkpoint_options(config, read, directory):
    """The special ids and generation defaults beside config.json (`generation_config`)."""
    pad_id, generation = read_special_ids(config, directory, read.path)
    if pad_id is None:
        raise read.error("pad_token_id", "a Marian checkpoint needs its pad id (the decoder start)")
    return dict(pad_id=pad_id, generation_config=generation)


def entries(model, prefix="model."):
    """The weight mapping of a Marian-layout `Seq2Seq` (module docstring)."""
    wm.check_model_class(model, ("Seq2Seq",), "a keras_tfm Seq2Seq")
    D = "d_model"
    if model.shared_embeddings:
        out = [wm.copy(f"{prefix}shared.weight", model.encoder_token_embedding.embeddings, ("vocab_size", D))]
    else:
        out = [
            wm.copy(
                f"{prefix}encoder.embed_tokens.weight",
                model.encoder_token_embedding.embeddings,
                ("vocab_size", D),
            ),
            wm.copy(
                f"{prefix}decoder.embed_tokens.weight",
                model.decoder_token_embedding.embeddings,
                ("decoder_vocab_size", D),
            ),
        ]
    return out + bart.layer_entries(model, prefix) + [bart.logits_bias_entry(model)]


def hf_config(model, task):
    """config.json for a Marian-layout `Seq2Seq` (raises for options Marian lacks)."""
    block = model.encoder_blocks[0]
    extra = bart.layer_problems(model, block)
    if model.encoder_embedding_norm is not None or model.head is not None:
        extra.append("an embedding norm or an untied head (Marian has neither)")
    if model.encoder_embedding.position != "sinusoidal_halves":
        extra.append(f"position={model.position!r} (Marian: 'sinusoidal_halves')")
    wm.check_layout(
        "Marian", block, norm_first=False, position=None, use_bias=True, has_final_norm=False, extra=extra
    )
    config = {"architectures": ["MarianMTModel"], "model_type": MODEL_TYPE}
    config.update(bart.layer_config(model, block), vocab_size=int(model.source_vocabulary_size))
    config.update(
        decoder_vocab_size=int(model.target_vocabulary_size),
        share_encoder_decoder_embeddings=bool(model.shared_embeddings),
    )
    return config
