"""Recipe `seq2seq`: the encoder–decoder Transformer translating sentence pairs (Anki English→Spanish,
Multi30k English→German).

Text is tokenized by one cased byte-level BPE vocabulary learned from both sides of the training pairs
(`--tokenizer bpe`, the default: nothing is unknown and detokenizing gives back normal text), or by the
older lower-cased word vocabulary per language (`--tokenizer word`). Held-out translations are decoded
by beam search (`--num-beams`, GNMT length penalty) and scored with sacreBLEU (cased BLEU and chrF of the
detokenized text, `keras_tfm.analysis.bleu`).
"""

import os
import random
import time

from keras_tfm.checks import positive_int_arg
from keras_tfm.recipes import _options as options
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes._options import UsageError

HELP = "Transformer translation on sentence pairs (a tab-separated file or a Multi30k-style folder)"
DEFAULT_VOCABULARY = {"bpe": 8000, "word": 6000}


def add_seq2seq_arguments(parser):
    d = options.add_data_arguments(
        parser,
        "tab-separated pairs, e.g. spa-eng/spa.txt (English<TAB>Spanish), or a folder of line-aligned "
        "files SPLIT.LANG[.gz] (Multi30k: train.en.gz, train.de.gz, test_2016_flickr.en.gz, ...)",
        required=True,
    )
    d.add_argument("--reverse", action="store_true", help="translate the second language into the first")
    d.add_argument(
        "--languages", default="en,de", help=options.default_text("a folder's SOURCE,TARGET file suffixes")
    )
    d.add_argument(
        "--test-split",
        default="test_2016_flickr",
        help=options.default_text("a folder's held-out split (all of it is translated and scored)"),
    )
    d.add_argument(
        "--max-pairs", type=int, default=0, help="use only the first N pairs after shuffling, 0 = all"
    )
    d.add_argument(
        "--max-words",
        type=int,
        default=20,
        help=options.default_text("drop training pairs with a side longer than this many words"),
    )
    d.add_argument(
        "--test-pairs",
        type=int,
        default=1000,
        help=options.default_text("held-out pairs of a tab-separated file (at most a tenth of it)"),
    )
    d.add_argument(
        "--tokenizer",
        choices=tuple(DEFAULT_VOCABULARY),
        default="bpe",
        help=options.default_text(
            "bpe: one cased byte-level BPE vocabulary learned from both languages (no unknown token); "
            "word: a lower-cased word vocabulary per language"
        ),
    )
    d.add_argument(
        "--vocabulary-size",
        type=positive_int_arg,
        default=None,
        help="vocabulary size (default: 8000 shared for bpe, 6000 per language for word)",
    )
    options.add_model_arguments(
        parser,
        num_layers=2,
        num_heads=4,
        d_model=128,
        d_ff=512,
        dropout=0.1,
        layers_help="encoder and decoder layers",
    )
    o = parser.add_argument_group("optimizer (Vaswani et al.)")
    o.add_argument(
        "--warmup-steps", type=int, default=1000, help=options.default_text("Transformer schedule warmup")
    )
    o.add_argument(
        "--lr-scale", type=float, default=1.0, help=options.default_text("multiplier on the schedule")
    )
    o.add_argument("--label-smoothing", type=float, default=0.1, help=options.default_text(""))
    e = parser.add_argument_group("evaluation")
    e.add_argument(
        "--bleu-pairs",
        type=int,
        default=500,
        help=options.default_text("held-out pairs translated and scored (0 = all)"),
    )
    e.add_argument(
        "--num-beams", type=positive_int_arg, default=4, help=options.default_text("beam width, 1 = greedy")
    )
    e.add_argument(
        "--length-penalty", type=float, default=0.6, help=options.default_text("GNMT length penalty alpha")
    )
    e.add_argument("--show", type=int, default=5, help=options.default_text("translations printed"))
    options.add_output_arguments(parser)
    options.add_training_arguments(parser, steps=3000, batch_size=64, steps_per_epoch=500)


def _decoded(rows):
    return [(s.decode("utf-8"), t.decode("utf-8")) for s, t in rows]


