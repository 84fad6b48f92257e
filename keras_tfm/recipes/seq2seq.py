"""Recipe `seq2seq`: the encoder–decoder Transformer translating sentence pairs (Anki English→Spanish,
Multi30k English→German).

    results = train_seq2seq(data="spa-eng/spa.txt", steps=3000, output="runs/mt")

Text is tokenized by one cased byte-level BPE vocabulary learned from both sides of the training pairs
(`tokenizer="bpe"`, the default: nothing is unknown and detokenizing gives back normal text), or by a
lower-cased word vocabulary per language (`tokenizer="word"`). Held-out translations are decoded by beam
search (`num_beams`, GNMT length penalty) and scored with sacreBLEU (cased BLEU and chrF of the
detokenized text, `keras_tfm.analysis.bleu`). `train_seq2seq` takes the fields of `Seq2SeqOptions` as
keyword arguments and returns the results dict.
"""

import dataclasses
import os
import random
import time
from typing import Any

from keras_tfm.checks import check_choice, check_float, check_non_negative_int, check_positive_int
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes.options import TrainingOptions, argument_error, first_line
from keras_tfm.recipes.output import Trained

HELP = "Transformer translation on sentence pairs (a tab-separated file or a Multi30k-style folder)"
METRIC_HELP = "a tab-separated pairs file: token accuracy, BLEU-4"
DEFAULT_VOCABULARY = {"bpe": 8000, "word": 6000}


@dataclasses.dataclass(kw_only=True)
class Seq2SeqOptions(TrainingOptions):
    """The options of `train_seq2seq`: `TrainingOptions` and these.

    Attributes:
        data: tab-separated pairs, e.g. spa-eng/spa.txt (English<TAB>Spanish), or a folder of line-aligned
            files SPLIT.LANG[.gz] (Multi30k: train.en.gz, train.de.gz, test_2016_flickr.en.gz, ...).
        reverse: translate the second language into the first.
        languages: a folder's "SOURCE,TARGET" file suffixes.
        test_split: a folder's held-out split (all of it is translated and scored).
        max_pairs: use only the first this many pairs after shuffling, 0 = all.
        max_words: drop training pairs with a side longer than this many words.
        test_pairs: held-out pairs of a tab-separated file (at most a tenth of it).
        tokenizer: "bpe": one cased byte-level BPE vocabulary learned from both languages (no unknown
            token); "word": a lower-cased word vocabulary per language.
        vocabulary_size: vocabulary size; None = 8000 shared for bpe, 6000 per language for word.
        warmup_steps: warmup of the Transformer (Vaswani) schedule.
        lr_scale: multiplier on the schedule.
        label_smoothing: label smoothing of the loss.
        bleu_pairs: held-out pairs translated and scored, 0 = all.
        num_beams: beam width, 1 = greedy.
        length_penalty: GNMT length penalty alpha.
        show: translations printed.
        jit_compile: None = off (batches are padded to their longest pair: XLA only on request).
    """

    data: str
    reverse: bool = False
    languages: str = "en,de"
    test_split: str = "test_2016_flickr"
    max_pairs: int = 0
    max_words: int = 20
    test_pairs: int = 1000
    tokenizer: str = "bpe"
    vocabulary_size: int | None = None
    num_layers: int = 2
    num_heads: int = 4
    d_model: int = 128
    d_ff: int | None = 512
    dropout: float = 0.1
    warmup_steps: int = 1000
    lr_scale: float = 1.0
    label_smoothing: float = 0.1
    bleu_pairs: int = 500
    num_beams: int = 4
    length_penalty: float = 0.6
    show: int = 5
    steps: int = 3000
    batch_size: int = 64
    eval_interval: int = 500

    def __post_init__(self):
        super().__post_init__()
        check_positive_int("steps", self.steps)
        check_choice("tokenizer", self.tokenizer, tuple(DEFAULT_VOCABULARY))
        check_positive_int("vocabulary_size", self.vocabulary_size, allow_none=True)
        for name in ("max_pairs", "max_words", "test_pairs", "warmup_steps", "bleu_pairs", "show"):
            check_non_negative_int(name, getattr(self, name))
        check_positive_int("num_beams", self.num_beams)
        check_float("lr_scale", self.lr_scale, low=0.0, low_open=True)
        check_float("label_smoothing", self.label_smoothing, low=0.0, high=1.0, high_open=True)
        check_float("length_penalty", self.length_penalty)
        languages = [x.strip() for x in str(self.languages).split(",")]
        if len(languages) != 2 or not all(languages):
            raise ValueError(f"`languages` must be SOURCE,TARGET; received {self.languages!r}.")


