"""What every recipe does around its model: device/strategy/precision set-up, the training call, logs."""

import json
import os
import sys


def log(*parts):
    print(*parts, flush=True)


def default_verbose():
    """Keras's progress bar (1) on a terminal, one line per epoch (2) otherwise (a piped log)."""
    return 1 if sys.stdout.isatty() else 2


def setup(options):
    """Logical CPU devices, strategy, precision and seed of `options` (a `TrainingOptions`).

    Call before any other TensorFlow op (logical devices cannot be configured later).

    Returns:
        The tf.distribute strategy.
    """
    import keras_tfm_console as console

    with console.quiet_native_logs():  # device start-up lines (e.g. "failed call to cuInit")
        import tensorflow as tf

        if options.cpu_devices > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * options.cpu_devices
            )
        tf.config.list_logical_devices()  # starts the devices here, inside the quiet block
        from keras_tfm import training

        strategy = training.distribution_strategy(options.strategy)
        if options.strategy == "mirrored" and strategy.num_replicas_in_sync == 1 and options.cpu_devices > 1:
            strategy = training.distribution_strategy(
                "mirrored", devices=[f"/cpu:{i}" for i in range(options.cpu_devices)]
            )
    training.set_precision(options.precision)
    import keras

    keras.utils.set_random_seed(options.seed)
    return strategy


def optimizer_kwargs(options):
    return {"gradient_accumulation_steps": options.grad_accum} if options.grad_accum > 1 else {}


def skip(ds, start_step):
    """`ds` resumed at batch `start_step` (unchanged when 0)."""
    return ds.skip(start_step) if start_step else ds


def adamw_decay_schedule(
    options, learning_rate, steps, warmup_steps, min_ratio, weight_decay=0.01, beta_2=0.999
):
    """AdamW with nanoGPT's warmup + cosine schedule over `steps` optimizer steps (BERT's two stages)."""
    from keras_tfm import optimizers, schedules

    warmup_steps = min(warmup_steps, steps - 1)  # a run of a few steps: the decay needs one step at least
    # Keras advances the schedule on every micro-batch when accumulating.
    schedule = schedules.nanogpt_schedule(
        learning_rate,
        steps * options.grad_accum,
        warmup_steps=warmup_steps * options.grad_accum,
        min_ratio=min_ratio,
    )
    return optimizers.adamw(
        schedule, weight_decay=weight_decay, beta_2=beta_2, global_clipnorm=1.0, **optimizer_kwargs(options)
    )


def train(options, model_fn, data, validation_data, strategy, steps=None, eval_interval=None, stage=None):
    """`keras_tfm.training.train` with the recipe's step, backup, log and verbosity options.

    Args:
        options: the recipe's `TrainingOptions`.
        steps, eval_interval: one stage's own (None: the options').
        stage: a stage's name: its backups and logs go to that subfolder of `backup_dir` / `log_dir`.
    """
    from keras_tfm import training

    steps = options.steps if steps is None else steps
    eval_interval = options.eval_interval if eval_interval is None else eval_interval

    def folder(base):
        return os.path.join(base, stage) if base and stage else base

    return training.train(
        model_fn,
        data,
        steps=steps,
        steps_per_epoch=min(eval_interval, steps),
        validation_data=validation_data,
        strategy=strategy,
        log_dir=folder(options.log_dir),
        backup_dir=folder(options.backup_dir),
        save_freq=options.save_freq,
        verbose=default_verbose() if options.verbose is None else options.verbose,
        time_budget=options.time_budget,
        time_budget_clock=options.budget_clock,
    )


def write_results(options, results):
    """`results` as JSON into `options.results` (when set): a temporary name, then a rename."""
    if options.results:
        from keras_tfm.atomic_files import atomic_write_text, write_guard

        with write_guard(options.results):
            atomic_write_text(options.results, json.dumps(results, indent=2))