def read_pairs(path, reverse=False, flag="--data", split="train", languages="en,de"):
    """[(source, target)] of a tab-separated file (first two columns), or of the line-aligned files
    `split.LANG[.gz]` of a folder (`languages` = "SOURCE,TARGET" suffixes)."""
    from keras_tfm.data import load_aligned_files, load_tab_pairs

    try:
        if os.path.isdir(path):
            langs = [x.strip() for x in languages.split(",")]
            if len(langs) != 2 or not all(langs):
                raise UsageError("--languages", f"expected SOURCE,TARGET; received {languages!r}")
            files = [_split_file(path, split, lang) for lang in langs]
            rows = _decoded(load_aligned_files(*files).as_numpy_iterator())
        else:
            rows = _decoded(load_tab_pairs(path).as_numpy_iterator())
    except (OSError, ValueError) as error:
        if isinstance(error, UsageError):
            raise
        raise UsageError(flag, str(error)) from None
    except Exception as error:  # a tf.errors.OpError from reading the file
        raise UsageError(flag, str(error).splitlines()[0]) from None
    if not rows:
        raise UsageError(flag, f"no sentence pairs in {path!r}")
    return [(t, s) for s, t in rows] if reverse else rows


def _split_file(folder, split, lang):
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    raise UsageError("--data", f"the folder {folder!r} has no {split}.{lang}.gz or {split}.{lang}")


def _ids(tokenizer, texts):
    import tensorflow as tf

    return tokenizer(tf.constant(texts))  # ragged


def keep_short(rows, max_words):
    """The pairs whose sides both have at most `max_words` words (punctuation marks count as words)."""
    import tensorflow as tf

    from keras_tfm.tokenizers import split_words

    if not rows:
        return []
    lengths = [split_words(tf.constant([r[i] for r in rows]), lowercase=False).row_lengths() for i in (0, 1)]
    keep = ((lengths[0] <= max_words) & (lengths[1] <= max_words)).numpy()
    return [r for r, k in zip(rows, keep) if k]


def build_tokenizers(kind, rows, vocabulary_size=None):
    """(source, target) tokenizers learned from the training pairs `rows`: one shared cased byte-level BPE
    (`kind="bpe"`: names and numbers are copied through one segmentation, nothing is unknown) or a
    lower-cased word vocabulary per language (`kind="word"`)."""
    from keras_tfm.tokenizers import BytePairTokenizer, WordTokenizer

    size = vocabulary_size or DEFAULT_VOCABULARY[kind]
    if kind == "bpe":
        tokenizer = BytePairTokenizer.from_corpus([s for s, _ in rows] + [t for _, t in rows], size)
        return tokenizer, tokenizer
    return tuple(WordTokenizer.from_corpus([r[i] for r in rows], max_vocabulary_size=size) for i in (0, 1))