def _decoded(rows):
    return [(s.decode("utf-8"), t.decode("utf-8")) for s, t in rows]


def read_pairs(path, reverse=False, argument="data", split="train", languages="en,de"):
    """[(source, target)] of a tab-separated file (first two columns), or of the line-aligned files
    `split.LANG[.gz]` of a folder (`languages` = "SOURCE,TARGET" suffixes); errors name `argument`."""
    from keras_tfm.data import load_aligned_files, load_tab_pairs

    try:
        if os.path.isdir(path):
            files = [_split_file(path, split, lang) for lang in _languages(languages)]
            for lang, file in zip(_languages(languages), files):
                if file is None:
                    raise ValueError(
                        f"`{argument}`: the folder {path!r} has no {split}.{lang}.gz or {split}.{lang}."
                    )
            rows = _decoded(load_aligned_files(*files).as_numpy_iterator())
        else:
            rows = _decoded(load_tab_pairs(path).as_numpy_iterator())
    except (OSError, ValueError) as error:
        if str(error).startswith(f"`{argument}`"):
            raise
        raise argument_error(argument, error) from None
    except Exception as error:  # a tf.errors.OpError from reading the file
        raise ValueError(f"`{argument}`: {first_line(error)}") from None
    if not rows:
        raise ValueError(f"`{argument}`: no sentence pairs in {path!r}.")
    return [(t, s) for s, t in rows] if reverse else rows


def _languages(languages):
    return [x.strip() for x in languages.split(",")]


def _split_file(folder, split, lang):
    """The file of `split` in language `lang` in `folder` (gzipped or not), or None."""
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


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


