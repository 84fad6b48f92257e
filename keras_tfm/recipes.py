"""Ready-made training recipes shared by `examples/*.py` and `keras-tfm train`.

    gpt      character-level GPT on Tiny Shakespeare (nanoGPT's `train_shakespeare_char` CPU run)
    bert     BERT: MLM pretraining on the SST-2 training sentences, then SST-2 classification
    seq2seq  Transformer English→Spanish translation on the Anki/Tatoeba pairs

Each recipe is two functions: `add_<name>_arguments(parser)` declares its
command-line options (with small, fast defaults where the full run is long)
and `run_<name>(args)` runs it and returns a dict of results. `TASKS` maps the
names to `(add_arguments, run, help)`; `keras_tfm.cli` builds `keras-tfm train
<name>` from it and every example script calls the same two functions.
"""

import argparse
import json
import os
import random
import sys
import time

# --------------------------------------------------------------------------- #
# Shared options
# --------------------------------------------------------------------------- #


def add_training_arguments(
    parser, steps, batch_size, steps_per_epoch, learning_rate=None, steps_per_execution=1
):
    """Options common to every recipe (step counts, distribution, precision, logs, backups)."""
    g = parser.add_argument_group("training")
    g.add_argument("--steps", type=int, default=steps, help="training steps (batches) (default: %(default)s)")
    g.add_argument(
        "--batch-size", type=int, default=batch_size, help="global batch size (default: %(default)s)"
    )
    g.add_argument(
        "--eval-interval",
        type=int,
        default=steps_per_epoch,
        help="steps between evaluations = Keras epoch length (default: %(default)s)",
    )
    if learning_rate is not None:
        g.add_argument(
            "--learning-rate",
            type=float,
            default=learning_rate,
            help="peak learning rate (default: %(default)s)",
        )
    g.add_argument("--seed", type=int, default=1337, help="random seed (default: %(default)s)")
    g.add_argument(
        "--strategy",
        choices=("default", "mirrored", "multi_worker"),
        default="default",
        help="tf.distribute strategy; multi_worker reads TF_CONFIG (default: %(default)s)",
    )
    g.add_argument(
        "--cpu-devices",
        type=int,
        default=0,
        help="split the CPU into this many logical devices (to try --strategy mirrored on a CPU-only machine)",
    )
    g.add_argument(
        "--precision",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
        default="float32",
        help="Keras dtype policy; mixed_float16 adds dynamic loss scaling (default: %(default)s)",
    )
    # None (not given): gpt and bert pass it on to the compile helpers, whose "auto" turns XLA on
    # except under a strategy; seq2seq turns it into False.
    g.add_argument(
        "--jit-compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="XLA-compile the train step (default: on for gpt and bert, whose batches have one fixed shape; "
        "off for seq2seq, whose batches are padded to their longest pair; off under --strategy mirrored/multi_worker)",
    )
    g.add_argument(
        "--steps-per-execution",
        type=int,
        default=steps_per_execution,
        help="batches per compiled call (default: %(default)s)",
    )
    g.add_argument(
        "--grad-accum",
        type=int,
        default=1,
        help="gradient accumulation steps (optimizer update every N batches) (default: %(default)s)",
    )
    g.add_argument("--log-dir", default=None, help="TensorBoard log folder (default: none)")
    g.add_argument(
        "--backup-dir", default=None, help="BackupAndRestore folder: resume after a crash (default: none)"
    )
    g.add_argument(
        "--save-freq", type=int, default=None, help="backup every N steps (default: every evaluation)"
    )
    g.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras fit verbosity (default: 1, progress bar)",
    )


def _setup(args):
    """Logical CPU devices, strategy and precision; call before any other TF op."""
    import tensorflow as tf

    if getattr(args, "cpu_devices", 0) and args.cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_devices
        )
    from keras_tfm import training

    strategy = training.distribution_strategy(args.strategy)
    if args.strategy == "mirrored" and strategy.num_replicas_in_sync == 1 and args.cpu_devices > 1:
        strategy = training.distribution_strategy(
            "mirrored", devices=[f"/cpu:{i}" for i in range(args.cpu_devices)]
        )
    training.set_precision(args.precision)
    import keras

    keras.utils.set_random_seed(args.seed)
    for name in ("steps", "batch_size", "eval_interval", "steps_per_execution", "grad_accum"):
        value = getattr(args, name)
        if value < 1:
            raise SystemExit(f"error: --{name.replace('_', '-')} must be >= 1; received {value}")
    return strategy


def _optimizer_kwargs(args):
    return {"gradient_accumulation_steps": args.grad_accum} if args.grad_accum > 1 else {}


def _skip(ds, start_step):
    """`ds` resumed at batch `start_step` (unchanged when 0)."""
    return ds.skip(start_step) if start_step else ds


