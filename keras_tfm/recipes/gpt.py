"""Recipe `gpt`: the character-level GPT on Tiny Shakespeare (nanoGPT's `train_shakespeare_char` CPU run)."""

import time

from keras_tfm.checks import positive_int_arg
from keras_tfm.recipes import _options as options
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes._options import UsageError

HELP = "character GPT on Tiny Shakespeare (nanoGPT lab)"
#: nanoGPT's layout: learned positions, exact GELU (torch nn.GELU), LayerNorm, no biases (bias=False).
NANOGPT_LAYOUT = dict(position="learned", activation="gelu", norm="layer", use_bias=False)
#: `--preset` choices: layouts sized for the lab (`keras_tfm.models.presets`).
LAB_PRESETS = ("llama_tiny",)


def add_gpt_arguments(parser):
    """nanoGPT `train_shakespeare_char.py` with its CPU command-line overrides as defaults."""
    options.add_data_arguments(
        parser, "Tiny Shakespeare input.txt (split 90/10 like nanoGPT's prepare.py)", tfds="tiny_shakespeare"
    )
    m = options.add_model_arguments(
        parser,
        num_layers=4,
        num_heads=4,
        d_model=128,
        d_ff=None,
        dropout=0.0,
        title="model (nanoGPT CPU settings)",
    )
    m.add_argument(
        "--block-size", type=positive_int_arg, default=64, help=options.default_text("context length")
    )
    m.add_argument(
        "--preset",
        choices=LAB_PRESETS,
        default=None,
        help="a model layout of `keras_tfm.models.gpt`: llama_tiny = pre-RMSNorm, SwiGLU, RoPE, 2 key/value "
        "heads, no biases, untied head, at the lab model's parameter count (default: nanoGPT's GPT-2 layout)",
    )
    options.add_layout_arguments(m, NANOGPT_LAYOUT)
    options.add_alias(parser, "--n-layer", "--num-layers", "num_layers", int)
    options.add_alias(parser, "--n-head", "--num-heads", "num_heads", int)
    options.add_alias(parser, "--n-embd", "--d-model", "d_model", int)
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
        help=options.default_text("wsd: share of the run spent decaying"),
    )
    o.add_argument("--min-lr", type=float, default=1e-4, help=options.default_text("learning-rate floor"))
    o.add_argument("--warmup-steps", type=int, default=100, help=options.default_text("linear warmup"))
    o.add_argument(
        "--lr-decay-steps",
        type=int,
        default=None,
        help="step at which the floor is reached (default: --steps)",
    )
    o.add_argument(
        "--weight-decay", type=float, default=0.1, help=options.default_text("AdamW decay on weight matrices")
    )
    o.add_argument("--beta2", type=float, default=0.99, help=options.default_text(""))
    o.add_argument(
        "--grad-clip", type=float, default=1.0, help=options.default_text("global norm clip, 0 = off")
    )
    e = parser.add_argument_group("evaluation and sampling")
    e.add_argument(
        "--eval-iters",
        type=int,
        default=20,
        help=options.default_text("val batches per evaluation, 0 = whole split"),
    )
    e.add_argument(
        "--sample-tokens", type=int, default=500, help=options.default_text("characters sampled at the end")
    )
    e.add_argument("--temperature", type=float, default=0.8, help=options.default_text(""))
    e.add_argument("--top-k", type=int, default=200, help=options.default_text(""))
    options.add_output_arguments(parser)
    options.add_training_arguments(
        parser, steps=2000, batch_size=12, steps_per_epoch=250, learning_rate=1e-3, steps_per_execution=10
    )


