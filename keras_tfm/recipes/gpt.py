"""Recipe `gpt`: the character-level GPT on Tiny Shakespeare (nanoGPT's `train_shakespeare_char` CPU run).

    results = train_gpt(data="input.txt", steps=200, output="runs/gpt", export="shakespeare")

`train_gpt` takes the fields of `GPTOptions` as keyword arguments (defaults: nanoGPT's CPU command line)
and returns the results dict (losses, history, sample, times, and the trained `model` and `tokenizer`).
"""

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from keras_tfm.checks import (
    check_choice,
    check_float,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
)
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes.options import TrainingOptions, check_data_source
from keras_tfm.recipes.output import Trained
from keras_tfm.resources import read_text_file

HELP = "character GPT on Tiny Shakespeare (nanoGPT lab)"
METRIC_HELP = "a text file: loss, perplexity"
#: nanoGPT's layout: learned positions, exact GELU (torch nn.GELU), LayerNorm, no biases (bias=False).
NANOGPT_LAYOUT = dict(position="learned", activation="gelu", norm="layer", use_bias=False)
#: `preset` choices: layouts sized for the lab (`keras_tfm.models.presets`).
LAB_PRESETS = ("llama_tiny",)
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "relative")
NORMS = ("layer", "rms")
ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu", "swiglu", "geglu")
SCHEDULES = ("wsd", "cosine")
#: The layout options: None keeps the preset's value, else nanoGPT's (`NANOGPT_LAYOUT`).
LAYOUT_OPTIONS = ("position", "norm", "activation", "num_key_value_heads")


@dataclasses.dataclass(kw_only=True)
class GPTOptions(TrainingOptions):
    """The options of `train_gpt`: `TrainingOptions` with nanoGPT's CPU settings, and these.

    Attributes:
        data: Tiny Shakespeare input.txt (split 90/10 like nanoGPT's prepare.py); None = TFDS
            tiny_shakespeare (downloaded, or read from `manual_dir`).
        manual_dir: folder holding the manual download of TFDS tiny_shakespeare (offline).
        tfds_data_dir: TFDS data_dir (None = ~/tensorflow_datasets).
        max_length: the model's context (characters per training window).
        preset: a layout of `keras_tfm.models.gpt` sized for the lab ("llama_tiny": pre-RMSNorm, SwiGLU,
            RoPE, 2 key/value heads, no biases, untied head); None = nanoGPT's GPT-2 layout.
        position, norm, activation, num_key_value_heads: builder layout arguments; None = the preset's,
            else nanoGPT's (`NANOGPT_LAYOUT`, `num_key_value_heads` = `num_heads`).
        schedule: learning-rate decay after the warmup: "wsd" holds the peak, then decays linearly to
            `min_lr` over the last `decay_fraction` of the run; "cosine" is nanoGPT's cosine decay.
        decay_fraction: wsd: share of the run spent decaying, in (0, 1].
        min_lr: learning-rate floor.
        warmup_steps: linear warmup steps.
        lr_decay_steps: step at which the floor is reached (None = `steps`).
        weight_decay: AdamW decay on the weight matrices.
        beta_2: AdamW's second-moment decay.
        grad_clip: global-norm gradient clip, 0 = off.
        eval_iters: validation batches per evaluation, 0 = the whole split.
        sample_tokens: characters sampled at the end.
        temperature, top_k: the sampling of the final sample.
        learning_rate: peak learning rate.
    """

    data: str | None = None
    manual_dir: str | None = None
    tfds_data_dir: str | None = None
    num_layers: int = 4
    num_heads: int = 4
    d_model: int = 128
    d_ff: int | None = None
    dropout: float = 0.0
    max_length: int = 64
    preset: str | None = None
    position: str | None = None
    norm: str | None = None
    activation: str | None = None
    num_key_value_heads: int | None = None
    schedule: str = "wsd"
    decay_fraction: float = 0.2
    min_lr: float = 1e-4
    warmup_steps: int = 100
    lr_decay_steps: int | None = None
    weight_decay: float = 0.1
    beta_2: float = 0.99
    grad_clip: float = 1.0
    eval_iters: int = 20
    sample_tokens: int = 500
    temperature: float = 0.8
    top_k: int = 200
    steps: int = 2000
    batch_size: int = 12
    eval_interval: int = 250
    learning_rate: float = 1e-3
    steps_per_execution: int = 10

    def __post_init__(self):
        super().__post_init__()
        check_data_source(self)
        check_positive_int("max_length", self.max_length)
        check_positive_int("steps", self.steps)
        for name, choices in (
            ("preset", LAB_PRESETS),
            ("position", POSITIONS),
            ("norm", NORMS),
            ("activation", ACTIVATIONS),
        ):
            if getattr(self, name) is not None:
                check_choice(name, getattr(self, name), choices)
        heads = check_positive_int("num_key_value_heads", self.num_key_value_heads, allow_none=True)
        if heads is not None and self.num_heads % heads:
            raise ValueError(
                f"`num_key_value_heads` must divide `num_heads` ({self.num_heads}); received {heads}."
            )
        check_choice("schedule", self.schedule, SCHEDULES)
        check_float("decay_fraction", self.decay_fraction, low=0.0, high=1.0, low_open=True)
        check_positive_float("learning_rate", self.learning_rate)
        check_float("min_lr", self.min_lr, low=0.0)
        check_non_negative_int("warmup_steps", self.warmup_steps)
        check_positive_int("lr_decay_steps", self.lr_decay_steps, allow_none=True)
        check_float("weight_decay", self.weight_decay, low=0.0)
        check_float("beta_2", self.beta_2, low=0.0, high=1.0, high_open=True)
        check_float("grad_clip", self.grad_clip, low=0.0)
        for name in ("eval_iters", "sample_tokens", "top_k"):
            check_non_negative_int(name, getattr(self, name))
        check_float("temperature", self.temperature, low=0.0)

    def layout(self):
        """Builder keywords of the layout options: the given ones, and nanoGPT's for the others when no
        `preset` is given (a preset keeps its own layout)."""
        given = {name: getattr(self, name) for name in LAYOUT_OPTIONS if getattr(self, name) is not None}
        return given if self.preset is not None else {**NANOGPT_LAYOUT, **given}


