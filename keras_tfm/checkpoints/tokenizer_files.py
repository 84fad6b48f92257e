"""The tokenizer files of a checkpoint directory: which kind, read it, write it.

    pretrained_tokenizer(path)      → the tokenizer the files hold
    seq2seq_tokenizer(path, type)   → a T5 / BART / Marian checkpoint's tokenizer (Marian: a
                                      (source, target) pair)
    save_tokenizer(tokenizer, dir)  → tokenizer.json + tokenizer_config.json (SentencePiece-style
                                      and Qwen2 BPE, T5 Unigram), source.spm + target.spm +
                                      vocab.json (a Marian pair), vocab.txt (+
                                      tokenizer_config.json) or vocab.json + merges.txt

A `tokenizer.json` comes first: `load_tokenizer_json` builds what it describes (WordPiece,
GPT-2 byte-level BPE, Llama / Mistral SentencePiece-style BPE with byte fallback, Qwen2 BPE)
and refuses by name any part it does not implement. Without one, the kind is what
`tokenizer_config.json`'s `tokenizer_class` or `config.json`'s `model_type` declares, else
the one whose files are complete; a declared kind whose files are missing is refused, naming
the files found; a SentencePiece BPE `tokenizer.model` alone (Llama, Mistral) is read as the
`sentencepiece` library encodes it (`tokenizers.sentencepiece_bpe_model`), anything it does not
implement refused by name. The tokenizers are TensorFlow ops, imported on use.
"""

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from keras_tfm.tokenizers.base import Tokenizer

from keras_tfm.checkpoints import bert as bert_checkpoint
from keras_tfm.checkpoints import gpt2 as gpt2_checkpoint
from keras_tfm.checkpoints import hub
from keras_tfm.checkpoints.files import CONFIG_FILE, MissingCheckpointFile, read_json, write_json

#: Files of which any one marks a checkpoint with a tokenizer (one without the others is an
#: incomplete tokenizer, named as such, never a checkpoint without one).
TOKENIZER_MARKERS = (
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
)

#: How many more embedding rows than tokens a checkpoint may have: models round their
#: vocabulary up for speed (T5 32,128 rows for 32,100 tokens; Qwen2 271 rows more). A bigger
#: gap means a vocabulary file cut short.
PADDING_ROWS = 1024


def check_vocabulary_size(tokenizer: "Tokenizer", rows: int | None) -> None:
    """A ValueError, with both sizes, where `tokenizer` has fewer tokens than the model's
    `rows` embedding rows by more than `PADDING_ROWS`."""
    if rows is not None and int(rows) - tokenizer.vocabulary_size > PADDING_ROWS:
        raise ValueError(
            f"the tokenizer has {tokenizer.vocabulary_size} tokens but the model {int(rows)} embedding rows "
            f"(more than {PADDING_ROWS} padding rows apart): its vocabulary file looks truncated"
        )


#: tokenizer_config.json `tokenizer_class` → kind ("bpe" | "wordpiece").
TOKENIZER_CLASSES = {
    "GPT2Tokenizer": "bpe",
    "GPT2TokenizerFast": "bpe",
    "BertTokenizer": "wordpiece",
    "BertTokenizerFast": "wordpiece",
}
TOKENIZER_FILES = {"bpe": "vocab.json + merges.txt", "wordpiece": "vocab.txt"}


def _tokenizer_json_kind(directory):
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8-sig") as f:
            model = (json.load(f) or {}).get("model") or {}
    except (OSError, ValueError, AttributeError, RecursionError):
        return None  # the reader chosen below names the problem
    return {"BPE": "bpe", "WordPiece": "wordpiece"}.get(model.get("type"))


