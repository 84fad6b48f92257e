"""Recipe `seq2seq`: the encoder–decoder Transformer translating tab-separated pairs (Anki English→Spanish)."""

import random
import time

from keras_tfm.checks import positive_int_arg
from keras_tfm.recipes import _options as options
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes._options import UsageError

HELP = "Transformer translation on tab-separated pairs"


def add_seq2seq_arguments(parser):
    d = options.add_data_arguments(
        parser, "tab-separated pairs, e.g. spa-eng/spa.txt (English<TAB>Spanish)", required=True
    )
    d.add_argument("--reverse", action="store_true", help="translate the second column into the first")
    d.add_argument(
        "--max-pairs", type=int, default=0, help="use only the first N pairs after shuffling, 0 = all"
    )
    d.add_argument(
        "--max-words",
        type=int,
        default=20,
        help=options.default_text("drop pairs with a side longer than this"),
    )
    d.add_argument(
        "--test-pairs",
        type=int,
        default=1000,
        help=options.default_text("held-out pairs for accuracy and BLEU"),
    )
    d.add_argument(
        "--vocabulary-size", type=positive_int_arg, default=6000, help=options.default_text("per language")
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
        "--bleu-pairs", type=int, default=500, help=options.default_text("held-out pairs translated for BLEU")
    )
    e.add_argument("--show", type=int, default=5, help=options.default_text("translations printed"))
    options.add_output_arguments(parser)
    options.add_training_arguments(parser, steps=3000, batch_size=64, steps_per_epoch=500)


def read_pairs(path, reverse=False, flag="--data"):
    """[(source, target)] of a tab-separated file (first two columns)."""
    from keras_tfm.data import load_tab_pairs

    try:
        rows = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in load_tab_pairs(path).as_numpy_iterator()]
    except (OSError, ValueError) as error:
        raise UsageError(flag, str(error)) from None
    except Exception as error:  # a tf.errors.OpError from reading the file
        raise UsageError(flag, str(error).splitlines()[0]) from None
    if not rows:
        raise UsageError(flag, f"no tab-separated pairs in {path!r}")
    return [(t, s) for s, t in rows] if reverse else rows


def _ids(tokenizer, texts):
    import tensorflow as tf

    return tokenizer(tf.constant(texts))  # ragged


def keep_short(rows, source_tokenizer, target_tokenizer, max_words):
    """The pairs whose sides both have at most `max_words` tokens."""
    s = _ids(source_tokenizer, [r[0] for r in rows])
    t = _ids(target_tokenizer, [r[1] for r in rows])
    keep = ((s.row_lengths() <= max_words) & (t.row_lengths() <= max_words)).numpy()
    return [r for r, k in zip(rows, keep) if k]


