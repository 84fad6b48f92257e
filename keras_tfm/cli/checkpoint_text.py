"""Text from a HuggingFace-layout checkpoint folder, in process: `keras-tfm generate --model FOLDER`.

    keras-tfm generate --model opus-mt-en-es --prompt "I see."            (T5, BART, Marian: a translation)
    keras-tfm generate --model Qwen2-0.5B --prompt "Once upon" --max-new-tokens 20     (a continuation)

The folder is read by `keras_tfm.models.from_pretrained` with its tokenizer(s); the request is the one
an export of it answers (`keras_tfm.generation.text`): a seq2seq model's sources are encoded by the
source tokenizer and decoded from the checkpoint's start id to its stop id (its forced and suppressed
tokens applied), a decoder's prompts continued to the tokenizer's EOS. The generation loops are
graph functions without XLA (`Generator(jit_compile=False)`): one command makes one call, which an XLA
compile would not repay on a CPU. Beam search follows the checkpoint (HuggingFace's length penalty
and early stopping from generation_config.json) unless `--length-penalty` is given.
"""

import os

import numpy as np

#: The `model_type`s whose checkpoints generate text: seq2seq ones translate, decoders continue.
SEQ2SEQ_TYPES = ("t5", "bart", "marian")
DECODER_TYPES = ("gpt2", "llama", "mistral", "qwen2")


def is_checkpoint_dir(path: str) -> bool:
    """True for a folder with config.json and no SavedModel in it (a checkpoint, not an export)."""
    path = os.fspath(path)
    return os.path.isfile(os.path.join(path, "config.json")) and not os.path.isfile(
        os.path.join(path, "saved_model.pb")
    )


def checkpoint_signature(path: str, num_beams: int | None) -> str:
    """The signature an export of the checkpoint would answer the request with: "translate" (seq2seq),
    "beam_search" (a decoder with `num_beams` > 1) or "generate".

    Raises:
        ValueError naming `model`: a config.json whose `model_type` generates no text (BERT).
    """
    from keras_tfm.checkpoints.files import read_json

    try:
        model_type = (read_json(path, "config.json") or {}).get("model_type")
    except ValueError as error:
        raise ValueError(f"`model`: {str(error).splitlines()[0]}") from None
    if model_type in SEQ2SEQ_TYPES:
        return "translate"
    if model_type in DECODER_TYPES:
        return "beam_search" if num_beams not in (None, 1) else "generate"
    raise ValueError(
        f"`model`: {path!r} is a {model_type!r} checkpoint, which generates no text; a checkpoint folder "
        f"takes model_type {' / '.join(SEQ2SEQ_TYPES + DECODER_TYPES)} (or pass an exported SavedModel)."
    )


def load_checkpoint(path: str):
    """`from_pretrained(path)` with its tokenizer; errors name `model`."""
    from keras_tfm.models import from_pretrained

    try:
        model = from_pretrained(path)
    except ValueError as error:
        raise ValueError(f"`model`: {str(error).splitlines()[0]}") from None
    if model.tokenizer is None:
        raise ValueError(
            f"`model`: {path!r} has no tokenizer files that keras_tfm reads, so text cannot be encoded."
        )
    return model


def _new_ids(tokens, lengths):
    lengths = np.minimum(lengths, tokens.shape[1])
    return [tokens[b, : int(n)].tolist() for b, n in enumerate(lengths)]


def checkpoint_outputs(model, signature: str, prompts: list[str], request: dict) -> dict:
    """The outputs an export's `signature` would give: {"translations"} or {"completions"} (str lists).

    Args:
        model: a `Seq2Seq` or `GPT` with its tokenizer (`load_checkpoint`).
        signature: "translate", "generate" or "beam_search" (`checkpoint_signature`).
        prompts: the texts.
        request: "max_new_tokens" (int), "num_beams", "length_penalty" (None: the checkpoint's) and, for
            "generate", the sampling options given ("temperature", "top_k", "top_p", "seed").
    """
    from keras_tfm.generation import Generator
    from keras_tfm.generation.text import check_sources, seq2seq_ids
    from keras_tfm.tokenizers import text as text_lib

    tokenizer = model.tokenizer
    source, target = tokenizer if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)
    rows = text_lib.encode(source, prompts, "prompt")
    generator = Generator(model, jit_compile=False)
    n = request["max_new_tokens"]
    if signature == "translate":
        check_sources(model, rows, prompts, "prompt")
        start, stop = seq2seq_ids(model, target, "translate")
        ids = {"bos_id": start, "eos_id": stop}
    else:
        ids = {"eos_id": target.eos_id}
    if signature == "generate" or (signature == "translate" and request["num_beams"] == 1):
        sampling = request.get("sampling") or {"sampler": "greedy"}
        tokens, lengths = generator.generate(rows, n, return_lengths=True, **sampling, **ids)
    else:
        sequences, _, lengths = generator.beam_search(
            rows, n, num_beams=request["num_beams"], length_penalty=request["length_penalty"], **ids
        )
        tokens, lengths = sequences[:, 0], lengths[:, 0]
    texts = text_lib.decode(target, _new_ids(tokens, lengths))
    return {"translations" if signature == "translate" else "completions": texts}


__all__ = ["checkpoint_outputs", "checkpoint_signature", "is_checkpoint_dir", "load_checkpoint"]
