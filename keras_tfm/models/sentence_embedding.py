"""`SentenceEncoder`: one vector per text from a BERT encoder (Sentence-BERT).

    h = BERT(tokens)                                    (B, T, d) sequence output
    p = Σ_t m_t h_t / Σ_t m_t       pooling "mean"      (real tokens only, m = padding mask)
        h_0                         pooling "cls"
        max_{t: m_t=1} h_t          pooling "max"
    e = p / ‖p‖₂                    normalize=True      (float32)

As sentence-transformers computes it for checkpoints such as
all-MiniLM-L6-v2 (`1_Pooling/config.json` picks the pooling, a `Normalize`
module in `modules.json` the L2 normalisation). Cosine similarity of two
normalised embeddings is their dot product.
"""

import keras

from keras_tfm.checks import check_bool, check_choice
from keras_tfm.models.heads import POOLINGS, SequencePooling


@keras.saving.register_keras_serializable(package="keras_tfm")
class SentenceEncoder(keras.Model):
    """Sentence embeddings: pooled (and L2-normalised) BERT sequence output.

    A functional model with the encoder's inputs (`token_ids`, `segment_ids`,
    `padding_mask`) and one float32 output `(batch, d_model)`.

    Args:
        encoder: a `bert_encoder` model (called as one nested layer).
        pooling: "mean" (sentence-transformers' default), "cls" or "max".
        normalize: L2-normalise the pooled vector.
        name: model name.

    Attributes:
        encoder: the BERT encoder.
        pooling: the pooling mode.
        normalize: whether vectors are unit length.
    """

    def __init__(self, encoder, pooling="mean", normalize=True, name="sentence_encoder", **kwargs):
        if not isinstance(encoder, keras.Model):
            raise TypeError(f"`encoder` must be a BERT encoder keras.Model; received {encoder!r}.")
        pooling = check_choice("pooling", pooling, POOLINGS)
        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in encoder.input}
        outputs = encoder(inputs)
        if not isinstance(outputs, dict) or "sequence_output" not in outputs:
            raise ValueError("`encoder` must output a dict with 'sequence_output' (a `bert_encoder` model).")
        pooled = SequencePooling(pooling, dtype=encoder.dtype_policy, name=f"{pooling}_pooling")(
            outputs["sequence_output"], padding_mask=inputs["padding_mask"]
        )
        pooled = keras.layers.Activation("linear", dtype="float32", name="float32")(pooled)
        if normalize:
            pooled = keras.layers.UnitNormalization(axis=-1, dtype="float32", name="normalize")(pooled)
        super().__init__(inputs, pooled, name=name, **kwargs)
        self.encoder = encoder
        self.pooling = pooling
        self.normalize = check_bool("normalize", normalize)

    def get_config(self):
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "pooling": self.pooling,
            "normalize": self.normalize,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        encoder = keras.saving.deserialize_keras_object(config.pop("encoder"), custom_objects=custom_objects)
        return cls(encoder, **config)


def embed_texts(model, tokenizer, texts, max_length=256, batch_size=64):
    """Embeddings of `texts` with a `SentenceEncoder` (batched by length, in input order).

    Args:
        model: a `SentenceEncoder` (e.g. `keras_tfm.models.sentence_encoder(path)`).
        tokenizer: its tokenizer (`WordPieceTokenizer.from_pretrained(path)`).
        texts: list of str.
        max_length: longer texts are truncated (sentence-transformers'
            `max_seq_length`, 256 for all-MiniLM-L6-v2).
        batch_size: texts per forward pass.

    Returns:
        float32 NumPy array `(len(texts), d_model)`.
    """
    import numpy as np

    from keras_tfm.text_batches import LengthBucketedBatches, encode_texts

    rows = encode_texts(tokenizer, texts, max_length)
    batches = LengthBucketedBatches(rows, None, batch_size, shuffle=False, pad_id=tokenizer.pad_id)
    out = np.zeros((len(rows), int(model.output.shape[-1])), np.float32)
    for i in range(len(batches)):
        out[batches.batches[i]] = np.asarray(model(batches[i], training=False), np.float32)
    return out
