"""What every recipe does around its model: device/strategy/precision set-up, the training call, logs."""

import argparse
import json
import os
import sys

from keras_tfm.recipes._options import UsageError, check_positive_options


def log(*parts):
    print(*parts, flush=True)


def default_verbose():
    """Keras's progress bar (1) on a terminal, one line per epoch (2) otherwise (a piped log)."""
    return 1 if sys.stdout.isatty() else 2


def setup(args):
    """Checks the options, then logical CPU devices, strategy, precision and seed.

    Call before any other TensorFlow op (logical devices cannot be configured later).

    Returns:
        The tf.distribute strategy.
    """
    check_positive_options(args)
    import keras_tfm_console as console

    with console.quiet_native_logs():  # device start-up lines (e.g. "failed call to cuInit")
        import tensorflow as tf

        if getattr(args, "cpu_devices", 0) and args.cpu_devices > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_devices
            )
        tf.config.list_logical_devices()  # starts the devices here, inside the quiet block
        from keras_tfm import training

        strategy = training.distribution_strategy(args.strategy)
        if args.strategy == "mirrored" and strategy.num_replicas_in_sync == 1 and args.cpu_devices > 1:
            strategy = training.distribution_strategy(
                "mirrored", devices=[f"/cpu:{i}" for i in range(args.cpu_devices)]
            )
    training.set_precision(args.precision)
    import keras

    keras.utils.set_random_seed(args.seed)
    return strategy


def optimizer_kwargs(args):
    return {"gradient_accumulation_steps": args.grad_accum} if args.grad_accum > 1 else {}


def skip(ds, start_step):
    """`ds` resumed at batch `start_step` (unchanged when 0)."""
    return ds.skip(start_step) if start_step else ds


def adamw_decay_schedule(
    args, learning_rate, steps, warmup_steps, min_ratio, weight_decay=0.01, beta_2=0.999
):
    """AdamW with nanoGPT's warmup + cosine schedule over `steps` optimizer steps (BERT's two stages)."""
    from keras_tfm import optimizers, schedules

    warmup_steps = min(warmup_steps, steps - 1)  # a run of a few steps: the decay needs one step at least
    # Keras advances the schedule on every micro-batch when accumulating.
    schedule = schedules.nanogpt_schedule(
        learning_rate,
        steps * args.grad_accum,
        warmup_steps=warmup_steps * args.grad_accum,
        min_ratio=min_ratio,
    )
    return optimizers.adamw(
        schedule, weight_decay=weight_decay, beta_2=beta_2, global_clipnorm=1.0, **optimizer_kwargs(args)
    )


def stage_args(args, steps, eval_interval, subfolder):
    """A copy of `args` for one stage of a multi-stage recipe: its own step count and backup/log folders."""
    stage = argparse.Namespace(**vars(args))
    stage.steps, stage.eval_interval = steps, eval_interval
    stage.backup_dir = os.path.join(args.backup_dir, subfolder) if args.backup_dir else None
    stage.log_dir = os.path.join(args.log_dir, subfolder) if args.log_dir else None
    return stage


def train(args, model_fn, data, validation_data, strategy, validation_steps=None):
    """`keras_tfm.training.train` with the recipe's step, backup, log and verbosity options."""
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
        verbose=default_verbose() if args.verbose is None else args.verbose,
        time_budget=getattr(args, "time_budget", None),
        time_budget_clock=getattr(args, "budget_clock", "wall"),
    )


def write_results(args, results):
    if getattr(args, "results", None):
        with open(args.results, "w") as f:
            json.dump(results, f, indent=2)


def check_range(args, name, low, high, low_open=False):
    """`args.name` inside [low, high] ((low, high] with `low_open`), else a UsageError naming the flag."""
    from keras_tfm.checks import check_float
    from keras_tfm.recipes._options import flag

    try:
        check_float(flag(name), getattr(args, name), low=low, high=high, low_open=low_open)
    except (TypeError, ValueError):
        left = "(" if low_open else "["
        raise UsageError(
            flag(name), f"must be in {left}{low}, {high}]; received {getattr(args, name)}"
        ) from None
