"""HuggingFace BERT checkpoints (`model_type: "bert"`) ↔ keras_tfm BERT models.

config.json → `bert_encoder` options:

    vocab_size → vocabulary_size            hidden_size → d_model
    num_hidden_layers → num_layers          num_attention_heads → num_heads
    intermediate_size → d_ff                max_position_embeddings → max_length
    type_vocab_size → num_segments          layer_norm_eps → layer_norm_epsilon
    hidden_act → activation                 hidden_dropout_prob → dropout
    attention_probs_dropout_prob → attention_dropout

Weights (`prefix` = "" for `BertModel`, "bert." for `BertForPreTraining`,
`BertForMaskedLM` and the classifiers; W are PyTorch (out, in) matrices):

    {p}embeddings.word_embeddings.weight        token embedding        (V, H)
    {p}embeddings.position_embeddings.weight    position table         (P, H)
    {p}embeddings.token_type_embeddings.weight  segment embedding      (S, H)
    {p}embeddings.LayerNorm.{weight,bias}       embedding LayerNorm
    {p}encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}
                                                Wᵀ reshaped (H, heads, H/heads)
    {p}encoder.layer.{i}.attention.output.dense.{weight,bias}
                                                Wᵀ reshaped (heads, H/heads, H)
    {p}encoder.layer.{i}.attention.output.LayerNorm.*   self-attention add & norm
    {p}encoder.layer.{i}.intermediate.dense.*   FFN inner (Wᵀ)
    {p}encoder.layer.{i}.output.dense.*         FFN output (Wᵀ)
    {p}encoder.layer.{i}.output.LayerNorm.*     FFN add & norm
    {p}pooler.dense.*                           tanh pooler (optional in the checkpoint)
    cls.predictions.transform.dense.*, cls.predictions.transform.LayerNorm.*,
    cls.predictions.bias                        masked-LM head (decoder tied to
                                                the word embedding)
    classifier.{weight,bias}                    sequence / token classifier

Heads that a checkpoint lacks (e.g. the MLM head of a `BertModel`) are left
initialised and reported. `cls.seq_relationship.*` (next-sentence head) has
no keras_tfm counterpart and is reported as unused.
"""

import types

from keras_tfm.checkpoints import weight_mapping as wm

#: Name prefix of a `BertFor*` state dict (BertModel names have none).
STATE_DICT_PREFIX = "bert."

MODEL_TYPE = "bert"

TASKS = ("masked_lm", "classifier", "token_classifier", "sentence_embedding")

ARCHITECTURES = {
    "encoder": "BertModel",
    "sentence_embedding": "BertModel",
    "masked_lm": "BertForMaskedLM",
    "classifier": "BertForSequenceClassification",
    "token_classifier": "BertForTokenClassification",
}

#: HF `hidden_act` ↔ keras_tfm activation.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
ACTIVATION_NAMES = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}

#: Checkpoint tensors that are buffers, not weights (never reported).
IGNORED_SUFFIXES = ("embeddings.position_ids",)
#: The tied MLM decoder: the word embedding (and the output bias) again.
TIED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")


def builder_options(config, read):
    """`bert_encoder` keyword arguments from a config dict (`read` = a `ConfigReader`)."""
    position_type = read.choice("position_embedding_type", ("absolute",), default="absolute")
    del position_type
    hidden_act = read.choice("hidden_act", tuple(ACTIVATIONS), default="gelu")
    return dict(
        vocabulary_size=read.positive_int("vocab_size"),
        d_model=read.positive_int("hidden_size"),
        num_layers=read.positive_int("num_hidden_layers"),
        num_heads=read.positive_int("num_attention_heads"),
        d_ff=read.positive_int("intermediate_size"),
        max_length=read.positive_int("max_position_embeddings", default=512),
        num_segments=read.positive_int("type_vocab_size", default=2),
        activation=ACTIVATIONS[hidden_act],
        layer_norm_epsilon=read.positive_float("layer_norm_eps", default=1e-12),
        dropout=read.rate("hidden_dropout_prob", default=0.1),
        attention_dropout=read.rate("attention_probs_dropout_prob", default=0.1),
    )


def parts(model):
    """The layers of a BERT encoder or task model that hold checkpoint weights."""
    wm.check_model_class(
        model, ("BertEncoder", "BertTask"), "a keras_tfm BERT model (BertEncoder or a task model on one)"
    )
    mlm_bias = getattr(model, "mlm_output_bias", None)
    return types.SimpleNamespace(
        token_embeddings=model.token_embedding.embeddings,
        position_embeddings=getattr(model.position_embedding, "position_embeddings", None),
        segment_embeddings=model.segment_embedding.embeddings,
        embedding_norm=model.embedding_norm,
        blocks=list(model.blocks),
        final_norm=model.final_norm,
        # The encoder's pooler, also under a head that does not use it (`model.encoder` stays complete).
        pooler=model.encoder.pooler if wm.is_model_class(model, ("BertTask",)) else model.pooler,
        uses_pooler=model.pooler is not None,
        mlm_dense=getattr(model, "mlm_transform_dense", None),
        mlm_norm=getattr(model, "mlm_transform_norm", None),
        mlm_bias=None if mlm_bias is None else mlm_bias.bias,
        classifier=getattr(model, "classifier", None),
    )


