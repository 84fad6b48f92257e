"""`model.compile` helpers with the masked token loss and metrics.

    compile_for_lm(model)              GPT / seq2seq / BERT masked-LM / token classifier
    compile_for_classification(model)  BERT sequence classifier

Optimizers can be given as an instance, a Keras name ("adam", "sgd", ...),
"adamw" (`keras_tfm.optimizers.adamw`, no decay on biases/norms/embeddings)
or "vaswani" (`keras_tfm.optimizers.vaswani_adam`, Adam(0.9, 0.98, 1e-9)
with the inverse-square-root warmup schedule; d_model is read from the model).
"""

import keras

from keras_tfm.checks import check_positive_int
from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.metrics import MaskedAccuracy
from keras_tfm.models.base import TransformerModel
from keras_tfm.optimizers import optimizer_by_name, vaswani_adam

DEFAULT_LEARNING_RATE = 5e-4


def _resolve_jit(jit_compile, compile_kwargs=None):
    """XLA unless told otherwise or inside a `tf.distribute` strategy scope.

    XLA is the fast path on CPU, GPU and TPU (`bench/train_speed.py` measures
    the training step). Keras's own "auto" turns XLA off on CPU and under
    `tf.distribute`; this keeps the latter (XLA with MirroredStrategy over
    logical CPU devices fails to run).
    """
    if jit_compile is None or jit_compile == "auto":
        if (compile_kwargs or {}).get("run_eagerly"):
            return False
        if keras.backend.backend() != "tensorflow":
            # jax.jit on JAX; on PyTorch torch.compile costs more start-up than it saves on small models.
            return keras.backend.backend() == "jax"
        import tensorflow as tf

        return not tf.distribute.has_strategy()
    if not isinstance(jit_compile, bool):
        raise TypeError(f"`jit_compile` must be True, False, None or 'auto'; received {jit_compile!r}.")
    return jit_compile


def model_d_model(model):
    """d_model of a keras_tfm model (`GPT`, `Seq2Seq`, `BertEncoder`, ...)."""
    if not isinstance(model, TransformerModel):
        raise ValueError(
            f"optimizer='vaswani' reads d_model from a keras_tfm model (GPT, Seq2Seq, BertEncoder, ...); "
            f"model {model.name!r} is a {type(model).__name__}: pass an optimizer instance, e.g. "
            "`keras_tfm.optimizers.vaswani_adam(d_model)`."
        )
    return model.d_model


def resolve_optimizer(model, optimizer, learning_rate=None, warmup_steps=4000):
    """An optimizer instance from an instance, a name, "adamw" or "vaswani";
    wrapped in a dynamic `keras.optimizers.LossScaleOptimizer` when the model's
    layers compute in float16 (e.g. a builder's `dtype="mixed_float16"`, which
    Keras's own wrapping, keyed on the model's global policy, misses)."""
    optimizer = _optimizer_instance(model, optimizer, learning_rate, warmup_steps)
    float16 = any(getattr(layer, "compute_dtype", None) == "float16" for layer in model.layers)
    if float16 and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer, name="loss_scale_optimizer")
    return optimizer


def _optimizer_instance(model, optimizer, learning_rate, warmup_steps):
    if isinstance(optimizer, keras.optimizers.Optimizer):
        if learning_rate is not None:
            raise ValueError("`learning_rate` cannot be combined with an optimizer instance.")
        return optimizer
    if not isinstance(optimizer, str):
        raise TypeError(f"`optimizer` must be a keras Optimizer or a name; received {optimizer!r}.")
    if optimizer == "vaswani":
        if learning_rate is not None:
            raise ValueError(
                "optimizer='vaswani' uses the Transformer schedule; `learning_rate` cannot be set."
            )
        return vaswani_adam(model_d_model(model), warmup_steps=warmup_steps)
    lr = DEFAULT_LEARNING_RATE if learning_rate is None else learning_rate
    # Checks the name (listing the choices) and the rate (finite, > 0).
    return optimizer_by_name(optimizer, lr)