def _split_rows(args):
    """(train rows, held-out rows, validation rows or None) of `--data`."""
    rows = read_pairs(args.data, args.reverse, languages=args.languages)
    random.Random(args.seed).shuffle(rows)
    if args.max_pairs:
        rows = rows[: args.max_pairs]
    if os.path.isdir(args.data):
        test_rows = read_pairs(args.data, args.reverse, split=args.test_split, languages=args.languages)
        try:
            valid_rows = read_pairs(args.data, args.reverse, split="val", languages=args.languages)
        except UsageError:
            valid_rows = None
        return keep_short(rows, args.max_words), test_rows, valid_rows
    n_test = min(args.test_pairs, len(rows) // 10)
    return keep_short(rows[n_test:], args.max_words), keep_short(rows[:n_test], args.max_words), None


def run_seq2seq(args):
    """Trains an encoder–decoder Transformer; reports held-out token accuracy, sacreBLEU and chrF."""
    t_start = time.perf_counter()
    output_lib.check_output_arguments(args)
    strategy = runtime.setup(args)
    from keras_tfm import models, optimizers, training
    from keras_tfm.data import seq2seq_pairs

    train_rows, test_rows, valid_rows = _split_rows(args)
    if not train_rows:
        raise UsageError("--max-words", f"no training pair has both sides of at most {args.max_words} words")
    t_tok = time.perf_counter()
    src_tok, tgt_tok = build_tokenizers(args.tokenizer, train_rows, args.vocabulary_size)
    train_src, train_tgt = (_ids(tok, [r[i] for r in train_rows]) for i, tok in enumerate((src_tok, tgt_tok)))
    # Decoder input [BOS] + target and labels target + [EOS]: L tokens each; one spare position.
    L = int(max(train_src.row_lengths().numpy().max(), train_tgt.row_lengths().numpy().max())) + 1
    runtime.log(
        f"data: {len(train_rows):,} train / {len(test_rows):,} held-out pairs (<= {args.max_words} words, "
        f"<= {L - 1} tokens); {args.tokenizer} vocabularies {src_tok.vocabulary_size} / "
        f"{tgt_tok.vocabulary_size} ({time.perf_counter() - t_tok:.1f} s)"
    )
    test_data = _pairs_dataset(src_tok, tgt_tok, test_rows, L)
    valid_data = _pairs_dataset(src_tok, tgt_tok, valid_rows, L) if valid_rows else test_data

    def data(start_step):
        ds = seq2seq_pairs(
            train_src,
            train_tgt,
            batch_size=args.batch_size,
            shuffle=True,
            seed=args.seed,
            drop_remainder=True,
            cache=True,
            prefetch=False,
        ).repeat()
        return runtime.skip(ds, start_step)

    def build():
        model = models.seq2seq(
            source_vocabulary_size=src_tok.vocabulary_size,
            target_vocabulary_size=tgt_tok.vocabulary_size,
            max_length=L + 1,
            **options.model_sizes(args),
        )
        optimizer = optimizers.vaswani_adam(
            args.d_model,
            warmup_steps=args.warmup_steps * args.grad_accum,
            scale=args.lr_scale / (args.grad_accum**0.5) if args.grad_accum > 1 else args.lr_scale,
            **runtime.optimizer_kwargs(args),
        )
        return training.compile_for_lm(
            model,
            optimizer,
            label_smoothing=args.label_smoothing,
            jit_compile=bool(args.jit_compile),  # padded batches: XLA only on request
            steps_per_execution=args.steps_per_execution,
        )

    result = runtime.train(args, build, data, valid_data, strategy)
    model = result.model
    scores = held_out_scores(
        model, src_tok, tgt_tok, test_rows, L, args.bleu_pairs, test_data, args.num_beams, args.length_penalty
    )
    log_scores(scores)
    examples = [
        {"source": s, "reference": r, "translation": h}
        for (s, r), h in list(zip(test_rows, scores.pop("translations")))[: args.show]
    ]
    for e in examples:
        runtime.log(
            f"  source:     {e['source']}\n  reference:  {e['reference']}\n  translation: {e['translation']}"
        )
    results = {"steps": result.steps, **scores, "train_seconds": result.seconds, "examples": examples}
    tokenizers = {"source_tokenizer": src_tok, "target_tokenizer": tgt_tok}
    written = output_lib.save_trained(args, "seq2seq", model, tokenizers, results, log=runtime.log)
    results.update({f"{key}_path": path for key, path in written.items()})
    results["total_seconds"] = total = time.perf_counter() - t_start
    runtime.log(f"wall time: training {result.seconds:.1f} s, total {total:.1f} s")
    runtime.write_results(args, results)
    results["model"] = model
    results["tokenizer"] = (src_tok, tgt_tok)
    return results


def _pairs_dataset(source_tokenizer, target_tokenizer, rows, max_length):
    from keras_tfm.data import seq2seq_pairs

    source = [ids[:max_length] for ids in _ids(source_tokenizer, [r[0] for r in rows]).to_list()]
    target = [ids[: max_length - 1] for ids in _ids(target_tokenizer, [r[1] for r in rows]).to_list()]
    return seq2seq_pairs(source, target, batch_size=256, cache=True)


def log_scores(scores):
    runtime.log(f"held-out token accuracy {scores['token_accuracy']:.4f}, loss {scores['test_loss']:.4f}")
    decoding = "greedy" if scores["num_beams"] == 1 else f"beam {scores['num_beams']}"
    runtime.log(
        f"sacreBLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.2f} on {scores['bleu_pairs']} held-out pairs "
        f"(precisions {' / '.join(f'{p:.1f}' for p in scores['bleu_precisions'])}, "
        f"BP {scores['brevity_penalty']:.3f}; {decoding}, {scores['decode_seconds']:.1f} s); "
        f"outputs with an unknown token {100 * scores['unknown_share']:.1f} %"
    )
    runtime.log(f"  {scores['bleu_signature']}")


def held_out_scores(
    model,
    source_tokenizer,
    target_tokenizer,
    rows,
    max_new_tokens,
    bleu_pairs,
    data=None,
    beams=4,
    length_penalty=0.6,
):
    """Teacher-forced token accuracy and loss on `rows`; cased sacreBLEU and chrF of the detokenized
    translations (beam search, greedy for `beams=1`) of the first `bleu_pairs` of them (0 = all), and the
    share of translations holding an unknown token (model compiled by `compile_for_lm`)."""
    from keras_tfm.analysis.bleu import corpus_scores

    if data is None:
        data = _pairs_dataset(source_tokenizer, target_tokenizer, rows, max_new_tokens)
    metrics = model.evaluate(data, verbose=0, return_dict=True)
    n_bleu = min(bleu_pairs, len(rows)) if bleu_pairs else len(rows)
    sources = [
        ids[:max_new_tokens] for ids in _ids(source_tokenizer, [r[0] for r in rows[:n_bleu]]).to_list()
    ]
    t_dec = time.perf_counter()
    hyp_ids = translate_ids(model, sources, max_new_tokens, beams, length_penalty)
    decode_seconds = time.perf_counter() - t_dec
    hyps = [_detok(target_tokenizer, row) for row in hyp_ids]
    unk = target_tokenizer.unk_id
    unknown = sum(1 for row in hyp_ids if unk is not None and unk in row)
    scores = corpus_scores(hyps, [r[1] for r in rows[:n_bleu]])
    return {
        "token_accuracy": float(metrics["accuracy"]),
        "test_loss": float(metrics["loss"]),
        **scores,
        "unknown_share": unknown / max(n_bleu, 1),
        "bleu_pairs": n_bleu,
        "num_beams": beams,
        "decode_seconds": decode_seconds,
        "translations": hyps,
    }


def translate_ids(model, source_ids, max_new_tokens, beams=4, length_penalty=0.6, batch_size=128):
    """Cached decoding with `keras_tfm.generation` (the best beam, or greedy for `beams=1`), in batches of
    `batch_size` sources; lists of ids without EOS."""
    from keras_tfm.generation import beam_search, generate
    from keras_tfm.tokenizers import BOS, EOS

    rows = []
    for start in range(0, len(source_ids), batch_size):
        batch = source_ids[start : start + batch_size]
        if beams == 1:
            out = generate(model, batch, max_new_tokens, sampler="greedy", bos_id=BOS, eos_id=EOS)
        else:
            sequences = beam_search(
                model,
                batch,
                max_new_tokens,
                num_beams=beams,
                length_penalty=length_penalty,
                bos_id=BOS,
                eos_id=EOS,
            )[0]
            out = sequences[:, 0]
        for row in out.tolist():
            ids = []
            for t in row:
                if t in (EOS, 0):
                    break
                ids.append(t)
            rows.append(ids)
    return rows


def _detok(tokenizer, ids):
    import tensorflow as tf

    if not ids:
        return ""
    return tokenizer.detokenize(tf.ragged.constant([ids], dtype=tf.int32)).numpy()[0].decode("utf-8")


def evaluate_seq2seq(trained, args):
    """`keras-tfm evaluate` for a seq2seq output: token accuracy, sacreBLEU and chrF on `--data` (a pairs file,
    or a folder's held-out split)."""
    from keras_tfm import training

    source, target = trained.tokenizers.get("source_tokenizer"), trained.tokenizers.get("target_tokenizer")
    if source is None or target is None:
        files = [output_lib.TOKENIZER_FILES[r] for r in ("source_tokenizer", "target_tokenizer")]
        raise UsageError("--model", f"needs {' and '.join(files)} beside the model")
    arguments = trained.info.get("arguments", {})
    reverse, languages = bool(arguments.get("reverse")), arguments.get("languages") or "en,de"
    if os.path.isdir(args.data):
        split = arguments.get("test_split") or "test_2016_flickr"
        rows = read_pairs(args.data, reverse, split=split, languages=languages)
    else:
        max_words = int(arguments.get("max_words") or 20)
        rows = keep_short(read_pairs(args.data, reverse), max_words)
        if not rows:
            raise UsageError("--data", f"no pair with both sides of at most {max_words} words")
    training.compile_for_lm(trained.model, "adam", jit_compile=False)
    max_new_tokens = int(trained.model.max_length) - 1
    beams, alpha = int(arguments.get("num_beams") or 4), float(arguments.get("length_penalty", 0.6))
    scores = held_out_scores(
        trained.model, source, target, rows, max_new_tokens, len(rows), None, beams, alpha
    )
    scores.pop("translations")
    return {**scores, "pairs": len(rows)}