def _log(*parts):
    print(*parts, flush=True)


def _train(args, model_fn, data, validation_data, validation_steps, strategy):
    from keras_tfm import training

    return training.train(
        model_fn,
        data,
        steps=args.steps,
        steps_per_epoch=min(args.eval_interval, args.steps),
        validation_data=validation_data,
        validation_steps=validation_steps,
        strategy=strategy,
        log_dir=args.log_dir,
        backup_dir=args.backup_dir,
        save_freq=args.save_freq,
        verbose=args.verbose,
    )


def _write_results(args, results):
    if getattr(args, "results", None):
        with open(args.results, "w") as f:
            json.dump(results, f, indent=2)


# --------------------------------------------------------------------------- #
# GPT on Tiny Shakespeare
# --------------------------------------------------------------------------- #


def add_gpt_arguments(parser):
    """nanoGPT `train_shakespeare_char.py` with its CPU command-line overrides as defaults."""
    d = parser.add_argument_group("data")
    src = d.add_mutually_exclusive_group()
    src.add_argument("--data", help="Tiny Shakespeare input.txt (split 90/10 like nanoGPT's prepare.py)")
    src.add_argument("--manual-dir", help="folder holding input.txt for TFDS tiny_shakespeare (offline)")
    d.add_argument("--tfds-data-dir", default=None, help="TFDS data_dir (default ~/tensorflow_datasets)")
    m = parser.add_argument_group("model (nanoGPT CPU settings)")
    m.add_argument("--block-size", type=int, default=64, help="context length (default: %(default)s)")
    m.add_argument("--n-layer", type=int, default=4, help="(default: %(default)s)")
    m.add_argument("--n-head", type=int, default=4, help="(default: %(default)s)")
    m.add_argument("--n-embd", type=int, default=128, help="(default: %(default)s)")
    m.add_argument("--dropout", type=float, default=0.0, help="(default: %(default)s)")
    m.add_argument(
        "--position",
        choices=("learned", "sinusoidal", "rope", "alibi", "relative"),
        default="learned",
        help="position scheme (default: %(default)s, as nanoGPT/GPT-2)",
    )
    o = parser.add_argument_group("optimizer (nanoGPT defaults, except the schedule)")
    o.add_argument(
        "--schedule",
        choices=("wsd", "cosine"),
        default="wsd",
        help="learning-rate decay after the warmup: 'wsd' holds the peak, then decays linearly to --min-lr over "
        "the last --decay-fraction of the run; 'cosine' is nanoGPT's cosine decay to --min-lr (default: %(default)s)",
    )
    o.add_argument(
        "--decay-fraction",
        type=float,
        default=0.2,
        help="wsd: share of the run spent decaying (default: %(default)s)",
    )
    o.add_argument("--min-lr", type=float, default=1e-4, help="learning-rate floor (default: %(default)s)")
    o.add_argument("--warmup-steps", type=int, default=100, help="linear warmup (default: %(default)s)")
    o.add_argument(
        "--lr-decay-steps",
        type=int,
        default=None,
        help="step at which the floor is reached (default: --steps)",
    )
    o.add_argument(
        "--weight-decay",
        type=float,
        default=0.1,
        help="AdamW decay on weight matrices (default: %(default)s)",
    )
    o.add_argument("--beta2", type=float, default=0.99, help="(default: %(default)s)")
    o.add_argument(
        "--grad-clip", type=float, default=1.0, help="global norm clip, 0 = off (default: %(default)s)"
    )
    e = parser.add_argument_group("evaluation and sampling")
    e.add_argument(
        "--eval-iters",
        type=int,
        default=20,
        help="val batches per evaluation, 0 = whole split (default: %(default)s)",
    )
    e.add_argument(
        "--sample-tokens", type=int, default=500, help="characters sampled at the end (default: %(default)s)"
    )
    e.add_argument("--temperature", type=float, default=0.8, help="(default: %(default)s)")
    e.add_argument("--top-k", type=int, default=200, help="(default: %(default)s)")
    e.add_argument("--results", default=None, help="write the results as JSON here")
    add_training_arguments(
        parser, steps=2000, batch_size=12, steps_per_epoch=250, learning_rate=1e-3, steps_per_execution=10
    )


def load_shakespeare_text(args):
    """(train_text, val_text): nanoGPT's 90/10 split of a file, or TFDS's train/validation splits."""
    if args.data:
        with open(args.data, encoding="utf-8") as f:
            text = f.read()
        n = int(len(text) * 0.9)
        return text[:n], text[n:]
    from keras_tfm.data import load_tiny_shakespeare

    def split(name):
        ds = load_tiny_shakespeare(
            name, data_dir=args.tfds_data_dir, manual_dir=args.manual_dir, download=args.manual_dir is None
        )
        return next(iter(ds.as_numpy_iterator())).decode("utf-8")

    return split("train"), split("validation")


