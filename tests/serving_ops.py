"""Derives `keras_tfm.export.trusted_ops.SERVING_OPS` and `CHECKPOINT_OPS` from real exports.

Exports every model kind `export_for_serving` knows, in the layouts and with the tokenizers whose
graphs differ (GPT: the GPT-2 and Llama layouts, sinusoidal / ALiBi / relative positions, every
activation family, int8 and LoRA weights, each GPT tokenizer class, every signature, with and without
XLA; seq2seq; BERT classifier and masked LM with the BERT WordPiece tokenizer; sentence encoder),
collects the op types of each SavedModel with `trusted_ops.op_uses`, and compares them with the two
lists in `keras_tfm/export/trusted_ops.py`:

    python tests/serving_ops.py            # check: exit status 1 and the differences when they differ
    python tests/serving_ops.py --write    # rewrite the two lists in trusted_ops.py
    python tests/serving_ops.py --quick    # the first two exports only (a smoke run of this script)
    python tests/serving_ops.py --only family- --write   # add the ops of some exports to the lists

Minutes on a laptop CPU (each export traces its decoding loops). Run it after a TensorFlow or Keras
upgrade, or when an exporter or a layer changes the ops it emits; a SavedModel of ours refused by
`keras-tfm generate` says which op is missing.
"""

import argparse
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

TRUSTED_OPS = os.path.join(os.path.dirname(HERE), "keras_tfm", "export", "trusted_ops.py")
TEXT = "hello world, this is a tiny corpus! yes."
WORDS = "the cat sat on a mat dog ran far good bad movie".split()
BERT_VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s", "!"]


def _tokenizers():
    from keras_tfm import tokenizers as T

    byte_chars = list(T.byte_level.bytes_to_unicode().values())
    bpe = T.BytePairTokenizer(
        byte_chars + ["Ġt", "he", "the", "Ġthe", "<|endoftext|>"],
        ["Ġ t", "h e", "t he", "Ġt he"],
        special_tokens={"bos": "<|endoftext|>", "eos": "<|endoftext|>"},
    )
    special = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    bert = T.WordPieceTokenizer(
        BERT_VOCABULARY, special_tokens=special, normalization="bert", add_cls_sep=True
    )
    return {
        "char": T.CharTokenizer.from_corpus(TEXT),
        "byte": T.ByteTokenizer(),
        "bpe": bpe,
        "word": T.WordTokenizer(WORDS),
        "wordpiece": T.WordPieceTokenizer.from_corpus([TEXT] * 4, vocabulary_size=64),
        "bert": bert,
    }


def exports():
    """[(name, build() → (model, export_for_serving keyword arguments))], the slowest last."""
    from model_harness import (
        LLAMA,
        tiny_bert_classifier,
        tiny_bert_masked_lm,
        tiny_gpt,
        tiny_sentence_encoder,
        tiny_seq2seq,
    )

    toks = _tokenizers()

    def gpt(tokenizer, quantize=None, lora=None, **options):
        def build():
            tok = toks[tokenizer] if tokenizer else None
            size = tok.vocabulary_size if tok else 64
            model = tiny_gpt(vocabulary_size=max(size, 64), max_length=16, num_layers=1, **options)
            if quantize:
                model.quantize(quantize)
            if lora:
                model.enable_lora(lora)
            return model, tok

        return build

    def bert(factory, tokenizer, **options):
        def build():
            tok = toks[tokenizer]
            return factory(vocabulary_size=max(tok.vocabulary_size, 64), num_layers=1, **options), tok

        return build

    cases = [
        ("gpt2-char-all-xla", gpt("char"), dict(signatures="all", jit_compile=True)),
        ("gpt2-ids-only", gpt(None), dict(signatures="all", jit_compile=False)),
        ("llama-byte-all", gpt("byte", **LLAMA), dict(signatures="all", jit_compile=False)),
        ("sinusoidal-geglu-bpe", gpt("bpe", position="sinusoidal", activation="geglu"), {}),
        ("alibi-silu-word", gpt("word", position="alibi", activation="silu", norm="rms"), {}),
        ("relative-relu-wordpiece", gpt("wordpiece", position="relative", activation="relu"), {}),
        ("gelu-tanh-int8", gpt("char", activation="gelu_tanh", quantize="int8"), {}),
        ("gpt2-lora", gpt("char", lora=2), {}),
        ("seq2seq-word", lambda: (tiny_seq2seq(vocabulary_size=64, num_layers=1), toks["word"]), {}),
        ("bert-classifier", bert(tiny_bert_classifier, "bert", num_classes=2), {"label_names": ["a", "b"]}),
        ("bert-masked-lm", bert(tiny_bert_masked_lm, "bert"), {}),
        ("sentence-encoder", bert(tiny_sentence_encoder, "bert"), {}),
    ]
    # The checkpoint families, each with its own tokenizer (tests/fixtures/pretrained).
    for family in ("t5", "t5_v11", "bart", "marian", "mistral", "qwen2"):
        cases.append((f"family-{family}", _checkpoint(family), dict(signatures="all")))
    return cases


