"""Functions over a built `Seq2Seq`: its layer names, its encoder half as a
model of its own, and greedy decoding (kept for old callers; generation is
`keras_tfm.generation`)."""

import keras

from keras_tfm.models.seq2seq import Seq2Seq


def seq2seq_layer_names(model):
    """Names of the structural layers of a `Seq2Seq` model.

    Returns:
        dict with "encoder_embedding", "decoder_embedding" (both "embedding"
        when shared), "encoder_blocks", "decoder_blocks" (lists),
        "encoder_final_norm", "decoder_final_norm" (None for post-norm),
        "lm_head" (None when tied), "tied" (bool).
    """
    check_seq2seq(model)

    def name(layer):
        return None if layer is None else layer.name

    return {
        "encoder_embedding": model.encoder_embedding.name,
        "decoder_embedding": model.decoder_embedding.name,
        "encoder_blocks": [b.name for b in model.encoder_blocks],
        "decoder_blocks": [b.name for b in model.decoder_blocks],
        "encoder_final_norm": name(model.encoder_final_norm),
        "decoder_final_norm": name(model.decoder_final_norm),
        "lm_head": name(model.head),
        "tied": model.head is None,
    }


def check_seq2seq(model):
    if not isinstance(model, Seq2Seq):
        raise TypeError(
            f"`model` must be a keras_tfm Seq2Seq (from `seq2seq`); received {type(model).__name__}. A model "
            "saved before the model classes existed: convert it with `keras_tfm.models.from_functional(model)`."
        )
    return model


def seq2seq_encoder(model):
    """The encoder half of a `Seq2Seq` as a functional model sharing its
    weights: `encoder_token_ids` (B, S) → encoder output (B, S, d_model)
    (the memory the decoder blocks cross-attend to; it carries the source
    padding mask as a Keras mask)."""
    check_seq2seq(model)
    return keras.Model(model.input["encoder_token_ids"], model.encoder_output, name=f"{model.name}_encoder")


def seq2seq_greedy_decode(model, encoder_token_ids, bos_id, max_length, eos_id=None, batch_size=256):
    """Greedy decoding: `keras_tfm.generation.generate(model, encoder_token_ids,
    max_length, bos_id=bos_id, eos_id=eos_id)` (kept for old callers).

    Returns:
        int32 NumPy array (B, max_length) of generated ids (BOS excluded,
        0 after EOS).
    """
    import numpy as np

    from keras_tfm.generation import generate  # generation builds on models

    check_seq2seq(model)
    if not bos_id:
        raise ValueError(f"`bos_id` must be a non-zero id (0 is padding); received {bos_id!r}.")
    ids = np.asarray(encoder_token_ids, dtype="int32")
    if ids.ndim != 2:
        raise ValueError(f"`encoder_token_ids` must have shape (batch, length); received {ids.shape}.")
    parts = [
        generate(model, ids[i : i + batch_size], max_length, bos_id=bos_id, eos_id=eos_id)
        for i in range(0, len(ids), batch_size)
    ]
    return np.concatenate(parts, axis=0).astype("int32")


__all__ = ["check_seq2seq", "seq2seq_encoder", "seq2seq_greedy_decode", "seq2seq_layer_names"]