def _tokenizer_kind(directory, config):
    """("bpe" | "wordpiece") from what the files declare, else from which files are complete."""
    present = lambda name: os.path.isfile(os.path.join(directory, name))  # noqa: E731
    json_kind = _tokenizer_json_kind(directory)
    complete = {
        "bpe": (present("vocab.json") and present("merges.txt")) or json_kind == "bpe",
        "wordpiece": present("vocab.txt") or json_kind == "wordpiece",
    }
    found = [
        n
        for n in ("vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
        if present(n)
    ]
    tokenizer_config = read_json(directory, "tokenizer_config.json", required=False) or {}
    declared, source = None, None
    if tokenizer_config.get("tokenizer_class") in TOKENIZER_CLASSES:
        declared = TOKENIZER_CLASSES[tokenizer_config["tokenizer_class"]]
        source = f"tokenizer_config.json's tokenizer_class {tokenizer_config['tokenizer_class']!r}"
    elif config.get("model_type") in (gpt2_checkpoint.MODEL_TYPE, bert_checkpoint.MODEL_TYPE):
        declared = "bpe" if config["model_type"] == gpt2_checkpoint.MODEL_TYPE else "wordpiece"
        source = f"config.json's model_type {config['model_type']!r}"
    if declared is not None:
        if not complete[declared]:
            raise MissingCheckpointFile(
                f"{directory}: {source} needs {TOKENIZER_FILES[declared]} (or a tokenizer.json); found "
                f"{found or 'no tokenizer files'}."
            )
        return declared
    kinds = [kind for kind, ok in complete.items() if ok]
    if not kinds:
        raise MissingCheckpointFile(
            f"{directory}: no complete tokenizer: expected vocab.txt (WordPiece), vocab.json + merges.txt "
            f"(byte-level BPE) or tokenizer.json; found {found or 'no tokenizer files'}."
        )
    return kinds[0]


def pretrained_tokenizer(path: str | os.PathLike, **kwargs) -> "Tokenizer":
    """The tokenizer of a checkpoint directory.

    A `tokenizer.json` first: `keras_tfm.tokenizers.load_tokenizer_json`
    (WordPiece, GPT-2 byte-level BPE, SentencePiece-style BPE with byte
    fallback for Llama / Mistral, Qwen2's byte-level BPE; a ValueError naming
    the field of anything else). Without one, the kind is what
    `tokenizer_config.json`'s `tokenizer_class` or `config.json`'s
    `model_type` ("gpt2", "bert") declares, else the one whose files are
    complete: byte-level BPE from `vocab.json` + `merges.txt`
    (`BytePairTokenizer.from_pretrained`), BERT WordPiece from `vocab.txt`
    (`WordPieceTokenizer.from_pretrained`). A declared kind whose files are
    missing is a FileNotFoundError listing the files found; a SentencePiece BPE
    `tokenizer.model` without a `tokenizer.json` (Llama, Mistral) is read by
    `SentencePieceModelBPETokenizer.from_sentencepiece_model` (a ValueError names
    what it does not implement).
    `path` may be `"hf://org/name"` (see `from_pretrained`). `kwargs` override
    what the files say (e.g. `max_length=128`).
    """
    from keras_tfm.tokenizers import BytePairTokenizer, WordPieceTokenizer
    from keras_tfm.tokenizers.tokenizer_json import load_tokenizer_json

    directory = hub.checkpoint_path(path)
    if os.path.isfile(os.path.join(directory, "tokenizer.json")):
        return load_tokenizer_json(directory, **kwargs)
    config = read_json(directory, CONFIG_FILE, required=False) or {}
    present = {n for n in TOKENIZER_MARKERS if os.path.isfile(os.path.join(directory, n))}
    if "tokenizer.model" in present and not present & {"vocab.txt", "vocab.json"}:
        from keras_tfm.tokenizers.sentencepiece_bpe_model import SentencePieceModelBPETokenizer

        return SentencePieceModelBPETokenizer.from_sentencepiece_model(directory, **kwargs)
    if _tokenizer_kind(directory, config) == "bpe":
        return BytePairTokenizer.from_pretrained(directory, **kwargs)
    return WordPieceTokenizer.from_pretrained(directory, **kwargs)


#: The module of the SentencePiece Unigram tokenizer (T5, Marian).
UNIGRAM_MODULE = "keras_tfm.tokenizers.unigram"
#: The files of each seq2seq family's tokenizer, by `model_type` (one of the alternatives).
SEQ2SEQ_TOKENIZER_FILES = {
    "t5": (("tokenizer.json",), ("spiece.model",)),
    "bart": (("tokenizer.json",), ("vocab.json", "merges.txt")),
    "marian": (("source.spm", "target.spm", "vocab.json"),),
}
#: BART's special tokens where no tokenizer_config.json names them (`BartTokenizer`'s defaults).
BART_SPECIAL_TOKENS = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}
#: What each seq2seq family's tokenizer is (in messages).
SEQ2SEQ_TOKENIZER_KINDS = {
    "t5": "SentencePiece Unigram (tokenizer.json / spiece.model)",
    "bart": "byte-level BPE (tokenizer.json, or vocab.json + merges.txt)",
    "marian": "SentencePiece Unigram (source.spm / target.spm + vocab.json)",
}


