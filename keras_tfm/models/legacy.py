"""`from_functional`: a model saved before the model classes existed → its class.

Until the builders returned `GPT`, `BertEncoder`, `Seq2Seq`, `ViT`, ... they
returned plain functional `keras.Model`s; their `.keras` files still load with
`keras.saving.load_model` (as plain functional models, the layers are
unchanged). `from_functional(model)` rebuilds such a model as its class, with
the same layers, names and weights, so generation, export and the checkpoint
mappings accept it. This module is the only place that knows the builders'
old layer-name contract ("decoder_block_{i}", "embedding", ...): it reads the
hyperparameters back from those layers' configs (construction code, like the
classes' constructors).
"""

import keras

from keras_tfm.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.bert import BertEncoder
from keras_tfm.models.bert_tasks import BertClassifier, BertMaskedLM, BertTokenClassifier
from keras_tfm.models.gpt import GPT
from keras_tfm.models.seq2seq import Seq2Seq
from keras_tfm.models.vit import ViT


def _numbered(layers, prefix):
    found = []
    while f"{prefix}{len(found)}" in layers:
        found.append(layers[f"{prefix}{len(found)}"])
    return found


def _dtype(layer):
    policy = layer.dtype_policy.name
    return None if policy == keras.config.dtype_policy().name else policy


def _block_options(block):
    c = block.get_config()
    return dict(
        num_heads=c["num_heads"],
        d_model=c["d_model"],
        d_ff=c["d_ff"],
        dropout=c["dropout"],
        attention_dropout=c["attention_dropout"],
        norm_first=c["norm_first"],
        activation=c["activation"],
        layer_norm_epsilon=c["layer_norm_epsilon"],
        use_bias=c["use_bias"],
        key_dim=c["key_dim"],
        attention_impl=c["attention_impl"],
        attention_options=c["attention_options"] or None,
        kernel_initializer=c["kernel_initializer"],
    )


def _embedding_position(embedding, block):
    return embedding.position if embedding.position is not None else block.position


def _gpt(model, layers):
    embedding, blocks = layers["embedding"], _numbered(layers, "decoder_block_")
    head = layers.get("lm_head")
    return GPT(
        vocabulary_size=embedding.vocabulary_size,
        max_length=embedding.max_length,
        num_layers=len(blocks),
        position=_embedding_position(embedding, blocks[0]),
        tie_embeddings=head is None,
        lm_head_use_bias=bool(head is not None and head.use_bias),
        with_padding_mask=isinstance(model.input, dict),
        embeddings_initializer=keras.initializers.serialize(embedding.embeddings_initializer),
        dtype=_dtype(blocks[0]),
        name=model.name,
        **_block_options(blocks[0]),
    )


def _bert_encoder(layers, name="bert"):
    embedding, blocks = layers["embedding"], _numbered(layers, "encoder_block_")
    return BertEncoder(
        vocabulary_size=embedding.vocabulary_size,
        max_length=embedding.max_length,
        num_segments=layers["segment_embedding"].input_dim,
        num_layers=len(blocks),
        position=_embedding_position(embedding, blocks[0]),
        embeddings_initializer=keras.initializers.serialize(embedding.embeddings_initializer),
        dtype=_dtype(blocks[0]),
        name=name,
        **_block_options(blocks[0]),
    )


def _seq2seq(model, layers):
    shared = "embedding" in layers
    encoder_embedding = layers["embedding" if shared else "encoder_embedding"]
    decoder_embedding = layers["embedding" if shared else "decoder_embedding"]
    encoder_blocks = _numbered(layers, "encoder_block_")
    decoder_blocks = _numbered(layers, "decoder_block_")
    head = layers.get("lm_head")
    vocabularies = (
        dict(vocabulary_size=encoder_embedding.vocabulary_size, share_embeddings=True)
        if shared
        else dict(
            source_vocabulary_size=encoder_embedding.vocabulary_size,
            target_vocabulary_size=decoder_embedding.vocabulary_size,
            share_embeddings=False,
        )
    )
    return Seq2Seq(
        **vocabularies,
        max_length=decoder_embedding.max_length,
        num_encoder_layers=len(encoder_blocks),
        num_decoder_layers=len(decoder_blocks),
        position=_embedding_position(decoder_embedding, decoder_blocks[0]),
        tie_embeddings=head is None,
        scale_embeddings=decoder_embedding.scale,
        lm_head_use_bias=bool(head is not None and head.use_bias),
        embeddings_initializer=keras.initializers.serialize(decoder_embedding.embeddings_initializer),
        dtype=_dtype(decoder_blocks[0]),
        name=model.name,
        **_block_options(decoder_blocks[0]),
    )