def load_shakespeare_text(
    data: str | None = None, manual_dir: str | None = None, tfds_data_dir: str | None = None
) -> tuple[str, str]:
    """(train_text, val_text): nanoGPT's 90/10 split of the file `data`, or TFDS's train/validation splits.

    Raises:
        ValueError / FileNotFoundError naming `data` for an empty, binary or missing file.
    """
    if data:
        text = read_text_file("data", data)
        n = int(len(text) * 0.9)
        return text[:n], text[n:]
    from keras_tfm.data import load_tiny_shakespeare

    def split(name):
        ds = load_tiny_shakespeare(
            name, data_dir=tfds_data_dir, manual_dir=manual_dir, download=manual_dir is None
        )
        return next(iter(ds.as_numpy_iterator())).decode("utf-8")

    return split("train"), split("validation")


def sample_text(
    model: Any,
    prompt_ids: Sequence[int],
    num_tokens: int,
    max_length: int,
    temperature: float = 0.8,
    top_k: int = 200,
    seed: int = 0,
) -> list[int]:
    """Samples `num_tokens` ids after the last `max_length` ids of `prompt_ids`, past the model's context
    if need be: `keras_tfm.generation.generate`, whose window restarts from its last `max_length // 2`
    ids when it is full (`keras_tfm.generation.sliding_window`).

    Returns:
        list of int ids (the new tokens).
    """
    from keras_tfm.generation import generate

    context = list(prompt_ids)[-min(max_length, model.max_length) :]
    if not context:
        raise ValueError("`prompt_ids` must contain at least one id.")
    top_k = min(int(top_k), model.vocabulary_size) if top_k else 0
    # Temperature 0 is the limit of sampling: the most likely token, i.e. greedy decoding.
    sampling = dict(sampler="sample", temperature=temperature, top_k=top_k, seed=seed)
    options = sampling if temperature > 0 else dict(sampler="greedy")
    return generate(model, [context], num_tokens, **options)[0].tolist()