def _checkpoint(family):
    def build():
        from keras_tfm.models import from_pretrained

        model = from_pretrained(os.path.join(HERE, "fixtures", "pretrained", f"tiny_{family}"))
        return model, model.tokenizer

    return build


def derive(quick=False, only=None, log=print):
    """(serving ops, checkpoint-only ops) of the exports of `exports()` (names starting with `only`)."""
    from keras_tfm.export import export_for_serving
    from keras_tfm.export.trusted_ops import op_uses

    serving, checkpoint = set(), set()
    cases = [case for case in exports() if only is None or case[0].startswith(only)]
    with tempfile.TemporaryDirectory() as root:
        for name, build, options in cases[: 2 if quick else None]:
            model, tokenizer = build()
            kwargs = dict(tokenizer=tokenizer, warmup=False, max_new_tokens_limit=24, **options)
            path = export_for_serving(model, os.path.join(root, name), **kwargs)
            uses = op_uses(path)
            found = {op for op, places in uses.items() if any(part == "serving" for part, _ in places)}
            serving |= found
            checkpoint |= set(uses) - found
            log(f"{name}: {len(uses)} op types")
    return frozenset(serving), frozenset(checkpoint - serving)


def _literal(name, ops, comment):
    lines = [f"#: {comment}", f"{name} = frozenset(", "    {"]
    line = "       "
    for op in sorted(ops):
        item = f' "{op}",'
        if len(line) + len(item) > 110:
            lines.append(line)
            line = "       "
        line += item
    lines += [line, "    }", ")"]
    return "\n".join(lines)


def rewrite(serving, checkpoint):
    """Replaces the two lists between `# fmt: off` and `# fmt: on` in trusted_ops.py."""
    text = open(TRUSTED_OPS, encoding="utf-8").read()
    block = "\n".join(
        [
            "# fmt: off",
            _literal("SERVING_OPS", serving, "The op types of keras_tfm's exports outside the saver function "
                     "(`tests/serving_ops.py --write`)."),
            _literal("CHECKPOINT_OPS", checkpoint, "The op types found only in the saver function of keras_tfm's "
                     "exports."),
            "# fmt: on",
        ]
    )  # fmt: skip
    new, count = re.subn(r"# fmt: off\n.*?# fmt: on", lambda m: block, text, count=1, flags=re.S)
    assert count == 1, "trusted_ops.py has no `# fmt: off` ... `# fmt: on` block"
    with open(TRUSTED_OPS, "w", encoding="utf-8") as f:
        f.write(new)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the lists in trusted_ops.py")
    parser.add_argument("--quick", action="store_true", help="two exports only (no check of the lists)")
    parser.add_argument(
        "--only", help="the exports whose names start with this (with --write: added to the lists)"
    )
    args = parser.parse_args(argv)
    from keras_tfm.export import trusted_ops

    serving, checkpoint = derive(quick=args.quick, only=args.only)
    if args.only:  # a part of the exports: its ops join the lists, which keep the others'
        serving |= trusted_ops.SERVING_OPS
        checkpoint = (checkpoint | trusted_ops.CHECKPOINT_OPS) - serving
    if args.write:
        rewrite(serving, checkpoint)
        print(f"wrote {len(serving)} serving and {len(checkpoint)} checkpoint op types to {TRUSTED_OPS}")
        return 0
    missing = sorted(serving - trusted_ops.SERVING_OPS) + sorted(checkpoint - trusted_ops.CHECKPOINT_OPS)
    extra = [] if args.quick else sorted(trusted_ops.SERVING_OPS - serving)
    extra += [] if args.quick else sorted(trusted_ops.CHECKPOINT_OPS - checkpoint)
    if missing or extra:
        print(f"the lists differ from the exports: not listed {missing}; listed but not emitted {extra}")
        return 1
    print(f"the lists match the exports ({len(serving)} serving, {len(checkpoint)} checkpoint op types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