def compile_for_lm(
    model: keras.Model,
    optimizer: str | keras.optimizers.Optimizer = "adam",
    *,
    learning_rate: float | None = None,
    warmup_steps: int = 4000,
    label_smoothing: float = 0.0,
    ignore_index: int | None = 0,
    metrics: bool | list | None = True,
    jit_compile: bool | str | None = "auto",
    steps_per_execution: int = 1,
    **compile_kwargs,
) -> keras.Model:
    """Compiles a token-prediction model with the masked token loss.

    Loss: `MaskedSparseCategoricalCrossentropy(from_logits=True,
    label_smoothing, ignore_index)`: the mean over tokens whose label is not
    `ignore_index` (id 0 = padding by default), also weighted by
    `sample_weight` (e.g. 1 at BERT's masked positions) and by the Keras mask
    of the logits (seq2seq target padding). Metric: `MaskedAccuracy` as a
    *weighted* metric, so it honours `sample_weight` like the loss.

    Args:
        model: a keras_tfm model with `logits` (B, T, V).
        optimizer: instance or name ("adam" default, "adamw", "vaswani", ...).
        learning_rate: for named optimizers (default 5e-4).
        warmup_steps: for optimizer="vaswani".
        label_smoothing: α in [0, 1) (0.1 in Vaswani et al.).
        ignore_index: label excluded from loss and accuracy; None keeps all
            (GPT-2's id 0 is a real token: use None or a dedicated pad id).
        metrics: True for `MaskedAccuracy`, False for none, or a list.
        jit_compile: XLA-compile the train/eval steps. Default ("auto" or
            None): True, except inside a `tf.distribute` strategy scope. XLA
            compiles once per input shape: feed fixed-length batches (e.g.
            `lm_windows`, a fixed BERT `max_length`), or pass False for
            batches padded to their longest sequence.
        steps_per_execution: batches per compiled call (fewer Python round
            trips; 8-50 suits small models).
        **compile_kwargs: passed on to `model.compile`.

    Returns:
        The model (compiled in place).
    """
    check_positive_int("steps_per_execution", steps_per_execution)
    loss = MaskedSparseCategoricalCrossentropy(
        from_logits=True, label_smoothing=label_smoothing, ignore_index=ignore_index
    )
    if metrics is True:
        metrics = [MaskedAccuracy(ignore_index=ignore_index, name="accuracy")]
    elif metrics is False or metrics is None:
        metrics = []
    model.compile(
        optimizer=resolve_optimizer(model, optimizer, learning_rate, warmup_steps),
        loss=loss,
        weighted_metrics=list(metrics),
        jit_compile=_resolve_jit(jit_compile, compile_kwargs),
        steps_per_execution=steps_per_execution,
        **compile_kwargs,
    )
    return model


def compile_for_classification(
    model: keras.Model,
    optimizer: str | keras.optimizers.Optimizer = "adam",
    *,
    learning_rate: float | None = None,
    warmup_steps: int = 4000,
    label_smoothing: float = 0.0,
    jit_compile: bool | str | None = "auto",
    steps_per_execution: int = 1,
    **compile_kwargs,
) -> keras.Model:
    """Compiles a sequence classifier (`logits` (B, C), integer labels (B,))
    with sparse categorical cross-entropy from logits and accuracy
    (`MaskedSparseCategoricalCrossentropy` without an ignored label when
    `label_smoothing` > 0).

    Args:
        model: a keras_tfm classifier with `logits` (B, C).
        optimizer, learning_rate, warmup_steps, jit_compile,
            steps_per_execution, **compile_kwargs: as in `compile_for_lm`.
        label_smoothing: α in [0, 1).

    Returns:
        The model (compiled in place).
    """
    check_positive_int("steps_per_execution", steps_per_execution)
    if label_smoothing:
        loss = MaskedSparseCategoricalCrossentropy(
            from_logits=True, label_smoothing=label_smoothing, ignore_index=None
        )
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(
        optimizer=resolve_optimizer(model, optimizer, learning_rate, warmup_steps),
        loss=loss,
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=_resolve_jit(jit_compile, compile_kwargs),
        steps_per_execution=steps_per_execution,
        **compile_kwargs,
    )
    return model
