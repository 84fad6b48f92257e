"""Writing a keras_tfm model as a HuggingFace-layout checkpoint: `save_pretrained`.

The family is read off the model (`GPT`: GPT-2, or for the Llama layout Qwen2 with
`attention_bias="qkv"`, Mistral with a `sliding_window`, else Llama; the BERT encoder and
the models on one: BERT; `Seq2Seq`: T5, BART or Marian by its layout), by class name, so
this module imports no model class; the weight mapping is the family's (`bert`, `gpt2`,
`llama`, `mistral`, `qwen2`, `t5`, `bart`, `marian` on `weight_mapping`), written in
HuggingFace's layout of the model's architecture. `TransformerModel.from_preset(path)` (or
`keras_tfm.models.from_pretrained`) rebuilds the same model.
"""

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras

    from keras_tfm.tokenizers.base import Tokenizer

from keras_tfm.checkpoints import bart as bart_checkpoint
from keras_tfm.checkpoints import bert as bert_checkpoint
from keras_tfm.checkpoints import gpt2 as gpt2_checkpoint
from keras_tfm.checkpoints import llama as llama_checkpoint
from keras_tfm.checkpoints import marian as marian_checkpoint
from keras_tfm.checkpoints import mistral as mistral_checkpoint
from keras_tfm.checkpoints import qwen2 as qwen2_checkpoint
from keras_tfm.checkpoints import t5 as t5_checkpoint
from keras_tfm.checkpoints import weight_mapping as wm
from keras_tfm.checkpoints.files import CONFIG_FILE, checkpoint_directory, write_json, write_weights
from keras_tfm.checkpoints.generation_config import GENERATION_FILE, hf_special_ids
from keras_tfm.checkpoints.loading import MODULES_FILE, POOLING_CONFIG, POOLING_MODES
from keras_tfm.checkpoints.tokenizer_files import layout_tokenizer, save_tokenizer

#: The model classes `save_pretrained` writes (by name, with their base classes): family and task.
CLASS_FAMILIES = {
    "GPT": (gpt2_checkpoint, "causal_lm"),
    "BertEncoder": (bert_checkpoint, "encoder"),
    "BertMaskedLM": (bert_checkpoint, "masked_lm"),
    "BertClassifier": (bert_checkpoint, "classifier"),
    "BertTokenClassifier": (bert_checkpoint, "token_classifier"),
    "SentenceEncoder": (bert_checkpoint, "sentence_embedding"),
    "Seq2Seq": (None, "seq2seq_lm"),
}


def seq2seq_family(model):
    """The checkpoint family of a `Seq2Seq` by its layout: T5 (shared relative bias tables),
    Marian (the "sinusoidal_halves" positions), BART (learned positions and an embedding norm);
    a ValueError for keras_tfm's own layouts, which no HuggingFace class computes."""
    if model.encoder_position_bias is not None:
        return t5_checkpoint
    position = model.encoder_embedding.position
    if position == "sinusoidal_halves":
        return marian_checkpoint
    if position == "learned" and model.encoder_embedding_norm is not None:
        return bart_checkpoint
    raise ValueError(
        "This Seq2Seq has no HuggingFace layout: save_pretrained writes T5 (position='relative' with "
        "share_position_bias), BART (learned positions per side and embedding_norm) and Marian "
        f"(position='sinusoidal_halves') models; this one has position={model.position!r}. Save it "
        "with `model.save(path.keras)`."
    )


def _identify(model):
    """(family module, task) of a keras_tfm model."""
    for cls in type(model).__mro__:
        if cls.__name__ in CLASS_FAMILIES and cls.__module__.startswith("keras_tfm."):
            family, task = CLASS_FAMILIES[cls.__name__]
            if family is gpt2_checkpoint and llama_checkpoint.is_llama_layout(model):
                family = _llama_family(model)
            if task == "seq2seq_lm":
                family = seq2seq_family(model)
            return family, task
    raise TypeError(
        f"save_pretrained writes GPT, BERT (encoder, masked LM, classifiers), SentenceEncoder and Seq2Seq "
        "(T5, BART, Marian layouts) models; "
        f"received {type(model).__name__}."
    )


def _llama_family(model):
    """Llama, Mistral or Qwen2 for a GPT of the Llama layout: Q/K/V biases make it Qwen2, a
    sliding window Mistral (a model with both is refused by the family's `hf_config`)."""
    block = model.blocks[0]
    if block.attention_bias == "qkv":
        return qwen2_checkpoint
    if block.sliding_window is not None:
        return mistral_checkpoint
    return llama_checkpoint