def sample_text(model, prompt_ids, num_tokens, block_size, temperature=0.8, top_k=200, seed=0):
    """nanoGPT's `generate`: samples one token at a time, cropping the context to the last `block_size` ids.

    The whole loop is one XLA-compiled `tf.while_loop`: the context lives in a
    fixed `[1, block_size]` window (right-padded while it is shorter; the
    causal mask hides the padding from the position that is read) that slides
    left once it is full, and each step runs the model on the window. The KV
    cache of `keras_tfm.generation` cannot be used here, because the sample is
    longer than the model's maximum length (a sliding window re-encodes
    every position at each step).

    Returns:
        list of int ids (the new tokens).
    """
    import numpy as np
    import tensorflow as tf

    from keras_tfm.generation import sample, split_seed

    prompt = list(prompt_ids)[-block_size:]
    if not prompt:
        raise ValueError("`prompt_ids` must contain at least one id.")
    if num_tokens <= 0:
        return []
    top_k = min(int(top_k), int(model.output_shape[-1])) if top_k else 0
    window = np.zeros((1, block_size), "int32")
    window[0, : len(prompt)] = prompt

    @tf.function(jit_compile=True)
    def run(window, length, seed):
        def body(i, window, length, out):
            logits = model(window, training=False)[0]
            last = tf.gather(logits, length - 1)[None, :]
            token = sample(last, split_seed(seed, i), temperature=temperature, top_k=top_k)[0]
            full = length >= block_size
            shifted = tf.concat([window[:, 1:], token[None, None]], axis=1)
            written = tf.tensor_scatter_nd_update(
                window, [[0, tf.minimum(length, block_size - 1)]], token[None]
            )
            window = tf.where(full, shifted, written)
            return i + 1, window, tf.minimum(length + 1, block_size), out.write(i, token)

        out = tf.TensorArray(tf.int32, size=num_tokens)
        _, _, _, out = tf.while_loop(
            lambda i, *_: i < num_tokens, body, (tf.constant(0), window, length, out)
        )
        return out.stack()

    tokens = run(tf.constant(window), tf.constant(len(prompt), tf.int32), tf.constant([seed, 0], tf.int32))
    return [int(t) for t in tokens.numpy()]


def nanogpt_init(model, num_layers, seed=0, layer_norm_bias=False):
    """nanoGPT's details on top of the GPT-2 layout of `keras_tfm.models.gpt`.

    * residual output projections (attention output, FFN output) drawn from
      N(0, 0.02 / sqrt(2 · num_layers)) (GPT-2's scaled init);
    * with `layer_norm_bias=False`, the LayerNorm offsets stay at 0 (frozen),
      as nanoGPT's `bias=False` LayerNorm.
    """
    import math

    import numpy as np

    rng = np.random.default_rng(seed)
    std = 0.02 / math.sqrt(2 * num_layers)
    for v in model.weights:
        if v.path.endswith(("attention_output/kernel", "feed_forward/output/kernel")):
            v.assign(rng.normal(0.0, std, tuple(v.shape)).astype(v.dtype))
        if not layer_norm_bias and "norm" in v.path and v.path.endswith("/beta"):
            v.trainable = False
    return model