class TokenizerNotImplemented(NotImplementedError):
    """A checkpoint's tokenizer is of a kind this version of keras_tfm does not read."""


def _unigram_module():
    """`keras_tfm.tokenizers.unigram`, or a `TokenizerNotImplemented` naming it when this build
    has no Unigram tokenizer."""
    import importlib

    try:
        return importlib.import_module(UNIGRAM_MODULE)
    except ModuleNotFoundError as error:
        if error.name != UNIGRAM_MODULE:
            raise
        raise TokenizerNotImplemented(
            f"the SentencePiece Unigram tokenizer ({UNIGRAM_MODULE}) is not implemented in this version "
            "of keras_tfm"
        ) from None


def seq2seq_tokenizer(path: str | os.PathLike, model_type: str) -> "Tokenizer | tuple | None":
    """The tokenizer of a T5, BART or Marian checkpoint directory, or None without its files.

    T5: `tokenizer.json` (a Unigram model), else `spiece.model`; Marian: the (source, target)
    pair of `source.spm` / `target.spm` with `vocab.json`; both need the SentencePiece Unigram
    tokenizer (`keras_tfm.tokenizers.unigram`). BART: `tokenizer.json`
    (`tokenizers.tokenizer_json.load_tokenizer_json`, byte-level BPE), else `vocab.json` +
    `merges.txt` wrapped as `<s> … </s>` (what `save_tokenizer` writes for it).

    Raises:
        TokenizerNotImplemented: the family's tokenizer kind is not in this version.
        ValueError: unreadable or unsupported files (named).
    """
    directory = hub.checkpoint_path(path)
    present = lambda name: os.path.isfile(os.path.join(directory, name))  # noqa: E731
    files = next((f for f in SEQ2SEQ_TOKENIZER_FILES[model_type] if all(map(present, f))), None)
    if files is None:
        return None
    if model_type == "bart" and files == ("tokenizer.json",):
        from keras_tfm.tokenizers.tokenizer_json import load_tokenizer_json

        return load_tokenizer_json(directory)
    if model_type == "bart":
        from keras_tfm.tokenizers import BytePairTokenizer
        from keras_tfm.tokenizers.huggingface_files import read_tokenizer_options

        named = "bos_token" in read_tokenizer_options(directory)
        special = {} if named else {"special_tokens": BART_SPECIAL_TOKENS}
        return BytePairTokenizer.from_pretrained(directory, add_bos=True, add_eos=True, **special)
    unigram = _unigram_module()
    if model_type == "marian":
        return unigram.load_marian_tokenizers(directory)
    load = unigram.UnigramTokenizer.from_tokenizer_json
    if files == ("spiece.model",):
        load = unigram.UnigramTokenizer.from_sentencepiece_model
    return load(os.path.join(directory, files[0]))


