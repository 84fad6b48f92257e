"""Run a LiteRT export with `ai_edge_litert`'s interpreter: `LiteRTGenerator` (and the shared loading
of every export kind; BERT exports: `litert_encoder.LiteRTEncoder`).

    gen = LiteRTGenerator("gpt.tflite")
    gen.generate("To be", max_new_tokens=40, sampler="sample", temperature=0.8, seed=1)
    gen.generate([[7, 8, 9]], max_new_tokens=40)              # ids → int32 (1, 40)
    LiteRTGenerator("s2s.tflite").translate("the cat sat")

The generation loop lives here, in Python, around the `prefill_*` / `decode` / `shift`
(GPT) or `encode` / `decode` (seq2seq) signatures of `keras_tfm.export.litert_signatures`;
the key/value caches stay inside the interpreter between calls. Tokens are those of
in-process `keras_tfm.generation.generate` for the same arguments: the runner checks
its arguments with the generation checks (same messages), generates each row of a batch
on its own (batch rows are independent in process too; sampling draws row `b`'s noise,
`litert_sampling`), and goes past the context as `generation.sliding_window` does:
recompute models (learned, sinusoidal, RoPE) restart the window from its last W // 2
tokens with a prefill, shift models (ALiBi, relative, none) drop the oldest W // 2 cache
slots and attend over a band of W slots. W is the export's `max_length`.
"""

import hashlib
import json
import os

import numpy as np

from keras_tfm.checks import (
    NO_STOP,
    check_bool,
    check_float,
    check_int,
    check_sampling,
    check_token_id,
    text_batch,
)
from keras_tfm.export.litert_sampling import choose_token, constrain
from keras_tfm.export.litert_signatures import prefill_name
from keras_tfm.export.litert_tokenizers import read_tokenizer
from keras_tfm.generation import prompts
from keras_tfm.generation.generator import LIMIT

#: Marks an `eos_id` the caller did not give (None means "no stop id").
_UNSET = object()

__all__ = ["FORMAT", "LiteRTGenerator", "LiteRTModel", "make_interpreter", "read_metadata", "sidecar_path"]

#: `format` of the metadata file beside a `.tflite` export.
FORMAT = "keras_tfm.litert"


def sidecar_path(path: str, role: str) -> str:
    """The file beside `path` holding `role`: "json" (metadata, `PATH.json`), or "tokenizer",
    "source_tokenizer", "target_tokenizer" (keras_tfm vocabulary files, `PATH.ROLE.vocab`)."""
    return f"{path}.json" if role == "json" else f"{path}.{role}.vocab"