def _norm(prefix, layer, optional=False):
    return [
        wm.copy(f"{prefix}.weight", layer.gamma, ("hidden_size",), optional),
        wm.copy(f"{prefix}.bias", layer.beta, ("hidden_size",), optional),
    ]


def _linear(prefix, layer, fields, input_axes=1, optional=False):
    out_field = fields[0]
    return [
        wm.linear(f"{prefix}.weight", layer.kernel, fields, input_axes, optional),
        wm.copy(f"{prefix}.bias", layer.bias, (out_field,), optional, flatten=True),
    ]


def entries(model, prefix="", pooler=True):
    """The weight mapping of a keras_tfm BERT model (see the module docstring);
    `pooler=False` leaves the pooler out (as HuggingFace's BertForMaskedLM and
    BertForTokenClassification do)."""
    p = parts(model)
    H, V, P, S, F = (
        "hidden_size",
        "vocab_size",
        "max_position_embeddings",
        "type_vocab_size",
        "intermediate_size",
    )
    e = f"{prefix}embeddings"
    out = [
        wm.copy(f"{e}.word_embeddings.weight", p.token_embeddings, (V, H)),
        wm.copy(f"{e}.position_embeddings.weight", p.position_embeddings, (P, H)),
        wm.copy(f"{e}.token_type_embeddings.weight", p.segment_embeddings, (S, H)),
        *_norm(f"{e}.LayerNorm", p.embedding_norm),
    ]
    for i, block in enumerate(p.blocks):
        b = f"{prefix}encoder.layer.{i}"
        attention = block.self_attention_layer
        for proj in ("query", "key", "value"):
            out += _linear(f"{b}.attention.self.{proj}", getattr(attention, f"{proj}_dense"), (H, H))
        out += _linear(f"{b}.attention.output.dense", attention.output_dense, (H, H), input_axes=2)
        out += _norm(f"{b}.attention.output.LayerNorm", block.self_attention_norm)
        out += _linear(f"{b}.intermediate.dense", block.feed_forward.inner_dense, (F, H))
        out += _linear(f"{b}.output.dense", block.feed_forward.output_dense, (H, F))
        out += _norm(f"{b}.output.LayerNorm", block.feed_forward_norm)
    if pooler and p.pooler is not None:
        out += _linear(f"{prefix}pooler.dense", p.pooler, (H, H), optional=True)
    if p.mlm_dense is not None:
        out += _linear("cls.predictions.transform.dense", p.mlm_dense, (H, H), optional=True)
        out += _norm("cls.predictions.transform.LayerNorm", p.mlm_norm, optional=True)
        out.append(wm.copy("cls.predictions.bias", p.mlm_bias, (V,), optional=True))
    if p.classifier is not None:
        out += _linear("classifier", p.classifier, ("num_labels", H), optional=True)
    return out


def save_prefix(task):
    return "" if task in ("encoder", "sentence_embedding") else STATE_DICT_PREFIX


def save_entries(model, task):
    """The mapping `save_pretrained` writes: HuggingFace's layout of the task's architecture."""
    return entries(model, save_prefix(task), pooler=task not in ("masked_lm", "token_classifier"))


def unneeded(model, prefix):
    """Checkpoint name prefixes of encoder parts the model does not use (neither
    reported as unused nor as missing): the pooler under most heads."""
    return () if parts(model).uses_pooler else (f"{prefix}pooler.",)


def hf_config(model, task):
    """config.json for a keras_tfm BERT model (raises for options BERT lacks)."""
    p = parts(model)
    block = p.blocks[0]
    d_model = int(p.token_embeddings.shape[1])
    wm.check_layout(
        "BERT",
        block,
        norm_first=False,
        position=None,
        use_bias=True,
        has_final_norm=p.final_norm is not None,
        positions_table=p.position_embeddings is not None,
        d_model=d_model,
    )
    config = {
        "architectures": [ARCHITECTURES[task]],
        "model_type": MODEL_TYPE,
        "vocab_size": int(p.token_embeddings.shape[0]),
        "hidden_size": d_model,
        "num_hidden_layers": len(p.blocks),
        "num_attention_heads": int(block.num_heads),
        "intermediate_size": int(block.d_ff),
        "hidden_act": ACTIVATION_NAMES[block.activation],
        "hidden_dropout_prob": float(block.dropout),
        "attention_probs_dropout_prob": float(block.attention_dropout),
        "max_position_embeddings": int(p.position_embeddings.shape[0]),
        "type_vocab_size": int(p.segment_embeddings.shape[0]),
        "layer_norm_eps": float(block.layer_norm_epsilon),
        "position_embedding_type": "absolute",
        "initializer_range": 0.02,
        "pad_token_id": 0,
    }
    if p.classifier is not None:
        num_labels = int(p.classifier.kernel.shape[-1])
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
        config["label2id"] = {f"LABEL_{i}": i for i in range(num_labels)}
    return config