def save_tokenizer(tokenizer: "Tokenizer | tuple", directory: str | os.PathLike) -> None:
    """Writes a tokenizer's files in the checkpoint layout: `tokenizer.json` +
    `tokenizer_config.json` for a SentencePiece-style or Qwen2 BPE
    (`tokenizer_json_writer`) or a T5 Unigram tokenizer, `source.spm` + `target.spm` +
    `vocab.json` for a Marian (source, target) pair (`unigram_writer`; a SentencePiece
    BPE read from a `tokenizer.model` with remove_extra_whitespaces, which a
    tokenizer.json cannot express, is a ValueError), `vocab.json` + `merges.txt` for a GPT-2 byte-level
    BPE (+ `tokenizer_config.json` naming BART's special tokens when it wraps texts as
    `<s> … </s>`), else `vocab.txt` (+ `tokenizer_config.json` with the special tokens and
    lower-casing of a WordPiece tokenizer), into an existing `directory` (the
    temporary directory of `save_pretrained`)."""
    from keras_tfm.tokenizers import tokenizer_json_writer
    from keras_tfm.tokenizers.unigram import UnigramTokenizer

    if isinstance(tokenizer, (tuple, list)) or isinstance(tokenizer, UnigramTokenizer):
        from keras_tfm.tokenizers.unigram_writer import write_unigram_tokenizer

        write_unigram_tokenizer(tokenizer, directory)
        return
    if getattr(tokenizer, "remove_extra_whitespaces", False):
        raise ValueError(
            "This SentencePiece BPE tokenizer strips and collapses spaces (its tokenizer.model's "
            "remove_extra_whitespaces), which a tokenizer.json cannot express; set `model.tokenizer = None` "
            "before save_pretrained and copy the tokenizer.model into the saved folder."
        )
    if isinstance(tokenizer, tokenizer_json_writer.WRITABLE):
        tokenizer_json_writer.write_tokenizer_json(tokenizer, directory)
        return
    vocabulary = list(tokenizer.get_vocabulary())
    merges = tokenizer.get_config().get("merges")
    if merges is not None:
        with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump({token: i for i, token in enumerate(vocabulary)}, f, ensure_ascii=False)
        with open(os.path.join(directory, "merges.txt"), "w", encoding="utf-8") as f:
            f.write(
                "#version: 0.2\n" + "".join(f"{m if isinstance(m, str) else ' '.join(m)}\n" for m in merges)
            )
        if getattr(tokenizer, "add_bos", False) and getattr(tokenizer, "add_eos", False):
            options = {"tokenizer_class": "BartTokenizer", "add_prefix_space": False}
            for role in ("bos", "eos", "pad", "unk"):
                token_id = getattr(tokenizer, f"{role}_id", None)
                if token_id is not None:
                    options[f"{role}_token"] = vocabulary[token_id]
            write_json(directory, "tokenizer_config.json", options)
        return
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{token}\n" for token in vocabulary))
    options = {"tokenizer_class": "BertTokenizer"}
    if hasattr(tokenizer, "lowercase"):
        options["do_lower_case"] = bool(tokenizer.lowercase)
    for role in ("unk", "pad", "cls", "sep", "mask"):
        token_id = getattr(tokenizer, f"{role}_id", None)
        if token_id is not None:
            options[f"{role}_token"] = vocabulary[token_id]
    write_json(directory, "tokenizer_config.json", options)


def layout_tokenizer(tokenizer):
    """`tokenizer` if the checkpoint layout holds its kind (WordPiece, byte-level BPE,
    SentencePiece-style and Qwen2 BPE, SentencePiece Unigram: a T5 tokenizer or a Marian
    (source, target) pair), else None."""
    from keras_tfm.tokenizers import BytePairTokenizer, UnigramTokenizer, WordPieceTokenizer
    from keras_tfm.tokenizers.tokenizer_json_writer import WRITABLE

    if isinstance(tokenizer, (tuple, list)):
        pair = len(tokenizer) == 2 and all(isinstance(t, UnigramTokenizer) for t in tokenizer)
        return tokenizer if pair else None
    kinds = (BytePairTokenizer, WordPieceTokenizer, UnigramTokenizer, *WRITABLE)
    return tokenizer if isinstance(tokenizer, kinds) else None