def interpreter_class():
    """`ai_edge_litert.interpreter.Interpreter`, or an ImportError naming the `litert` extra."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as error:
        raise ImportError(
            "LiteRT export and its runner need the `ai-edge-litert` package: pip install 'keras-tfm[litert]'."
        ) from error
    return Interpreter


def make_interpreter(model_path=None, model_content=None, num_threads=None):
    """An `ai_edge_litert` interpreter of a `.tflite` file or its bytes."""
    return interpreter_class()(model_path=model_path, model_content=model_content, num_threads=num_threads)


def file_digest(path: str) -> str:
    """sha256 of a file (the metadata records the `.tflite` it belongs to)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_metadata(path: str) -> dict:
    """The metadata of the export at `path`, checked to belong to that `.tflite` file."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).endswith(".tflite"):
        raise ValueError(f"`path` must be a `.tflite` file written by export_for_litert; received {path!r}.")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`path`: no such LiteRT model: {path!r}.")
    try:
        with open(sidecar_path(path, "json"), encoding="utf-8") as file:
            metadata = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"`path` {path!r} has no readable {os.path.basename(sidecar_path(path, 'json'))} beside it "
            f"(written by export_for_litert): {error}"
        ) from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise ValueError(f"`path` {path!r}: the metadata beside it is not a keras_tfm LiteRT export's.")
    if metadata.get("sha256") != file_digest(path):
        raise ValueError(
            f"`path` {path!r} does not match the metadata beside it (written by another export); export again."
        )
    return metadata


class LiteRTModel:
    """The metadata, signatures and tokenizers of an export (`signatures`: name → callable
    `(**numpy inputs) → dict of numpy outputs`)."""

    def __init__(self, path: str, num_threads: int | None = None):
        metadata = read_metadata(path)
        interpreter = make_interpreter(model_path=os.fspath(path), num_threads=num_threads)
        runners = {name: interpreter.get_signature_runner(name) for name in metadata["signatures"]}
        tokenizers = {
            role: read_tokenizer(sidecar_path(os.fspath(path), role)) for role in metadata["tokenizers"]
        }
        self._setup(metadata, runners, tokenizers)
        self.path = os.fspath(path)
        self.interpreter = interpreter

    @classmethod
    def from_parts(cls, metadata: dict, signatures: dict, tokenizers: dict | None = None):
        """A runner over other callables (the exporter runs the TensorFlow functions with it)."""
        runner = cls.__new__(cls)
        runner._setup(metadata, signatures, tokenizers or {})
        runner.path = runner.interpreter = None
        return runner

    def _setup(self, metadata, signatures, tokenizers):
        self.metadata = metadata
        self.kind = metadata["kind"]
        self.signatures = signatures
        self.tokenizers = tokenizers
        self.max_length = int(metadata["max_length"])
        self.vocabulary_size = int(metadata["vocabulary_size"])

    def _call(self, name, **inputs):
        return self.signatures[name](**inputs)

    def _tokenizer(self, role, method):
        if role not in self.tokenizers:
            raise ValueError(f"`{method}` on text needs a tokenizer; the export has none: pass token ids.")
        return self.tokenizers[role]


class LiteRTGenerator(LiteRTModel):
    """Generation with a GPT or seq2seq LiteRT export (`export_for_litert`).

    Args:
        path: the `.tflite` file (its metadata and tokenizers lie beside it).
        num_threads: interpreter threads (None: LiteRT's default).

    Attributes:
        kind ("causal_lm" or "seq2seq_lm"), max_length (W), vocabulary_size, metadata, tokenizers.
    """

    def _setup(self, metadata, signatures, tokenizers):
        super()._setup(metadata, signatures, tokenizers)
        if self.kind not in ("causal_lm", "seq2seq_lm"):
            raise ValueError(f"A {self.kind} export does not generate; use litert_encoder.LiteRTEncoder.")
        self.cache_length = int(metadata["cache_length"])
        self.pad_id = int(metadata.get("pad_id", 0))
        #: The model's generation defaults (`Seq2Seq.generation_config`): stop id and constraints.
        self.generation_config = dict(metadata.get("generation_config") or {})
        self.source_vocabulary_size = int(metadata.get("source_vocabulary_size", self.vocabulary_size))

    # ------------------------------------------------------------------ public API
    def generate(
        self,
        inputs,
        max_new_tokens: int,
        sampler: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed=None,
        eos_id: int | None = _UNSET,
        return_lengths: bool = False,
        completion_only: bool = False,
        **request,
    ):
        """`generation.generate` (ids) or `GPT.generate` / `Seq2Seq.generate` (text) on LiteRT.

        Args:
            inputs: GPT prompts / seq2seq sources: a str or list of str (with the export's
                tokenizer), or a list of id sequences / a 2-D int array.
            max_new_tokens, sampler, temperature, top_k, top_p, seed, eos_id, return_lengths:
                as in `keras_tfm.generation.generate` (`eos_id` not given: the export's
                model's, for text the tokenizer's; None: no stop). The model's forced and
                suppressed tokens (`generation_config`) apply, and override as in process.
            completion_only: GPT text: the completion without the prompt.
            **request: ids: GPT `prompt_lengths`; seq2seq `bos_id`, `source_lengths`,
                `decoder_prompt_ids`.

        Returns:
            ids in: int32 `(batch, max_new_tokens)` (and the lengths); text in: strings
            (a GPT's prompt followed by its completion).
        """
        empty = isinstance(inputs, (list, tuple)) and not inputs  # the ids path names the empty batch
        batch = None if empty else text_batch("inputs", inputs)
        check_bool("completion_only", completion_only)
        options = dict(
            sampler=sampler, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, **request
        )
        if batch is None:
            if completion_only:
                raise TypeError("`completion_only` is for text inputs (ids in give only new ids).")
            tokens, lengths = self._generate_ids(inputs, max_new_tokens, eos_id=eos_id, **options)
            return (tokens, lengths) if check_bool("return_lengths", return_lengths) else tokens
        texts, scalar = batch
        gpt = self.kind == "causal_lm"
        rows = self._tokenizer("tokenizer" if gpt else "source_tokenizer", "generate").encode(texts)
        target = self._tokenizer("tokenizer" if gpt else "target_tokenizer", "generate")
        if gpt:
            eos_id = target.eos_id if eos_id is _UNSET else eos_id
        else:
            start, stop = self.metadata.get("decoder_start_id"), self.metadata.get("eos_id")
            if start is None or stop is None:
                raise ValueError(
                    "`generate` on text needs the target tokenizer's BOS and EOS ids (the first decoder "
                    f"token and the stop token); this export has decoder_start_id={start!r}, "
                    f"eos_id={stop!r}: export with a tokenizer that has them, or pass token ids with "
                    "`bos_id` and `eos_id`."
                )
            options.setdefault("bos_id", start)
            eos_id = stop if eos_id is _UNSET else eos_id
        tokens, lengths = self._generate_ids(rows, max_new_tokens, eos_id=eos_id, **options)
        new = [tokens[b, : int(n)].tolist() for b, n in enumerate(lengths)]
        if gpt and not completion_only:
            new = [prompt + ids for prompt, ids in zip(rows, new)]
        strings = target.decode(new)
        return strings[0] if scalar else strings

    def translate(
        self, texts, num_beams: int = 1, max_new_tokens: int | None = None, length_penalty: float = 0.6
    ):
        """`Seq2Seq.translate` with greedy decoding (`num_beams` 1; beam search is not exported):
        from the export's decoder start id to its EOS, at most `max_new_tokens` (default `max_length - 1`) tokens;
        `length_penalty` is checked as in process and has no effect on greedy decoding."""
        if self.kind != "seq2seq_lm":
            raise ValueError(f"`translate` needs a seq2seq export; this one is a {self.kind}.")
        if check_int("num_beams", num_beams, minimum=1) != 1:
            raise ValueError(
                f"`num_beams`={num_beams}: a LiteRT export decodes greedily or by sampling (num_beams=1)."
            )
        check_float("length_penalty", length_penalty, low=0.0, high=5.0)
        batch = text_batch("texts", texts)
        if batch is None:
            raise TypeError(
                f"`texts` must be a str or a non-empty list of str; received {type(texts).__name__}."
            )
        max_new_tokens = self.max_length - 1 if max_new_tokens is None else max_new_tokens
        return self.generate(batch[0][0] if batch[1] else batch[0], max_new_tokens, sampler="greedy")

    def next_token_logits(self, ids) -> np.ndarray:
        """GPT: float32 `(len(ids), V)`, the logits after each prefix of `ids` (1 to `max_length`
        ids), the rows of the model's forward pass over `ids` (teacher forcing through the
        prefill and decode signatures)."""
        if self.kind != "causal_lm":
            raise ValueError(f"`next_token_logits` needs a GPT export; this one is a {self.kind}.")
        (row,), _ = self._gpt_rows([ids], 0)
        if len(row) > self.max_length:
            raise ValueError(
                f"`ids` has {len(row)} tokens, more than the export's max_length {self.max_length}."
            )
        logits = []

        def forced(step_logits, step):
            logits.append(np.asarray(step_logits[0], np.float32))
            return row[step + 1] if step + 1 < len(row) else 0

        self._gpt_row(row[:1], len(row), forced, -1)
        return np.stack(logits)

    # ------------------------------------------------------------------ checks
    def _generate_ids(
        self, inputs, max_new_tokens, *, sampler, temperature, top_k, top_p, seed, eos_id, **request
    ):
        sampler, temperature, top_k, top_p = check_sampling(
            sampler, temperature, top_k, top_p, seed, self.vocabulary_size
        )
        if eos_id is _UNSET:
            eos_id = self.generation_config.get("eos_id")
        constraints = prompts.request_constraints(self, request)
        eos = -1
        if eos_id is not None:
            eos = check_token_id("eos_id", eos_id, self.vocabulary_size, consequence=NO_STOP)
        choice = dict(
            sampler=sampler, seed=prompts.make_seed(seed), temperature=temperature, top_k=top_k, top_p=top_p
        )
        if self.kind == "causal_lm":
            rows, max_new_tokens = self._gpt_rows(inputs, max_new_tokens, **request)
            run = self._gpt_row
        else:
            rows, max_new_tokens = self._seq2seq_rows(inputs, max_new_tokens, **request)
            run = self._seq2seq_row
        tokens = np.full((len(rows), max_new_tokens), self.pad_id, np.int32)
        lengths = np.zeros((len(rows),), np.int32)
        for b, row in enumerate(rows):
            prompt_length = len(row if self.kind == "causal_lm" else row[1])

            def choose(logits, step, b=b, prompt_length=prompt_length):
                logits = constrain(logits, step, constraints, max_new_tokens, prompt_length)
                return int(choose_token(logits, step, rows=np.array([b]), **choice)[0])

            new = run(row, max_new_tokens, choose, eos)
            tokens[b, : len(new)] = new
            lengths[b] = len(new)
        return tokens, lengths

    def _gpt_rows(self, prompt_ids, max_new_tokens, prompt_lengths=None):
        ids, lengths = prompts.pad_prompts(
            "prompt_ids", prompt_ids, prompt_lengths, self.pad_id, self.vocabulary_size, side="left"
        )
        max_new_tokens = _check_max_new_tokens(
            max_new_tokens, int(lengths.max()), self.max_length, sliding=True
        )
        return [ids[b, ids.shape[1] - n :].tolist() for b, n in enumerate(lengths)], max_new_tokens

    def _seq2seq_rows(
        self, source_ids, max_new_tokens, bos_id=None, source_lengths=None, decoder_prompt_ids=None
    ):
        src, src_lengths = prompts.pad_prompts(
            "source_ids", source_ids, source_lengths, 0, self.source_vocabulary_size, side="right"
        )
        if int(src_lengths.max()) > self.max_length:
            raise ValueError(
                f"A source of {int(src_lengths.max())} tokens exceeds the model's max_length {self.max_length}."
            )
        if decoder_prompt_ids is not None and bos_id is not None:
            raise ValueError(
                "Pass `bos_id` or `decoder_prompt_ids`, not both: the decoder prompts start with their own first "
                f"token (received bos_id={bos_id!r})."
            )
        if decoder_prompt_ids is None:
            if bos_id is None:
                raise ValueError(
                    "`bos_id` is required (the first decoder token), or pass `decoder_prompt_ids`."
                )
            # A first decoder token is not the padding id of a mask_zero model (as in process).
            minimum = 1 if self.metadata.get("mask_zero") else 0
            bos_id = check_token_id("bos_id", bos_id, self.vocabulary_size, minimum=minimum)
            decoder_prompt_ids = np.full((src.shape[0], 1), bos_id, np.int32)
        dec, dec_lengths = prompts.pad_prompts(
            "decoder_prompt_ids",
            decoder_prompt_ids,
            None,
            self.pad_id,
            self.vocabulary_size,
            side="left",
            minimum=1,
        )
        if dec.shape[0] != src.shape[0]:
            raise ValueError(f"{dec.shape[0]} decoder prompts for {src.shape[0]} sources.")
        max_new_tokens = _check_max_new_tokens(max_new_tokens, int(dec_lengths.max()), self.max_length)
        rows = [
            (src[b, :n].tolist(), dec[b, dec.shape[1] - m :].tolist())
            for b, (n, m) in enumerate(zip(src_lengths, dec_lengths))
        ]
        return rows, max_new_tokens

    # ------------------------------------------------------------------ loops
    def _prefill(self, context):
        """Prefills `context` LEFT-padded to the narrowest prefill width; `(logits, slot, pad)`."""
        width = min(w for w in self.metadata["prefill_lengths"] if w >= len(context))
        name = prefill_name(width, self.max_length)
        ids = np.full((1, width), self.pad_id, np.int32)
        ids[0, width - len(context) :] = context
        logits = self._call(name, token_ids=ids, length=np.int32(len(context)))["logits"]
        return logits, width, width - len(context)

    def _decode(self, token, position, slot, valid, **context):
        """One `decode` call (its small inputs written into arrays kept for every step)."""
        step = self.__dict__.setdefault(
            "_step", {"token_ids": np.zeros((1, 1), np.int32), "positions": np.zeros((1, 1), np.int32)}
        )
        step["token_ids"][0, 0], step["positions"][0, 0] = token, position
        return self._call(
            "decode", cache_index=np.int32(slot), padding_mask=valid.reshape(1, -1), **step, **context
        )["logits"]

    def _gpt_row(self, prompt, max_new_tokens, choose, eos):
        """One prompt's new tokens (EOS included), as `decoding.decode` / `sliding_window.slide`."""
        window, slots = self.max_length, np.arange(self.cache_length)
        shift = self.metadata["sliding"] == "shift"
        keep = max(window // 2, 1)
        context, new = list(prompt), []
        logits, slot, pad = self._prefill(context)
        valid = slots >= pad
        for step in range(max_new_tokens):
            token = choose(logits, step)
            new.append(token)
            if token == eos or step + 1 == max_new_tokens:
                break
            context.append(token)
            if not shift and len(context) > window:  # recompute: restart the window
                context = context[-keep:]
                logits, slot, pad = self._prefill(context)
                valid = slots >= pad
                continue
            if shift:
                if slot >= self.cache_length:  # drop the oldest W // 2 slots
                    slot, pad = slot - int(self._call("shift")["slots"]), pad - keep
                valid = (slots >= pad) & (slots > slot - window)
            logits = self._decode(token, slot - pad, slot, valid)
            slot += 1
        return new

    def _seq2seq_row(self, row, max_new_tokens, choose, eos):
        """One source's new tokens: encode, feed the decoder prompt, then decode as `decoding.decode`."""
        source, prompt = row
        ids = np.zeros((1, self.max_length), np.int32)
        ids[0, : len(source)] = source
        context = self._call("encode", source_ids=ids, source_length=np.int32(len(source)))["context_mask"]
        valid = np.ones((self.cache_length,), bool)
        mask_zero = bool(self.metadata.get("mask_zero"))
        for slot, token in enumerate(prompt):
            valid[slot] = not (mask_zero and token == 0)
            logits = self._decode(token, slot, slot, valid, context_mask=context)
        new = []
        for step in range(max_new_tokens):
            token = choose(logits, step)
            new.append(token)
            if token == eos or step + 1 == max_new_tokens:
                break
            slot = len(prompt) + step
            valid[slot] = not (mask_zero and token == 0)
            logits = self._decode(token, slot, slot, valid, context_mask=context)
        return new


def _check_max_new_tokens(max_new_tokens, longest_prompt, max_length, sliding=False):
    """`max_new_tokens` checked as `Generator.generate` checks it (the same messages)."""
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0, **LIMIT)
    prompts.fit_length(max_new_tokens, longest_prompt, max_length, sliding)
    return max_new_tokens