def run_gpt(args):
    """Trains the character GPT; prints val loss every `--eval-interval` steps, a sample and the wall time."""
    t_start = time.perf_counter()
    strategy = _setup(args)
    import tensorflow as tf

    from keras_tfm import models, optimizers, schedules
    from keras_tfm.data import CharTokenizer, lm_windows

    train_text, val_text = load_shakespeare_text(args)
    tokenizer = CharTokenizer.from_corpus(train_text + val_text, special_tokens=False)
    vocab = tokenizer.vocabulary_size
    train_ids = tokenizer(train_text).numpy()
    val_ids = tokenizer(val_text).numpy()
    _log(f"data: {len(train_ids):,} train / {len(val_ids):,} val characters, vocabulary {vocab}")

    T, B = args.block_size, args.batch_size
    train_windows = lm_windows(train_ids, T, B, random_offsets=True, seed=args.seed)

    def data(start_step):  # batch i depends only on (seed, i): exact resumption
        return _skip(train_windows, start_step)

    if args.eval_iters > 0:  # nanoGPT: `eval_iters` random batches (fixed here, so evaluations compare)
        val_data = (
            lm_windows(val_ids, T, B, random_offsets=True, seed=args.seed + 1).take(args.eval_iters).cache()
        )
    else:
        val_data = lm_windows(val_ids, T, B, random_offsets=False, shuffle=False).cache()

    decay_steps = args.lr_decay_steps or args.steps
    warmup_steps = args.warmup_steps if args.warmup_steps < decay_steps else decay_steps // 10
    accum = args.grad_accum
    if not 0.0 < args.decay_fraction <= 1.0:
        raise SystemExit(f"error: --decay-fraction must be in (0, 1]; received {args.decay_fraction}")

    def build():
        model = models.gpt(
            vocabulary_size=vocab,
            max_length=T,
            num_layers=args.n_layer,
            num_heads=args.n_head,
            d_model=args.n_embd,
            dropout=args.dropout,
            position=args.position,
            use_bias=False,  # nanoGPT bias=False
            activation="gelu",  # torch nn.GELU (exact)
        )
        nanogpt_init(model, args.n_layer, seed=args.seed)
        # Keras advances the schedule on every micro-batch when accumulating.
        min_ratio = args.min_lr / args.learning_rate
        if args.schedule == "cosine":
            schedule = schedules.nanogpt_schedule(
                args.learning_rate,
                decay_steps * accum,
                warmup_steps=warmup_steps * accum,
                min_ratio=min_ratio,
            )
        else:
            schedule = schedules.WarmupStableDecay(
                args.learning_rate,
                decay_steps * accum,
                warmup_steps=warmup_steps * accum,
                decay_fraction=args.decay_fraction,
                min_ratio=min_ratio,
            )
        optimizer = optimizers.adamw(
            schedule,
            weight_decay=args.weight_decay,
            beta_1=0.9,
            beta_2=args.beta2,
            # nanoGPT decays every ≥2-D parameter, embeddings included.
            no_decay_names=("bias", "gamma", "beta", "scale"),
            global_clipnorm=args.grad_clip or None,
            **_optimizer_kwargs(args),
        )
        return models.compile_for_lm(
            model,
            optimizer,
            ignore_index=None,  # id 0 is a real character here
            jit_compile=args.jit_compile,
            steps_per_execution=args.steps_per_execution,
        )

    result = _train(args, build, data, val_data, None, strategy)
    model = result.model
    final_val = float(model.evaluate(val_data, verbose=0, return_dict=True)["loss"])
    full_val = lm_windows(val_ids, T, 64, random_offsets=False, shuffle=False)
    full_val_loss = float(model.evaluate(full_val, verbose=0, return_dict=True)["loss"])
    train_seconds = result.seconds
    windows = (len(val_ids) - 1) // T
    _log(
        f"step {result.steps}: validation loss {full_val_loss:.4f} (whole split, {windows:,} windows of {T}); "
        f"{final_val:.4f} on the {args.eval_iters or 'all'} evaluation batches (nanoGPT's estimate)"
    )
    sample = ""
    if args.sample_tokens > 0:
        newline = tokenizer.token_to_id("\n")
        ids = sample_text(model, [newline], args.sample_tokens, T, args.temperature, args.top_k, args.seed)
        sample = tokenizer.detokenize(tf.constant([ids], tf.int32)).numpy()[0].decode("utf-8")
        _log("---------- sample ----------")
        _log(sample)
        _log("----------------------------")
    total = time.perf_counter() - t_start
    _log(f"wall time: training {train_seconds:.1f} s, total {total:.1f} s")
    results = {
        "steps": result.steps,
        "val_loss": full_val_loss,
        "val_loss_whole_split": full_val_loss,
        "val_loss_eval_batches": final_val,
        "history": result.history,
        "train_seconds": train_seconds,
        "total_seconds": total,
        "parameters": int(model.count_params()),
        "sample": sample,
    }
    _write_results(args, results)
    results["model"] = model
    results["tokenizer"] = tokenizer
    return results


# --------------------------------------------------------------------------- #
# BERT on SST-2
# --------------------------------------------------------------------------- #