def load_shakespeare_text(args):
    """(train_text, val_text): nanoGPT's 90/10 split of a file, or TFDS's train/validation splits."""
    if args.data:
        from keras_tfm.checks import read_text_file

        try:
            text = read_text_file("--data", args.data)
        except (OSError, ValueError) as error:
            raise UsageError("--data", str(error)) from None
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
    """Samples `num_tokens` ids after the last `block_size` ids of `prompt_ids`, past the model's context
    if need be: `keras_tfm.generation.generate`, whose window restarts from its last `max_length // 2`
    ids when it is full (`keras_tfm.generation.sliding_window`).

    Returns:
        list of int ids (the new tokens).
    """
    from keras_tfm.generation import generate

    context = list(prompt_ids)[-min(block_size, model.max_length) :]
    if not context:
        raise ValueError("`prompt_ids` must contain at least one id.")
    top_k = min(int(top_k), model.vocabulary_size) if top_k else 0
    sampler = "sample" if temperature > 0 else "greedy"
    return generate(
        model, [context], num_tokens, sampler=sampler, temperature=temperature, top_k=top_k, seed=seed
    )[0].tolist()


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
    norms = [model.final_norm] if model.final_norm is not None else []
    for block in model.blocks:
        for projection in (block.self_attention_layer.output_dense, block.feed_forward.output_dense):
            kernel = projection.kernel
            kernel.assign(rng.normal(0.0, std, tuple(kernel.shape)).astype(kernel.dtype))
        norms += [block.self_attention_norm, block.feed_forward_norm]
    if not layer_norm_bias:
        for norm in norms:
            if getattr(norm, "beta", None) is not None:  # LayerNorm (RMSNorm has no offset)
                norm.beta.trainable = False
    return model


def _schedule(args, decay_steps, warmup_steps):
    from keras_tfm import schedules

    accum = args.grad_accum  # Keras advances the schedule on every micro-batch when accumulating
    min_ratio = args.min_lr / args.learning_rate
    if args.schedule == "cosine":
        return schedules.nanogpt_schedule(
            args.learning_rate, decay_steps * accum, warmup_steps=warmup_steps * accum, min_ratio=min_ratio
        )
    return schedules.WarmupStableDecay(
        args.learning_rate,
        decay_steps * accum,
        warmup_steps=warmup_steps * accum,
        decay_fraction=args.decay_fraction,
        min_ratio=min_ratio,
    )