def run_seq2seq(args):
    """Trains an encoder–decoder Transformer; reports held-out token accuracy and corpus BLEU-4."""
    t_start = time.perf_counter()
    output_lib.check_output_arguments(args)
    strategy = runtime.setup(args)
    from keras_tfm import models, optimizers
    from keras_tfm.data import WordTokenizer, seq2seq_pairs

    rows = read_pairs(args.data, args.reverse)
    random.Random(args.seed).shuffle(rows)
    if args.max_pairs:
        rows = rows[: args.max_pairs]
    n_test = min(args.test_pairs, len(rows) // 10)
    test_rows, train_rows = rows[:n_test], rows[n_test:]
    src_tok = WordTokenizer.from_corpus([s for s, _ in train_rows], max_vocabulary_size=args.vocabulary_size)
    tgt_tok = WordTokenizer.from_corpus([t for _, t in train_rows], max_vocabulary_size=args.vocabulary_size)
    L = args.max_words + 1
    train_rows = keep_short(train_rows, src_tok, tgt_tok, args.max_words)
    test_rows = keep_short(test_rows, src_tok, tgt_tok, args.max_words)
    runtime.log(
        f"data: {len(train_rows):,} train / {len(test_rows):,} held-out pairs (<= {args.max_words} words); "
        f"vocabularies {src_tok.vocabulary_size} / {tgt_tok.vocabulary_size}"
    )
    train_src, train_tgt = (
        _ids(src_tok, [r[0] for r in train_rows]),
        _ids(tgt_tok, [r[1] for r in train_rows]),
    )
    test_data = seq2seq_pairs(
        _ids(src_tok, [r[0] for r in test_rows]),
        _ids(tgt_tok, [r[1] for r in test_rows]),
        batch_size=256,
        cache=True,
    )

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
        return models.compile_for_lm(
            model,
            optimizer,
            label_smoothing=args.label_smoothing,
            jit_compile=bool(args.jit_compile),  # padded batches: XLA only on request
            steps_per_execution=args.steps_per_execution,
        )

    result = runtime.train(args, build, data, test_data, strategy)
    model = result.model
    scores = held_out_scores(model, src_tok, tgt_tok, test_rows, L, args.bleu_pairs, test_data)
    runtime.log(f"held-out token accuracy {scores['token_accuracy']:.4f}, loss {scores['test_loss']:.4f}")
    bleu = scores["bleu_details"]
    runtime.log(
        f"corpus BLEU-4 {100 * bleu['bleu']:.2f} on {scores['bleu_pairs']} held-out pairs "
        f"(precisions {', '.join(f'{100 * p:.1f}' for p in bleu['precisions'])}, BP {bleu['brevity_penalty']:.3f}, "
        f"greedy decoding {scores['decode_seconds']:.1f} s)"
    )
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


def held_out_scores(model, source_tokenizer, target_tokenizer, rows, max_new_tokens, bleu_pairs, data=None):
    """Teacher-forced token accuracy and loss on `rows`, corpus BLEU-4 of greedy translations of the first
    `bleu_pairs` of them (model compiled by `compile_for_lm`)."""
    import tensorflow as tf

    from keras_tfm.bleu import corpus_bleu
    from keras_tfm.data import seq2seq_pairs, split_words

    if data is None:
        data = seq2seq_pairs(
            _ids(source_tokenizer, [r[0] for r in rows]),
            _ids(target_tokenizer, [r[1] for r in rows]),
            batch_size=256,
        )
    metrics = model.evaluate(data, verbose=0, return_dict=True)
    n_bleu = min(bleu_pairs, len(rows))
    t_dec = time.perf_counter()
    hyp_ids = greedy_translate(model, _ids(source_tokenizer, [r[0] for r in rows[:n_bleu]]), max_new_tokens)
    decode_seconds = time.perf_counter() - t_dec
    hyps = [_detok(target_tokenizer, row) for row in hyp_ids]
    refs = split_words(tf.constant([r[1] for r in rows[:n_bleu]])).to_list()
    refs = [[w.decode("utf-8") for w in r] for r in refs]
    bleu = corpus_bleu([h.split() for h in hyps], refs)
    return {
        "token_accuracy": float(metrics["accuracy"]),
        "test_loss": float(metrics["loss"]),
        "bleu": bleu["bleu"],
        "bleu_details": bleu,
        "bleu_pairs": n_bleu,
        "decode_seconds": decode_seconds,
        "translations": hyps,
    }


def greedy_translate(model, source_ids, max_new_tokens):
    """Greedy decoding with the cached generator of `keras_tfm.generation`; lists of ids without EOS."""
    from keras_tfm.data import BOS, EOS
    from keras_tfm.generation import generate

    source = source_ids.to_list() if hasattr(source_ids, "to_list") else source_ids
    out = generate(model, source, max_new_tokens, sampler="greedy", bos_id=BOS, eos_id=EOS)
    rows = []
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
    """`keras-tfm evaluate` for a seq2seq output: token accuracy and BLEU-4 on the pairs file `--data`."""
    from keras_tfm import models

    source, target = trained.tokenizers.get("source_tokenizer"), trained.tokenizers.get("target_tokenizer")
    if source is None or target is None:
        files = [output_lib.TOKENIZER_FILES[r] for r in ("source_tokenizer", "target_tokenizer")]
        raise UsageError("--model", f"needs {' and '.join(files)} beside the model")
    arguments = trained.info.get("arguments", {})
    max_words = int(arguments.get("max_words") or 20)
    rows = keep_short(read_pairs(args.data, bool(arguments.get("reverse"))), source, target, max_words)
    if not rows:
        raise UsageError("--data", f"no pair with both sides of at most {max_words} words")
    models.compile_for_lm(trained.model, "adam", jit_compile=False)
    scores = held_out_scores(trained.model, source, target, rows, max_words + 1, len(rows))
    scores.pop("translations")
    scores.pop("bleu_details")
    return {**scores, "pairs": len(rows)}