def nanogpt_init(model: Any, num_layers: int, seed: int = 0, layer_norm_bias: bool = False) -> Any:
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


def _schedule(o, decay_steps, warmup_steps):
    from keras_tfm import schedules

    accum = o.grad_accum  # Keras advances the schedule on every micro-batch when accumulating
    min_ratio = o.min_lr / o.learning_rate
    if o.schedule == "cosine":
        return schedules.nanogpt_schedule(
            o.learning_rate, decay_steps * accum, warmup_steps=warmup_steps * accum, min_ratio=min_ratio
        )
    return schedules.WarmupStableDecay(
        o.learning_rate,
        decay_steps * accum,
        warmup_steps=warmup_steps * accum,
        decay_fraction=o.decay_fraction,
        min_ratio=min_ratio,
    )


def _character_ids(o):
    """`(tokenizer, train ids, validation ids)` of the text: a character tokenizer of both splits;
    a split shorter than one window and the character after it is refused, naming `data`."""
    from keras_tfm.tokenizers import CharTokenizer

    train_text, val_text = load_shakespeare_text(o.data, o.manual_dir, o.tfds_data_dir)
    tokenizer = CharTokenizer.from_corpus(train_text + val_text, special_tokens=False)
    train_ids, val_ids = tokenizer(train_text).numpy(), tokenizer(val_text).numpy()
    runtime.log(
        f"data: {len(train_ids):,} train / {len(val_ids):,} val characters, vocabulary {tokenizer.vocabulary_size}"
    )
    for split, ids in (("training", train_ids), ("validation", val_ids)):
        if len(ids) <= o.max_length:  # a window is max_length characters and the one after it
            raise ValueError(
                f"`data`: its {split} split has {len(ids):,} characters, fewer than `max_length` + 1 = "
                f"{o.max_length + 1} (one window and the character after it); give more text or a smaller "
                "`max_length`."
            )
    return tokenizer, train_ids, val_ids


def _builder(o, vocab, decay_steps, warmup_steps):
    """The model factory of `runtime.train`: the GPT with nanoGPT's initialisation, compiled with
    AdamW on the lab's schedule and the causal LM loss over every character."""
    from keras_tfm import models, optimizers, training

    def build():
        model = models.gpt(
            o.preset, vocabulary_size=vocab, max_length=o.max_length, **o.model_sizes(), **o.layout()
        )
        nanogpt_init(model, o.num_layers, seed=o.seed)
        optimizer = optimizers.adamw(
            _schedule(o, decay_steps, warmup_steps),
            weight_decay=o.weight_decay,
            beta_1=0.9,
            beta_2=o.beta_2,
            # nanoGPT decays every ≥2-D parameter, embeddings included.
            no_decay_names=("bias", "gamma", "beta", "scale"),
            global_clipnorm=o.grad_clip or None,
            **runtime.optimizer_kwargs(o),
        )
        return training.compile_for_lm(
            model,
            optimizer,
            ignore_index=None,  # id 0 is a real character here
            jit_compile=o.jit_compile,
            steps_per_execution=o.steps_per_execution,
        )

    return build


def _sample(o, model, tokenizer):
    """`sample_tokens` characters generated after a newline, logged and returned."""
    import tensorflow as tf

    newline = tokenizer.token_to_id("\n")
    ids = sample_text(model, [newline], o.sample_tokens, o.max_length, o.temperature, o.top_k, o.seed)
    sample = tokenizer.detokenize(tf.constant([ids], tf.int32)).numpy()[0].decode("utf-8")
    runtime.log("---------- sample ----------")
    runtime.log(sample)
    runtime.log("----------------------------")
    return sample