def _split_rows(o):
    """(train rows, held-out rows, validation rows or None) of `data`."""
    rows = read_pairs(o.data, o.reverse, languages=o.languages)
    random.Random(o.seed).shuffle(rows)
    if o.max_pairs:
        rows = rows[: o.max_pairs]
    if os.path.isdir(o.data):
        test_rows = read_pairs(o.data, o.reverse, split=o.test_split, languages=o.languages)
        valid_rows = None
        if all(_split_file(o.data, "val", lang) for lang in _languages(o.languages)):
            valid_rows = read_pairs(o.data, o.reverse, split="val", languages=o.languages)
        return keep_short(rows, o.max_words), test_rows, valid_rows
    n_test = min(o.test_pairs, len(rows) // 10)
    return keep_short(rows[n_test:], o.max_words), keep_short(rows[:n_test], o.max_words), None


def train_seq2seq(**options: Any) -> dict[str, Any]:
    """Trains an encoder–decoder Transformer; reports held-out token accuracy, sacreBLEU and chrF.

    Args:
        **options: the fields of `Seq2SeqOptions` (`data` is required).

    Returns:
        dict: "steps", "token_accuracy", "test_loss", "bleu", "chrf" (and the other sacreBLEU figures),
        "unknown_share", "examples", the times, "output_path" / "export_path" when written, and the
        trained "model" and its "tokenizer" (source, target).

    Raises:
        ValueError / TypeError / FileNotFoundError naming the option, before any training.
    """
    t_start = time.perf_counter()
    o = Seq2SeqOptions(**options)
    output_lib.check_output_options(o)
    strategy = runtime.setup(o)
    from keras_tfm import models, optimizers, training
    from keras_tfm.data import seq2seq_pairs

    train_rows, test_rows, valid_rows = _split_rows(o)
    if not train_rows:
        raise ValueError(f"`max_words`: no training pair has both sides of at most {o.max_words} words.")
    t_tok = time.perf_counter()
    src_tok, tgt_tok = build_tokenizers(o.tokenizer, train_rows, o.vocabulary_size)
    train_src, train_tgt = (_ids(tok, [r[i] for r in train_rows]) for i, tok in enumerate((src_tok, tgt_tok)))
    # Decoder input [BOS] + target and labels target + [EOS]: L tokens each; one spare position.
    L = int(max(train_src.row_lengths().numpy().max(), train_tgt.row_lengths().numpy().max())) + 1
    runtime.log(
        f"data: {len(train_rows):,} train / {len(test_rows):,} held-out pairs (<= {o.max_words} words, "
        f"<= {L - 1} tokens); {o.tokenizer} vocabularies {src_tok.vocabulary_size} / "
        f"{tgt_tok.vocabulary_size} ({time.perf_counter() - t_tok:.1f} s)"
    )
    test_data = _pairs_dataset(src_tok, tgt_tok, test_rows, L)
    valid_data = _pairs_dataset(src_tok, tgt_tok, valid_rows, L) if valid_rows else test_data

    def data(start_step):
        ds = seq2seq_pairs(
            train_src,
            train_tgt,
            batch_size=o.batch_size,
            shuffle=True,
            seed=o.seed,
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
            **o.model_sizes(),
        )
        optimizer = optimizers.vaswani_adam(
            o.d_model,
            warmup_steps=o.warmup_steps * o.grad_accum,
            scale=o.lr_scale / (o.grad_accum**0.5) if o.grad_accum > 1 else o.lr_scale,
            **runtime.optimizer_kwargs(o),
        )
        return training.compile_for_lm(
            model,
            optimizer,
            label_smoothing=o.label_smoothing,
            jit_compile=bool(o.jit_compile),  # padded batches: XLA only on request
            steps_per_execution=o.steps_per_execution,
        )

    result = runtime.train(o, build, data, valid_data, strategy)
    model = result.model
    # Saved in the .keras file: `model.translate(...)` after loading (a shared BPE vocabulary once).
    model.tokenizer = src_tok if src_tok is tgt_tok else (src_tok, tgt_tok)
    scores = held_out_scores(
        model, src_tok, tgt_tok, test_rows, L, o.bleu_pairs, test_data, o.num_beams, o.length_penalty
    )
    log_scores(scores)
    examples = [
        {"source": s, "reference": r, "translation": h}
        for (s, r), h in list(zip(test_rows, scores.pop("translations")))[: o.show]
    ]
    for e in examples:
        runtime.log(
            f"  source:     {e['source']}\n  reference:  {e['reference']}\n  translation: {e['translation']}"
        )
    results = {"steps": result.steps, **scores, "train_seconds": result.seconds, "examples": examples}
    tokenizers = {"source_tokenizer": src_tok, "target_tokenizer": tgt_tok}
    written = output_lib.save_trained(o, "seq2seq", model, tokenizers, results, log=runtime.log)
    results.update({f"{key}_path": path for key, path in written.items()})
    results["total_seconds"] = total = time.perf_counter() - t_start
    runtime.log(f"wall time: training {result.seconds:.1f} s, total {total:.1f} s")
    runtime.write_results(o, results)
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


def evaluate_seq2seq(trained: Trained, data: str) -> dict[str, float]:
    """Token accuracy, sacreBLEU and chrF of a trained seq2seq model (`output.load_trained`) on `data` (a
    pairs file, or a folder's held-out split).

    Returns:
        {"token_accuracy", "test_loss", "bleu", "chrf", ..., "pairs"}.
    """
    from keras_tfm import training

    source, target = trained.tokenizers.get("source_tokenizer"), trained.tokenizers.get("target_tokenizer")
    if source is None or target is None:
        files = [output_lib.TOKENIZER_FILES[r] for r in ("source_tokenizer", "target_tokenizer")]
        raise ValueError(f"`model` needs {' and '.join(files)} beside the model.")
    arguments = trained.info.get("arguments", {})
    reverse, languages = bool(arguments.get("reverse")), arguments.get("languages") or "en,de"
    if os.path.isdir(data):
        split = arguments.get("test_split") or "test_2016_flickr"
        rows = read_pairs(data, reverse, split=split, languages=languages)
    else:
        max_words = int(arguments.get("max_words") or 20)
        rows = keep_short(read_pairs(data, reverse), max_words)
        if not rows:
            raise ValueError(f"`data` has no pair with both sides of at most {max_words} words.")
    training.compile_for_lm(trained.model, "adam", jit_compile=False)
    max_new_tokens = int(trained.model.max_length) - 1
    beams, alpha = int(arguments.get("num_beams") or 4), float(arguments.get("length_penalty", 0.6))
    scores = held_out_scores(
        trained.model, source, target, rows, max_new_tokens, len(rows), None, beams, alpha
    )
    scores.pop("translations")
    return {**scores, "pairs": len(rows)}