def _refuse_quantized(model):
    """A ValueError naming the quantized layers: a checkpoint holds float weights only (integer
    codes written without their scales would load as garbage)."""
    quantized = model.quantized_layers()
    if quantized:
        modes = sorted(set(quantized.values()))
        raise ValueError(
            f"This model is quantized ({', '.join(repr(m) for m in modes)}: {len(quantized)} layers, e.g. "
            f"{next(iter(quantized))!r}); save_pretrained writes float weights only. Call "
            "save_pretrained before `quantize()` (and quantize the model from_pretrained returns), or "
            "save the quantized model with `model.save(path.keras)`."
        )


def _saved_options(model, task):
    options = {"task": task}
    if task == "classifier":
        options["pooling"] = model.pooling
    return options


def save_pretrained(
    model: "keras.Model",
    path: str | os.PathLike,
    tokenizer: "Tokenizer | None" = None,
    overwrite: bool = False,
    max_shard_size: int | str | None = None,
) -> str:
    """Writes `model` as a HuggingFace-layout checkpoint directory, atomically.

    `config.json` (the family's fields, plus a "keras_tfm" entry with the task),
    `model.safetensors` (or shards + index when larger than `max_shard_size`),
    the tokenizer's vocabulary files, and for a `SentenceEncoder`
    `modules.json` + `1_Pooling/config.json`. Everything is written into a
    temporary directory beside `path` and renamed into place, so `path` is
    never half-written. `from_pretrained(path)` rebuilds the same model.

    Args:
        model: a keras_tfm GPT, BERT encoder, BERT head model or
            `SentenceEncoder` (with GPT-2 / BERT options: learned positions,
            biases, GPT-2 pre-norm, BERT post-norm).
        path: the directory to write.
        tokenizer: the tokenizer whose vocabulary is saved alongside; None:
            `model.tokenizer` when the layout holds its kind (WordPiece,
            byte-level BPE, SentencePiece-style and Qwen2 BPE, T5 Unigram, a
            Marian (source, target) Unigram pair), else none.
        overwrite: replace an existing non-empty `path` (else ValueError).
        max_shard_size: e.g. "2GB"; None writes one file.

    Returns:
        `path`.

    Raises:
        ValueError: a quantized model (save it before `quantize()`, or as
            `.keras`), or options the family's layout lacks.
    """
    family, task = _identify(model)
    _refuse_quantized(model)
    if tokenizer is None:
        tokenizer = layout_tokenizer(model.tokenizer)
    config = family.hf_config(model, task)
    if tokenizer is not None and family in (llama_checkpoint, mistral_checkpoint, qwen2_checkpoint):
        for role in ("bos", "eos", "pad"):  # the ids generation stops on / pads with (generate, serving)
            config[f"{role}_token_id"] = getattr(tokenizer, f"{role}_id", None)
    config["keras_tfm"] = _saved_options(model, task)
    config["torch_dtype"] = "float32"
    if hasattr(family, "save_entries"):  # a layout that depends on the task (BERT's heads), T5
        tensors = wm.to_tensors(family.save_entries(model, task))
    else:
        tensors = wm.to_tensors(family.entries(model, family.STATE_DICT_PREFIX))
    with checkpoint_directory(path, overwrite=overwrite) as temp:
        write_json(temp, CONFIG_FILE, config)
        if task == "seq2seq_lm":
            generation = {k: v for k, v in hf_special_ids(model).items() if v is not None}
            write_json(temp, GENERATION_FILE, generation)
        write_weights(temp, tensors, max_shard_size=max_shard_size)
        if task == "sentence_embedding":
            modules = [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
            if model.normalize:
                modules.append(
                    {
                        "idx": 2,
                        "name": "2",
                        "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize",
                    }
                )
            with open(os.path.join(temp, MODULES_FILE), "w", encoding="utf-8") as f:
                json.dump(modules, f, indent=2)
            pooling = {flag: mode == model.pooling for flag, mode in POOLING_MODES.items()}
            pooling.update(word_embedding_dimension=int(model.output.shape[-1]))
            pooling["pooling_mode_mean_sqrt_len_tokens"] = False
            write_json(temp, POOLING_CONFIG, pooling)
        if tokenizer is not None:
            save_tokenizer(tokenizer, temp)
    return os.fspath(path)