def add_bert_arguments(parser):
    d = parser.add_argument_group("data")
    src = d.add_mutually_exclusive_group()
    src.add_argument(
        "--data-dir", help="folder with stsa.binary.{train,dev,test} ('<label> <sentence>' lines)"
    )
    src.add_argument("--manual-dir", help="folder holding SST-2.zip for TFDS glue/sst2 (offline)")
    d.add_argument("--tfds-data-dir", default=None, help="TFDS data_dir (default ~/tensorflow_datasets)")
    d.add_argument(
        "--vocabulary-size", type=int, default=4000, help="WordPiece vocabulary (default: %(default)s)"
    )
    d.add_argument(
        "--sequence-length", type=int, default=48, help="tokens per sentence (default: %(default)s)"
    )
    m = parser.add_argument_group("model")
    m.add_argument("--num-layers", type=int, default=2, help="(default: %(default)s)")
    m.add_argument("--num-heads", type=int, default=4, help="(default: %(default)s)")
    m.add_argument("--d-model", type=int, default=128, help="(default: %(default)s)")
    m.add_argument("--d-ff", type=int, default=512, help="(default: %(default)s)")
    m.add_argument("--dropout", type=float, default=0.1, help="(default: %(default)s)")
    p = parser.add_argument_group(
        "fine-tuning (the MLM pretraining uses --steps/--batch-size/--learning-rate)"
    )
    p.add_argument("--finetune-epochs", type=int, default=8, help="classifier epochs (default: %(default)s)")
    p.add_argument("--finetune-batch-size", type=int, default=32, help="(default: %(default)s)")
    p.add_argument("--finetune-learning-rate", type=float, default=2e-4, help="(default: %(default)s)")
    p.add_argument("--mask-rate", type=float, default=0.15, help="MLM selection rate (default: %(default)s)")
    p.add_argument("--results", default=None, help="write the results as JSON here")
    add_training_arguments(parser, steps=800, batch_size=64, steps_per_epoch=200, learning_rate=1e-3)


def load_sst2(args):
    """{split: (sentences, labels)} for train, dev (and test when present)."""
    from keras_tfm.data import load_glue_sst2, load_label_sentence_lines

    splits = {}
    if args.data_dir:
        for split in ("train", "dev", "test"):
            path = os.path.join(args.data_dir, f"stsa.binary.{split}")
            if os.path.exists(path):
                rows = list(load_label_sentence_lines(path).as_numpy_iterator())
                splits[split] = ([s.decode("utf-8") for s, _ in rows], [int(y) for _, y in rows])
    else:
        for split, tfds_split in (("train", "train"), ("dev", "validation")):
            ds = load_glue_sst2(
                tfds_split,
                data_dir=args.tfds_data_dir,
                manual_dir=args.manual_dir,
                download=args.manual_dir is None,
            )
            rows = list(ds.as_numpy_iterator())
            splits[split] = ([s.decode("utf-8") for s, _ in rows], [int(y) for _, y in rows])
    if "train" not in splits or "dev" not in splits:
        raise SystemExit("error: SST-2 needs a train and a dev split")
    return splits