def _vit(model, layers):
    blocks = _numbered(layers, "encoder_block_")
    options = _block_options(blocks[0])
    patches = layers["patch_embedding"]
    _, height, width, channels = model.input.shape
    vit_options = (
        "num_heads",
        "d_model",
        "d_ff",
        "dropout",
        "attention_dropout",
        "activation",
        "layer_norm_epsilon",
    )
    return ViT(
        image_size=(height, width),
        patch_size=tuple(patches.patch_size),
        num_classes=layers["classifier"].units,
        num_layers=len(blocks),
        num_channels=channels,
        position="learned"
        if isinstance(layers["position_encoding"], LearnedPositionalEmbedding)
        else "sinusoidal2d",
        pooling="mean" if "mean_pooling" in layers else "cls",
        dtype=_dtype(blocks[0]),
        name=model.name,
        **{key: options[key] for key in vit_options},
    )


def _rebuild(model, layers):
    if "patch_embedding" in layers:
        return _vit(model, layers)
    if "decoder_block_0" in layers:
        cross = layers["decoder_block_0"].cross_attention
        return _seq2seq(model, layers) if cross else _gpt(model, layers)
    if "encoder_block_0" in layers and "segment_embedding" in layers:
        if "mlm_output_bias" in layers:
            return BertMaskedLM(_bert_encoder(layers), name=model.name)
        if "classifier" in layers:
            dropout = layers["classifier_dropout"].rate
            if len(model.output.shape) == 3:
                return BertTokenClassifier(
                    _bert_encoder(layers), layers["classifier"].units, dropout, model.name
                )
            pooling = next((p for p in ("mean", "max") if f"{p}_pooling" in layers), "cls")
            return BertClassifier(
                _bert_encoder(layers), layers["classifier"].units, pooling, dropout, model.name
            )
        return _bert_encoder(layers, model.name)
    raise ValueError(
        f"`model` {model.name!r} is not a model of the keras_tfm builders (no 'decoder_block_0', "
        "'encoder_block_0' + 'segment_embedding' or 'patch_embedding' layer)."
    )


def from_functional(model):
    """The keras_tfm model class instance of a plain functional builder model.

    Args:
        model: a functional `keras.Model` made by the builders before they
            returned model classes (e.g. loaded from an old `.keras` file), or
            already a keras_tfm model (returned unchanged).

    Returns:
        A `GPT`, `Seq2Seq`, `BertEncoder`, `BertMaskedLM`, `BertClassifier`,
        `BertTokenClassifier` or `ViT` with the same layer names and weights.

    Raises:
        ValueError: the model is not made of the builders' layers.
    """
    if isinstance(model, TransformerModel):
        return model
    if not isinstance(model, keras.Model):
        raise TypeError(f"`model` must be a keras.Model; received {type(model).__name__}.")
    layers = {layer.name: layer for layer in model.layers}
    new = _rebuild(model, layers)
    for layer in new.layers:
        source = layers.get(layer.name)
        if source is None or len(source.weights) != len(layer.weights):
            raise ValueError(f"`model` has no layer {layer.name!r} with the weights of the rebuilt model.")
        for target, value in zip(layer.weights, source.weights):
            if tuple(target.shape) != tuple(value.shape):
                raise ValueError(
                    f"Layer {layer.name!r}: weight {value.path} has shape {tuple(value.shape)}; the rebuilt "
                    f"model expects {tuple(target.shape)}."
                )
            target.assign(value)
    return new


def load_model(path, **kwargs):
    """`keras.saving.load_model(path)`, returning a model class instance even for
    files saved before the classes existed (see `from_functional`)."""
    model = keras.saving.load_model(path, **kwargs)
    if isinstance(model, keras.Model) and not isinstance(model, TransformerModel):
        return from_functional(model)
    return model
