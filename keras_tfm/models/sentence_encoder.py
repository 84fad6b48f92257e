"""`SentenceEncoder`: one vector per text from a BERT encoder (Sentence-BERT).

    h = BERT(tokens)                                    (B, T, d) sequence output
    p = Σ_t m_t h_t / Σ_t m_t       pooling "mean"      (real tokens only, m = padding mask)
        h_0                         pooling "cls"
        max_{t: m_t=1} h_t          pooling "max"
    e = p / ‖p‖₂                    normalize=True      (float32)

As sentence-transformers computes it for checkpoints such as
all-MiniLM-L6-v2 (`1_Pooling/config.json` picks the pooling, a `Normalize`
module in `modules.json` the L2 normalisation). Cosine similarity of two
normalised embeddings is their dot product. `embed` (and `keras_tfm.data.embed_texts`, the
same path with a tokenizer given) runs one over a list of texts.
"""

import keras

from keras_tfm.checks import check_bool, check_choice
from keras_tfm.models.bert import BertEncoder
from keras_tfm.models.bert_tasks import BertTask, as_encoder
from keras_tfm.models.heads import POOLINGS, SequencePooling


@keras.saving.register_keras_serializable(package="keras_tfm")
class SentenceEncoder(BertTask):
    """Sentence embeddings: pooled (and L2-normalised) BERT sequence output.

    A functional model on the encoder's inputs (`token_ids`, `segment_ids`,
    `padding_mask`) with one float32 output `(batch, d_model)`; like the other
    BERT task models its layers are the encoder's (shared) plus its own.

    Args:
        encoder: a `BertEncoder` (`bert_encoder`).
        pooling: "mean" (sentence-transformers' default), "cls" or "max".
        normalize: L2-normalise the pooled vector.
        name: model name.

    Attributes:
        the encoder's parts (see `BertTask`) and `encoder`; `pooling_layer`
        (a `SequencePooling`), `normalization` (`UnitNormalization` or None),
        `pooling`, `normalize`; `pooler` is None (not used).
    """

    checkpoint_task = "sentence_embedding"  # from_preset: the from_pretrained task

    @classmethod
    def _checkpoint_head(cls, checkpoint, options):
        """Pooling and normalisation as the checkpoint's sentence-transformers files say
        (`1_Pooling/config.json`, `modules.json`; mean and normalised without them)."""
        pooling, normalize = checkpoint.sentence_pooling()
        pooling = options.pop("pooling", None) or pooling
        given = options.pop("normalize", None)
        return dict(pooling=pooling, normalize=normalize if given is None else given)

    def __init__(
        self,
        encoder: BertEncoder,
        pooling: str = "mean",
        normalize: bool = True,
        name: str = "sentence_encoder",
        **kwargs,
    ):
        encoder = as_encoder(encoder)
        pooling = check_choice("pooling", pooling, POOLINGS)
        normalize = check_bool("normalize", normalize)
        dtype = encoder.blocks[0].dtype_policy
        pooling_layer = SequencePooling(pooling, dtype=dtype, name=f"{pooling}_pooling")
        pooled = pooling_layer(encoder.output["sequence_output"], padding_mask=encoder.input["padding_mask"])
        pooled = keras.layers.Identity(dtype="float32", name="float32_embedding")(pooled)
        normalization = None
        if normalize:
            normalization = keras.layers.UnitNormalization(axis=-1, dtype="float32", name="normalize")
            pooled = normalization(pooled)
        self._init_task(encoder, pooled, name, dict(pooling=pooling, normalize=normalize), **kwargs)
        self.pooler = None
        self.pooling_layer = pooling_layer
        self.normalization = normalization
        self.pooling = pooling
        self.normalize = normalize

    def embed(self, texts, batch_size: int | None = None, max_length: int | None = None):
        """Unit-length embeddings of texts (cosine similarity = dot product).

        Each text is encoded as the exported `embed` signature encodes it (`[CLS] … [SEP]`
        with `model.tokenizer`, cut to `max_length`), the texts are run in batches of similar
        lengths (the path of `keras_tfm.data.embed_texts`, which gives the same vectors), and the
        pooled vectors are L2-normalised (by the model when `normalize=True`, else here).

        Args:
            texts: a str, or a list / tuple / 1-D array of str.
            batch_size: texts per forward pass (default 64).
            max_length: tokens per text, [CLS] and [SEP] included (default and maximum:
                the model's `max_length`; all-MiniLM-L6-v2 was trained with 256).

        Returns:
            float32 NumPy array `(len(texts), d_model)`, `(d_model,)` for one str.

        Raises:
            ValueError: the model has no tokenizer, an empty list, a bad `max_length`.
            TypeError: `texts` is not a str or a list of str.
        """
        from keras_tfm.models import bert_text  # TensorFlow ops: imported when text arrives

        return bert_text.embed(self, texts, batch_size=batch_size, max_length=max_length)


def sentence_encoder(path: str, **options) -> SentenceEncoder:
    """`SentenceEncoder.from_preset(path, **options)`: a checkpoint's sentence embedder, whose
    pooling ("mean", "cls", "max") follows its `1_Pooling/config.json` and whose L2
    normalisation follows `modules.json` (mean pooling and normalisation without them)."""
    return SentenceEncoder.from_preset(path, **options)