def run_gpt(args):
    """Trains the character GPT; prints val loss every `--eval-interval` steps, a sample and the wall time."""
    t_start = time.perf_counter()
    runtime.check_range(args, "decay_fraction", 0.0, 1.0, low_open=True)
    output_lib.check_output_arguments(args)
    strategy = runtime.setup(args)
    import tensorflow as tf

    from keras_tfm import models, optimizers, training
    from keras_tfm.data import lm_windows
    from keras_tfm.tokenizers import CharTokenizer

    train_text, val_text = load_shakespeare_text(args)
    tokenizer = CharTokenizer.from_corpus(train_text + val_text, special_tokens=False)
    vocab = tokenizer.vocabulary_size
    train_ids = tokenizer(train_text).numpy()
    val_ids = tokenizer(val_text).numpy()
    runtime.log(f"data: {len(train_ids):,} train / {len(val_ids):,} val characters, vocabulary {vocab}")

    T, B = args.block_size, args.batch_size
    train_windows = lm_windows(train_ids, T, B, random_offsets=True, seed=args.seed)

    def data(start_step):  # batch i depends only on (seed, i): exact resumption
        return runtime.skip(train_windows, start_step)

    if args.eval_iters > 0:  # nanoGPT: `eval_iters` random batches (fixed here, so evaluations compare)
        val_data = (
            lm_windows(val_ids, T, B, random_offsets=True, seed=args.seed + 1).take(args.eval_iters).cache()
        )
    else:
        val_data = lm_windows(val_ids, T, B, random_offsets=False, shuffle=False).cache()

    decay_steps = args.lr_decay_steps or args.steps
    warmup_steps = args.warmup_steps if args.warmup_steps < decay_steps else decay_steps // 10

    def build():
        model = models.gpt(
            args.preset,
            vocabulary_size=vocab,
            max_length=T,
            **options.model_sizes(args),
            **options.layout_options(args, NANOGPT_LAYOUT),
        )
        nanogpt_init(model, args.num_layers, seed=args.seed)
        optimizer = optimizers.adamw(
            _schedule(args, decay_steps, warmup_steps),
            weight_decay=args.weight_decay,
            beta_1=0.9,
            beta_2=args.beta2,
            # nanoGPT decays every ≥2-D parameter, embeddings included.
            no_decay_names=("bias", "gamma", "beta", "scale"),
            global_clipnorm=args.grad_clip or None,
            **runtime.optimizer_kwargs(args),
        )
        return training.compile_for_lm(
            model,
            optimizer,
            ignore_index=None,  # id 0 is a real character here
            jit_compile=args.jit_compile,
            steps_per_execution=args.steps_per_execution,
        )

    result = runtime.train(args, build, data, val_data, strategy)
    model = result.model
    final_val = float(model.evaluate(val_data, verbose=0, return_dict=True)["loss"])
    full_val_loss = validation_loss(model, val_ids, T)
    train_seconds = result.seconds
    windows = (len(val_ids) - 1) // T
    runtime.log(
        f"step {result.steps}: validation loss {full_val_loss:.4f} (whole split, {windows:,} windows of {T}); "
        f"{final_val:.4f} on the {args.eval_iters or 'all'} evaluation batches (nanoGPT's estimate)"
    )
    sample = ""
    if args.sample_tokens > 0:
        newline = tokenizer.token_to_id("\n")
        ids = sample_text(model, [newline], args.sample_tokens, T, args.temperature, args.top_k, args.seed)
        sample = tokenizer.detokenize(tf.constant([ids], tf.int32)).numpy()[0].decode("utf-8")
        runtime.log("---------- sample ----------")
        runtime.log(sample)
        runtime.log("----------------------------")
    results = {
        "steps": result.steps,
        "val_loss": full_val_loss,
        "val_loss_whole_split": full_val_loss,
        "val_loss_eval_batches": final_val,
        "history": result.history,
        "train_seconds": train_seconds,
        "parameters": int(model.count_params()),
        "sample": sample,
    }
    written = output_lib.save_trained(args, "gpt", model, {"tokenizer": tokenizer}, results, log=runtime.log)
    results.update({f"{key}_path": path for key, path in written.items()})
    results["total_seconds"] = total = time.perf_counter() - t_start
    runtime.log(f"wall time: training {train_seconds:.1f} s, total {total:.1f} s")
    runtime.write_results(args, results)
    results["model"] = model
    results["tokenizer"] = tokenizer
    return results


def validation_loss(model, ids, block_size):
    """Mean next-character loss over the non-overlapping windows of `ids` (the whole split)."""
    from keras_tfm.data import lm_windows

    windows = lm_windows(ids, block_size, 64, random_offsets=False, shuffle=False)
    return float(model.evaluate(windows, verbose=0, return_dict=True)["loss"])


def evaluate_gpt(trained, args):
    """`keras-tfm evaluate` for a GPT output: the loss (and perplexity) on the text file `--data`."""
    import math

    import tensorflow as tf

    from keras_tfm import training
    from keras_tfm.checks import read_text_file

    tokenizer = trained.tokenizers.get("tokenizer")
    if tokenizer is None:
        raise UsageError("--model", f"no {output_lib.TOKENIZER_FILES['tokenizer']} beside the model")
    try:
        text = read_text_file("--data", args.data)
    except (OSError, ValueError) as error:
        raise UsageError("--data", str(error)) from None
    try:
        ids = tokenizer(text).numpy()
    except tf.errors.InvalidArgumentError:
        raise UsageError("--data", "holds characters that are not in the model's vocabulary") from None
    block_size = int(getattr(trained.model, "max_length", None) or trained.info["arguments"]["block_size"])
    if len(ids) <= block_size:
        raise UsageError("--data", f"needs more than {block_size} characters (one context window)")
    training.compile_for_lm(trained.model, "adam", ignore_index=None, jit_compile=False)
    loss = validation_loss(trained.model, ids, block_size)
    return {"loss": loss, "perplexity": math.exp(min(loss, 700.0)), "characters": int(len(ids))}