def run_bert(args):
    """MLM pretraining on the training sentences, then fine-tuning; reports dev (and test) accuracy."""
    t_start = time.perf_counter()
    strategy = _setup(args)
    import numpy as np
    import tensorflow as tf

    from keras_tfm import models, optimizers, schedules
    from keras_tfm.data import WordPieceTokenizer, mlm_mask

    splits = load_sst2(args)
    train_sentences, train_labels = splits["train"]
    tokenizer = WordPieceTokenizer.from_corpus(
        train_sentences, args.vocabulary_size, add_cls_sep=True, sequence_length=args.sequence_length
    )
    vocab = tokenizer.vocabulary_size
    L = args.sequence_length

    def encode(sentences):
        ids = tokenizer(tf.constant(sentences)).numpy().astype("int32")
        return {
            "token_ids": ids,
            "segment_ids": np.zeros_like(ids),
            "padding_mask": (ids != 0).astype("int32"),
        }

    x = {k: encode(v[0]) for k, v in splits.items()}
    y = {k: np.asarray(v[1], "int32") for k, v in splits.items()}
    _log(
        "data: "
        + ", ".join(f"{k} {len(v):,}" for k, v in y.items())
        + f" sentences; WordPiece vocabulary {vocab}"
    )

    # ---- 1. masked-LM pretraining on the training sentences (no labels) ---- #
    train_ids = tf.data.Dataset.from_tensor_slices(x["train"]["token_ids"])

    def mlm_data(start_step):
        ds = train_ids.repeat().shuffle(10_000, seed=args.seed).batch(args.batch_size, drop_remainder=True)
        ds = mlm_mask(ds, vocab, mask_rate=args.mask_rate, seed=args.seed)

        def to_inputs(features, labels, weights):
            ids = features["token_ids"]
            inputs = {
                "token_ids": ids,
                "segment_ids": tf.zeros_like(ids),
                "padding_mask": tf.cast(features["padding_mask"], tf.int32),
            }
            return inputs, labels, weights

        ds = ds.map(to_inputs, num_parallel_calls=tf.data.AUTOTUNE)
        return _skip(ds, start_step)

    dev_ids = tf.data.Dataset.from_tensor_slices(x["dev"]["token_ids"]).batch(256)
    mlm_val = (
        mlm_mask(dev_ids, vocab, mask_rate=args.mask_rate, seed=args.seed + 1)
        .map(
            lambda f, labels, w: (
                {
                    "token_ids": f["token_ids"],
                    "segment_ids": tf.zeros_like(f["token_ids"]),
                    "padding_mask": tf.cast(f["padding_mask"], tf.int32),
                },
                labels,
                w,
            )
        )
        .cache()
    )

    holder = {}

    def build_mlm():
        encoder = models.bert_encoder(
            vocabulary_size=vocab,
            max_length=L,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            d_model=args.d_model,
            d_ff=args.d_ff,
            dropout=args.dropout,
        )
        holder["encoder"] = encoder
        schedule = schedules.nanogpt_schedule(
            args.learning_rate,
            args.steps * args.grad_accum,
            warmup_steps=min(200, args.steps // 10) * args.grad_accum,
            min_ratio=0.1,
        )
        optimizer = optimizers.adamw(
            schedule, weight_decay=0.01, beta_2=0.999, global_clipnorm=1.0, **_optimizer_kwargs(args)
        )
        return models.compile_for_lm(
            models.bert_masked_lm(encoder),
            optimizer,
            ignore_index=None,
            jit_compile=args.jit_compile,
            steps_per_execution=args.steps_per_execution,
        )

    _log(f"== 1. masked-LM pretraining: {args.steps} steps of {args.batch_size} sentences ==")
    pre = _train(args, build_mlm, mlm_data, mlm_val, None, strategy)
    mlm_loss = pre.history.get("val_loss", [float("nan")])[-1]
    mlm_acc = pre.history.get("val_accuracy", [float("nan")])[-1]
    _log(f"MLM dev loss {mlm_loss:.4f}, masked-token accuracy {mlm_acc:.4f}")

    # ---- 2. fine-tuning the classifier -------------------------------------- #
    n_train = len(y["train"])
    steps_per_epoch = max(1, n_train // args.finetune_batch_size)
    ft_steps = steps_per_epoch * args.finetune_epochs

    def ft_data(start_step):
        ds = tf.data.Dataset.from_tensor_slices((x["train"], y["train"]))
        ds = ds.repeat().shuffle(n_train, seed=args.seed).batch(args.finetune_batch_size, drop_remainder=True)
        return _skip(ds, start_step)

    dev = tf.data.Dataset.from_tensor_slices((x["dev"], y["dev"])).batch(256).cache()

    def build_classifier():
        with strategy.scope():
            classifier = models.bert_classifier(holder["encoder"], num_classes=2, pooling="cls")
            schedule = schedules.nanogpt_schedule(
                args.finetune_learning_rate,
                ft_steps * args.grad_accum,
                warmup_steps=max(1, ft_steps // 10) * args.grad_accum,
                min_ratio=1e-3,
            )
            optimizer = optimizers.adamw(
                schedule, weight_decay=0.01, beta_2=0.999, global_clipnorm=1.0, **_optimizer_kwargs(args)
            )
            return models.compile_for_classification(
                classifier,
                optimizer,
                jit_compile=args.jit_compile,
                steps_per_execution=args.steps_per_execution,
            )

    _log(
        f"== 2. fine-tuning: {args.finetune_epochs} epochs x {steps_per_epoch} steps of {args.finetune_batch_size} =="
    )
    ft_args = argparse.Namespace(**vars(args))
    ft_args.steps, ft_args.eval_interval = ft_steps, steps_per_epoch
    ft_args.backup_dir = os.path.join(args.backup_dir, "finetune") if args.backup_dir else None
    ft_args.log_dir = os.path.join(args.log_dir, "finetune") if args.log_dir else None
    if args.backup_dir:
        args.backup_dir = os.path.join(args.backup_dir, "pretrain")
    ft = _train(ft_args, build_classifier, ft_data, dev, None, strategy)
    classifier = ft.model
    dev_acc = float(classifier.evaluate(dev, verbose=0, return_dict=True)["accuracy"])
    results = {
        "mlm_steps": pre.steps,
        "mlm_dev_loss": mlm_loss,
        "mlm_dev_masked_accuracy": mlm_acc,
        "finetune_steps": ft.steps,
        "dev_accuracy": dev_acc,
        "dev_accuracy_per_epoch": ft.history.get("val_accuracy", []),
        "pretrain_seconds": pre.seconds,
        "finetune_seconds": ft.seconds,
    }
    if "test" in x:
        test = tf.data.Dataset.from_tensor_slices((x["test"], y["test"])).batch(256)
        results["test_accuracy"] = float(classifier.evaluate(test, verbose=0, return_dict=True)["accuracy"])
    majority = max(np.mean(y["dev"]), 1 - np.mean(y["dev"]))
    _log(
        f"SST-2 dev accuracy {dev_acc:.4f} (majority class {majority:.4f})"
        + (f", test accuracy {results['test_accuracy']:.4f}" if "test_accuracy" in results else "")
    )
    results["total_seconds"] = time.perf_counter() - t_start
    _log(
        f"wall time: pretraining {pre.seconds:.1f} s, fine-tuning {ft.seconds:.1f} s, "
        f"total {results['total_seconds']:.1f} s"
    )
    _write_results(args, results)
    results["model"] = classifier
    return results


# --------------------------------------------------------------------------- #
# seq2seq translation
# --------------------------------------------------------------------------- #


def add_seq2seq_arguments(parser):
    d = parser.add_argument_group("data")
    d.add_argument(
        "--data", required=True, help="tab-separated pairs, e.g. spa-eng/spa.txt (English<TAB>Spanish)"
    )
    d.add_argument("--reverse", action="store_true", help="translate the second column into the first")
    d.add_argument(
        "--max-pairs", type=int, default=0, help="use only the first N pairs after shuffling, 0 = all"
    )
    d.add_argument(
        "--max-words",
        type=int,
        default=20,
        help="drop pairs with a side longer than this (default: %(default)s)",
    )
    d.add_argument(
        "--test-pairs",
        type=int,
        default=1000,
        help="held-out pairs for accuracy and BLEU (default: %(default)s)",
    )
    d.add_argument("--vocabulary-size", type=int, default=6000, help="per language (default: %(default)s)")
    m = parser.add_argument_group("model")
    m.add_argument(
        "--num-layers", type=int, default=2, help="encoder and decoder layers (default: %(default)s)"
    )
    m.add_argument("--num-heads", type=int, default=4, help="(default: %(default)s)")
    m.add_argument("--d-model", type=int, default=128, help="(default: %(default)s)")
    m.add_argument("--d-ff", type=int, default=512, help="(default: %(default)s)")
    m.add_argument("--dropout", type=float, default=0.1, help="(default: %(default)s)")
    o = parser.add_argument_group("optimizer (Vaswani et al.)")
    o.add_argument(
        "--warmup-steps", type=int, default=1000, help="Transformer schedule warmup (default: %(default)s)"
    )
    o.add_argument(
        "--lr-scale", type=float, default=1.0, help="multiplier on the schedule (default: %(default)s)"
    )
    o.add_argument("--label-smoothing", type=float, default=0.1, help="(default: %(default)s)")
    e = parser.add_argument_group("evaluation")
    e.add_argument(
        "--bleu-pairs",
        type=int,
        default=500,
        help="held-out pairs translated for BLEU (default: %(default)s)",
    )
    e.add_argument("--show", type=int, default=5, help="translations printed (default: %(default)s)")
    e.add_argument("--results", default=None, help="write the results as JSON here")
    add_training_arguments(parser, steps=3000, batch_size=64, steps_per_epoch=500)


def run_seq2seq(args):
    """Trains an encoder–decoder Transformer; reports held-out token accuracy and corpus BLEU-4."""
    t_start = time.perf_counter()
    strategy = _setup(args)
    import tensorflow as tf

    from keras_tfm import models, optimizers
    from keras_tfm.bleu import corpus_bleu
    from keras_tfm.data import WordTokenizer, load_tab_pairs, seq2seq_pairs, split_words

    rows = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in load_tab_pairs(args.data).as_numpy_iterator()]
    if args.reverse:
        rows = [(t, s) for s, t in rows]
    rng = random.Random(args.seed)
    rng.shuffle(rows)
    if args.max_pairs:
        rows = rows[: args.max_pairs]
    n_test = min(args.test_pairs, len(rows) // 10)
    test_rows, train_rows = rows[:n_test], rows[n_test:]
    src_tok = WordTokenizer.from_corpus([s for s, _ in train_rows], max_vocabulary_size=args.vocabulary_size)
    tgt_tok = WordTokenizer.from_corpus([t for _, t in train_rows], max_vocabulary_size=args.vocabulary_size)
    L = args.max_words + 1

    def ids(tokenizer, texts):
        return tokenizer(tf.constant(texts))  # ragged

    def keep_short(rows_):
        s = ids(src_tok, [r[0] for r in rows_])
        t = ids(tgt_tok, [r[1] for r in rows_])
        keep = ((s.row_lengths() <= args.max_words) & (t.row_lengths() <= args.max_words)).numpy()
        return [r for r, k in zip(rows_, keep) if k]

    train_rows, test_rows = keep_short(train_rows), keep_short(test_rows)
    _log(
        f"data: {len(train_rows):,} train / {len(test_rows):,} held-out pairs (<= {args.max_words} words); "
        f"vocabularies {src_tok.vocabulary_size} / {tgt_tok.vocabulary_size}"
    )
    train_src, train_tgt = ids(src_tok, [r[0] for r in train_rows]), ids(tgt_tok, [r[1] for r in train_rows])
    test_src, test_tgt = ids(src_tok, [r[0] for r in test_rows]), ids(tgt_tok, [r[1] for r in test_rows])

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
        return _skip(ds, start_step)

    test_data = seq2seq_pairs(test_src, test_tgt, batch_size=256, cache=True)

    def build():
        model = models.seq2seq(
            source_vocabulary_size=src_tok.vocabulary_size,
            target_vocabulary_size=tgt_tok.vocabulary_size,
            max_length=L + 1,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            d_model=args.d_model,
            d_ff=args.d_ff,
            dropout=args.dropout,
        )
        optimizer = optimizers.vaswani_adam(
            args.d_model,
            warmup_steps=args.warmup_steps * args.grad_accum,
            scale=args.lr_scale / (args.grad_accum**0.5) if args.grad_accum > 1 else args.lr_scale,
            **_optimizer_kwargs(args),
        )
        return models.compile_for_lm(
            model,
            optimizer,
            label_smoothing=args.label_smoothing,
            jit_compile=bool(args.jit_compile),  # padded batches: XLA only on request
            steps_per_execution=args.steps_per_execution,
        )

    result = _train(args, build, data, test_data, None, strategy)
    model = result.model
    metrics = model.evaluate(test_data, verbose=0, return_dict=True)
    token_accuracy = float(metrics["accuracy"])

    # ---- BLEU on held-out pairs, greedy decoding ---------------------------- #
    n_bleu = min(args.bleu_pairs, len(test_rows))
    t_dec = time.perf_counter()
    hyp_ids = _greedy_translate(model, test_src[:n_bleu], L)
    decode_seconds = time.perf_counter() - t_dec
    hyps = [_detok(tgt_tok, row) for row in hyp_ids]
    refs = [split_words(tf.constant([r[1]])).numpy()[0] for r in test_rows[:n_bleu]]
    refs = [[w.decode("utf-8") for w in r] for r in refs]
    bleu = corpus_bleu([h.split() for h in hyps], refs)
    _log(f"held-out token accuracy {token_accuracy:.4f}, loss {metrics['loss']:.4f}")
    _log(
        f"corpus BLEU-4 {100 * bleu['bleu']:.2f} on {n_bleu} held-out pairs "
        f"(precisions {', '.join(f'{100 * p:.1f}' for p in bleu['precisions'])}, BP {bleu['brevity_penalty']:.3f}, "
        f"greedy decoding {decode_seconds:.1f} s)"
    )
    for (src, ref), hyp in list(zip(test_rows, hyps))[: args.show]:
        _log(f"  source:     {src}\n  reference:  {ref}\n  translation: {hyp}")
    total = time.perf_counter() - t_start
    _log(f"wall time: training {result.seconds:.1f} s, total {total:.1f} s")
    results = {
        "steps": result.steps,
        "token_accuracy": token_accuracy,
        "test_loss": float(metrics["loss"]),
        "bleu": bleu["bleu"],
        "bleu_details": bleu,
        "train_seconds": result.seconds,
        "total_seconds": total,
        "examples": [
            {"source": s, "reference": r, "translation": h}
            for (s, r), h in list(zip(test_rows, hyps))[: args.show]
        ],
    }
    _write_results(args, results)
    results["model"] = model
    results["tokenizer"] = (src_tok, tgt_tok)
    return results


def _greedy_translate(model, source_ids, max_new_tokens):
    """Greedy decoding: the cached generator of `keras_tfm.generation` (falls back to full recomputation)."""
    from keras_tfm.data import BOS, EOS

    source = source_ids.to_list() if hasattr(source_ids, "to_list") else source_ids
    try:
        from keras_tfm.generation import generate

        out = generate(model, source, max_new_tokens, sampler="greedy", bos_id=BOS, eos_id=EOS)
    except ImportError:  # pragma: no cover - generation package missing
        from keras_tfm.models import seq2seq_greedy_decode

        width = max(len(s) for s in source)
        padded = [list(s) + [0] * (width - len(s)) for s in source]
        out = seq2seq_greedy_decode(model, padded, BOS, max_new_tokens, eos_id=EOS)
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


# --------------------------------------------------------------------------- #
# Registry
# --------------------------------------------------------------------------- #

TASKS = {
    "gpt": (add_gpt_arguments, run_gpt, "character GPT on Tiny Shakespeare (nanoGPT lab)"),
    "bert": (add_bert_arguments, run_bert, "BERT MLM pretraining + SST-2 classification"),
    "seq2seq": (add_seq2seq_arguments, run_seq2seq, "Transformer translation on tab-separated pairs"),
}


def main_for(task, argv=None, description=None):
    """Entry point of an example script: parse `argv` with the task's options and run it."""
    add_arguments, run, help_text = TASKS[task]
    parser = argparse.ArgumentParser(
        description=description or help_text, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    results = run(args)
    return 0 if results is not None else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_for(sys.argv[1]))