def train_gpt(**options: Any) -> dict[str, Any]:
    """Trains the character GPT; prints the validation loss every `eval_interval` steps, a sample and the
    wall time.

    Args:
        **options: the fields of `GPTOptions` (nanoGPT's CPU settings by default).

    Returns:
        dict: "steps", "val_loss" (whole validation split), "val_loss_eval_batches", "history",
        "parameters", "sample", the times ("train_seconds", "total_seconds"), "output_path" /
        "export_path" when written, and the trained "model" and its "tokenizer".

    Raises:
        ValueError / TypeError / FileNotFoundError naming the option, before any training.
    """
    t_start = time.perf_counter()
    o = GPTOptions(**options)
    output_lib.check_output_options(o)
    strategy = runtime.setup(o)
    from keras_tfm.data import lm_windows

    tokenizer, train_ids, val_ids = _character_ids(o)

    T, B = o.max_length, o.batch_size
    train_windows = lm_windows(train_ids, T, B, random_offsets=True, seed=o.seed)

    def data(start_step):  # batch i depends only on (seed, i): exact resumption
        return runtime.skip(train_windows, start_step)

    if o.eval_iters > 0:  # nanoGPT: `eval_iters` random batches (fixed here, so evaluations compare)
        val_data = lm_windows(val_ids, T, B, random_offsets=True, seed=o.seed + 1).take(o.eval_iters).cache()
    else:
        val_data = lm_windows(val_ids, T, B, random_offsets=False, shuffle=False).cache()

    decay_steps = o.lr_decay_steps or o.steps
    warmup_steps = o.warmup_steps if o.warmup_steps < decay_steps else decay_steps // 10

    build = _builder(o, tokenizer.vocabulary_size, decay_steps, warmup_steps)
    result = runtime.train(o, build, data, val_data, strategy)
    model = result.model
    model.tokenizer = tokenizer  # saved in the .keras file: `model.generate("text")` after loading
    final_val = float(model.evaluate(val_data, verbose=0, return_dict=True)["loss"])
    full_val_loss = validation_loss(model, val_ids, T)
    train_seconds = result.seconds
    windows = (len(val_ids) - 1) // T
    runtime.log(
        f"step {result.steps}: validation loss {full_val_loss:.4f} (whole split, {windows:,} windows of {T}); "
        f"{final_val:.4f} on the {o.eval_iters or 'all'} evaluation batches (nanoGPT's estimate)"
    )
    sample = _sample(o, model, tokenizer) if o.sample_tokens > 0 else ""
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
    written = output_lib.save_trained(o, "gpt", model, {"tokenizer": tokenizer}, results, log=runtime.log)
    results.update({f"{key}_path": path for key, path in written.items()})
    results["total_seconds"] = total = time.perf_counter() - t_start
    runtime.log(f"wall time: training {train_seconds:.1f} s, total {total:.1f} s")
    runtime.write_results(o, results)
    results["model"] = model
    results["tokenizer"] = tokenizer
    return results


def validation_loss(model, ids, max_length):
    """Mean next-character loss over the non-overlapping windows of `max_length` of `ids` (a whole split)."""
    from keras_tfm.data import lm_windows

    windows = lm_windows(ids, max_length, 64, random_offsets=False, shuffle=False)
    return float(model.evaluate(windows, verbose=0, return_dict=True)["loss"])


def evaluate_gpt(trained: Trained, data: str) -> dict[str, float]:
    """The loss (and perplexity) of a trained GPT (`output.load_trained`) on the text file `data`.

    Returns:
        {"loss", "perplexity", "characters"}.
    """
    import math

    import tensorflow as tf

    from keras_tfm import training

    tokenizer = trained.tokenizers.get("tokenizer")
    if tokenizer is None:
        raise ValueError(f"`model`: no {output_lib.TOKENIZER_FILES['tokenizer']} beside the model.")
    text = read_text_file("data", data)
    try:
        ids = tokenizer(text).numpy()
    except tf.errors.InvalidArgumentError:
        raise ValueError("`data` holds characters that are not in the model's vocabulary.") from None
    max_length = int(trained.model.max_length)
    if len(ids) <= max_length:
        raise ValueError(f"`data` needs more than {max_length} characters (one context window).")
    training.compile_for_lm(trained.model, "adam", ignore_index=None, jit_compile=False)
    loss = validation_loss(trained.model, ids, max_length)
    return {"loss": loss, "perplexity": math.exp(min(loss, 700.0)), "characters": int(len(ids))}
