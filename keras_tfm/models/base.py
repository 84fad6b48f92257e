"""`TransformerModel`: the base class of the model classes (`GPT`, `BertEncoder`, ...).

KerasHub's Backbone idea: a model is a *functional* `keras.Model` subclass.
Its constructor takes the hyperparameters as named arguments, checks them,
creates the layers, keeps them as attributes (`token_embedding`, `blocks`,
`final_norm`, `head`, ...), wires them into a functional graph and hands the
graph to `keras.Model.__init__`. So a model is at the same time

* a plain functional model: `fit`, `predict`, mixed precision, XLA,
  distribution strategies, `clone_model` and `.keras` saving work unchanged;
  the layers and their names are those of the graph;
* an object: other packages (generation, export, inspection, checkpoint
  mappings) use its attributes and methods, never layer names.

`get_config()` returns the constructor arguments (`config` is the same dict
without `name`/`trainable`); `from_config(config)` calls the constructor, so a
`.keras` file stores the hyperparameters and the weights.

`enable_lora(rank)` / `merge_lora()` (see `keras_tfm.models.lora`) work on
every model class; the LoRA options are saved with the config, and so are the
quantized layers and their modes (`quantized_layers()`), which `from_config`
quantizes again so that a `.keras` file's codes and scales load.

A model may carry its tokenizer (`model.tokenizer`: set by `from_pretrained`,
`from_preset`, the recipes and the CLI, or assigned by the user; a seq2seq
model may carry a `(source, target)` pair). It is saved in the config, so a
`.keras` file gives back a model that takes text: the text methods
(`generate("prompt")`, `predict(["text"])`, `embed`, `fill_mask`, ...) are
defined on the classes and reach their work by imports (`keras_tfm.generation.text`,
`keras_tfm.models.bert_text`).

`ModelClass.from_preset(name_or_dir, **options)` (KerasHub's constructor) takes a built-in
preset name (`list_presets`: an untrained model of that size, built from the class's preset
family), a HuggingFace-layout checkpoint directory or an `"hf://org/name"` hub name (loaded by
`keras_tfm.checkpoints` with the class's checkpoint task, tokenizer attached).
"""

import contextvars

import keras

from keras_tfm.checks import check_cache_dtype
from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.metrics import MaskedAccuracy
from keras_tfm.models import layout, lora
from keras_tfm.models.loading import PresetLoading
from keras_tfm.optimizers import adamw
from keras_tfm.schedules import LinearWarmup

#: The default optimizer's rate (the lecture's fine-tuning recipe: AdamW at 2e-5) and warmup.
DEFAULT_LEARNING_RATE = 2e-5
DEFAULT_WARMUP_STEPS = 100

#: True while `TransformerModel.from_config` builds a model (its constructor skips the default
#: compile; the saved compile config, if any, is applied by Keras afterwards).
_FROM_CONFIG = contextvars.ContextVar("keras_tfm_from_config", default=False)


def _check_tokenizer_like(name, tokenizer):
    """A keras_tfm tokenizer: a Keras layer with `tokenize`, `detokenize` and `vocabulary_size`."""
    if not (
        isinstance(tokenizer, keras.layers.Layer)
        and callable(getattr(tokenizer, "tokenize", None))
        and callable(getattr(tokenizer, "detokenize", None))
        and isinstance(getattr(tokenizer, "vocabulary_size", None), int)
    ):
        raise TypeError(
            f"`{name}` must be a keras_tfm tokenizer (a Keras layer with tokenize, detokenize and "
            f"vocabulary_size) or None; received {type(tokenizer).__name__}."
        )
    return tokenizer


def check_tokenizer_fits(name, tokenizer, vocabulary_size):
    """`tokenizer` is a keras_tfm tokenizer whose ids lie in a vocabulary of `vocabulary_size`
    (None: not checked); returns it."""
    _check_tokenizer_like(name, tokenizer)
    if vocabulary_size is not None and tokenizer.vocabulary_size > vocabulary_size:
        raise ValueError(
            f"`{name}` has {tokenizer.vocabulary_size} ids but the model's vocabulary only "
            f"{vocabulary_size}; attach the tokenizer the model was trained with."
        )
    return tokenizer


def _serialize_tokenizer(tokenizer):
    if isinstance(tokenizer, tuple):
        return {"source": _serialize_tokenizer(tokenizer[0]), "target": _serialize_tokenizer(tokenizer[1])}
    return keras.saving.serialize_keras_object(tokenizer)


def _deserialize_tokenizer(config):
    if set(config) == {"source", "target"}:
        return (_deserialize_tokenizer(config["source"]), _deserialize_tokenizer(config["target"]))
    import keras_tfm.tokenizers  # noqa: F401 (registers the tokenizer classes; TensorFlow ops)

    return keras.saving.deserialize_keras_object(config)


def _plain(value):
    """`value` with Keras's tracked containers (TrackedDict, TrackedList) made plain dicts and lists."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def serialize_option(value):
    """A JSON-friendly form of an initializer / dtype policy argument."""
    if value is None or isinstance(value, (str, int, float, bool, dict, list, tuple)):
        return value
    if isinstance(value, keras.initializers.Initializer):
        return keras.initializers.serialize(value)
    if isinstance(value, keras.DTypePolicy):
        return keras.dtype_policies.serialize(value)
    return keras.saving.serialize_keras_object(value)


class TransformerModel(PresetLoading, keras.Model):
    """Base of the keras_tfm model classes: stores the constructor arguments.

    Subclasses call `self._init_model(inputs, outputs, name, config)` once
    their layers are created and wired (as local variables), with `config` the
    dict of their constructor arguments (checked values, each by name), and
    assign their layer attributes after it.

    `from_preset` (`keras_tfm.models.loading.PresetLoading`) reads two class attributes:
    `preset_family` and `checkpoint_task`.
    """

    #: The sizes `get_layout_map` checks (`layout.model_sizes`); set by `_init_model`.
    _layout_sizes = None

    def _init_model(self, inputs, outputs, name, config, layout_sizes=None, **kwargs):
        """`keras.Model.__init__` on the functional graph `inputs` → `outputs`;
        stores `config` (the constructor arguments) for `get_config` and `layout_sizes`
        (the dict the constructor gave `layout.bind_sizes`) for `get_layout_map`."""
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self._model_config = {key: serialize_option(value) for key, value in config.items()}
        object.__setattr__(self, "_layout_sizes", layout_sizes)

    def _set_parts(self, sizes: dict, **parts) -> None:
        """Sets the model's size attributes (`ModelOptions.sizes`) and its parts (layers, lists
        of layers), after `_init_model`."""
        for name, value in {**sizes, **parts}.items():
            setattr(self, name, value)

    # ------------------------------------------------------- model parallel
    @layout.class_or_instance_method
    def get_layout_map(
        model_or_class,
        device_mesh,
        model_parallel_dim_name: str = "model",
        data_parallel_dim_name: str = "batch",
        fully_sharded: bool = False,
    ) -> "keras.distribution.LayoutMap":
        """A `keras.distribution.LayoutMap` for `keras.distribution.ModelParallel` (JAX).

        Megatron-style tensor parallelism along `model_parallel_dim_name`: token embedding,
        attention projections (GQA key/value heads included), FFN (gated too) and output
        head split, norms replicated, biases split to match (`keras_tfm.models.layout`). A
        dimension the axis does not divide is replicated, with a warning naming the variable.
        Callable on the class (the map checks the sizes of the keras_tfm model constructed
        under the distribution) or on a model (its sizes):

            mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"), devices)
            distribution = keras.distribution.ModelParallel(
                layout_map=GPT.get_layout_map(mesh), batch_dim_name="batch")
            with distribution.scope():
                model = gpt("llama_tiny")      # each variable created in its layout

        Args:
            device_mesh: a `keras.distribution.DeviceMesh` with both axes.
            model_parallel_dim_name: the mesh axis the weights are split along.
            data_parallel_dim_name: the mesh axis the batch is split along.
            fully_sharded: also split each weight's d_model dimension along the data axis
                (FSDP / ZeRO-3 on top of the tensor parallelism).

        Returns:
            A `keras_tfm.models.layout.TransformerLayoutMap`.

        Raises:
            TypeError: `device_mesh` is not a DeviceMesh, `fully_sharded` not a bool.
            ValueError: an axis name that is not in the mesh, or both names equal.
        """
        sizes = None if isinstance(model_or_class, type) else model_or_class._layout_sizes
        return layout.layout_map(
            sizes, device_mesh, model_parallel_dim_name, data_parallel_dim_name, fully_sharded
        )

    # --------------------------------------------------------------- compile
    def compile(self, optimizer: object = "auto", loss: object = "auto", **kwargs) -> None:
        """Keras's `compile`, with this task's defaults for "auto" (KerasHub's convention).

        The task models (`GPT`, `Seq2Seq`, `BertMaskedLM`, `BertClassifier`,
        `BertTokenClassifier`, `ViT`) compile themselves with these defaults when built, so
        `Class.from_preset(...).fit(...)` trains at once; a user's own `compile` replaces them.

        * `optimizer="auto"`: the lecture's fine-tuning recipe, AdamW (`keras_tfm.optimizers.adamw`:
          no decay on biases, norms and embeddings) at `DEFAULT_LEARNING_RATE` (2e-5) with a
          linear warmup over `DEFAULT_WARMUP_STEPS` (`keras_tfm.schedules.LinearWarmup`).
        * `loss="auto"` (and `weighted_metrics="auto"`, `metrics="auto"`): the task's
          (`_default_loss`): the causal or masked LM loss (`MaskedSparseCategoricalCrossentropy`
          from logits) with `MaskedAccuracy`, or sparse cross-entropy with accuracy for a
          classifier; none for the encoders.

        Args:
            optimizer: "auto", a Keras optimizer or name.
            loss: "auto", a Keras loss or name.
            **kwargs: Keras's `compile` arguments (`metrics`, `weighted_metrics`,
                `jit_compile`, `steps_per_execution`, ...).
        """
        loss_default, metrics_default, weighted = self._default_loss()
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = adamw(LinearWarmup(DEFAULT_LEARNING_RATE, DEFAULT_WARMUP_STEPS))
        if isinstance(loss, str) and loss == "auto":
            loss = loss_default
        for key, default in (
            ("metrics", None if weighted else metrics_default),
            ("weighted_metrics", metrics_default if weighted else None),
        ):
            if isinstance(kwargs.get(key, "auto"), str) and kwargs.get(key, "auto") == "auto":
                kwargs[key] = default
        super().compile(optimizer=optimizer, loss=loss, **kwargs)

    def compile_from_config(self, config: dict) -> None:
        """Recompiles a loaded model from its saved compile config (Keras skips this step for
        a model whose `compile` is overridden), then builds the optimizer so that its saved
        state (iterations, moments) loads into it."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    def _compile_defaults(self) -> None:
        """A task's constructor compiles it with `compile()`'s defaults, except when the model is
        rebuilt by `from_config` (loading, cloning): there the saved compile config decides, as
        for any Keras model (`load_model(..., compile=False)` gives an uncompiled model)."""
        if not _FROM_CONFIG.get():
            self.compile()

    def _default_loss(self) -> tuple:
        """`(loss, metrics, weighted)` of `compile("auto")`: none for a model without a task;
        `weighted` puts the metrics in `weighted_metrics` (they honour `sample_weight`)."""
        return None, None, False

    # ------------------------------------------------------------- tokenizer
    #: The model's tokenizer (None until one is attached); saved with the model. Assigning it
    #: checks that its ids fit the model's vocabulary (`_check_tokenizer`).
    tokenizer = None

    #: How a decoder generates by default (`keras_tfm.generation.beam_styles`): None, or a dict of
    #: `length_penalty_style`, `length_penalty`, `early_stopping` and `eos_id` (`from_preset` of a
    #: HuggingFace checkpoint sets it). Saved with the model, as plain JSON types.
    generation_defaults = None

    #: Key/value cache dtype of a decoder's `init_caches`: None (the compute dtype), "float32",
    #: "float16" or "bfloat16" (`model.cache_dtype = "bfloat16"` decodes with a half-size
    #: cache); assigning any other value raises a ValueError. A runtime setting, not saved.
    cache_dtype = None

    def __setattr__(self, name, value):
        if name == "cache_dtype":
            value = check_cache_dtype("cache_dtype", value)
        if name == "tokenizer":
            if value is not None:
                value = self._check_tokenizer(value)
            # Not tracked: Keras would make the tokenizer (a Keras layer) a sublayer with a place in
            # `model.layers`, PyTorch a submodule; the config saves it.
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)

    def _check_tokenizer(self, tokenizer):
        """Checks a tokenizer to attach: a keras_tfm tokenizer whose ids fit the model's
        vocabulary. Returns it (a subclass may accept more, e.g. a seq2seq pair)."""
        return check_tokenizer_fits("tokenizer", tokenizer, getattr(self, "vocabulary_size", None))

    def require_tokenizer(self, method: str):
        """The attached tokenizer, or a ValueError saying that `method` on text needs one."""
        if self.tokenizer is None:
            raise ValueError(
                f"`{method}` was given text but the model has no tokenizer: set `model.tokenizer = "
                "tokenizer` (or load the model with `from_pretrained` / `from_preset`, which attach it), "
                "or pass token ids."
            )
        return self.tokenizer

    @property
    def config(self) -> dict:
        """The constructor arguments (hyperparameters) as a new dict."""
        return dict(self._model_config)

    def get_config(self) -> dict:
        config = {"name": self.name, "trainable": self.trainable, **self.config}
        if getattr(self, "_lora", None):
            config["lora"] = dict(self._lora)
        quantized = self.quantized_layers()
        if quantized:
            config["quantized"] = quantized
        if self.tokenizer is not None:
            config["tokenizer"] = _serialize_tokenizer(self.tokenizer)
        if self.generation_defaults is not None:
            config["generation_defaults"] = _plain(self.generation_defaults)
        return config

    @classmethod
    def from_config(cls, config: dict, custom_objects=None) -> "TransformerModel":
        config = dict(config)
        lora = config.pop("lora", None)
        quantized = config.pop("quantized", None)
        tokenizer = config.pop("tokenizer", None)
        generation_defaults = config.pop("generation_defaults", None)
        token = _FROM_CONFIG.set(True)
        try:
            model = cls(**config)
        finally:
            _FROM_CONFIG.reset(token)
        if tokenizer is not None:
            model.tokenizer = _deserialize_tokenizer(tokenizer)
        if generation_defaults is not None:
            model.generation_defaults = _plain(generation_defaults)
        if lora:
            model.enable_lora(**lora)
        if quantized:
            model._quantize_layers(quantized)
        return model

    # ---------------------------------------------------------- quantization
    def quantized_layers(self) -> dict:
        """{layer path: quantization mode} of the quantized sublayers ({} for a float model)."""
        return {
            layer.path: layer.quantization_mode
            for layer in self._flatten_layers(include_self=False)
            if getattr(layer, "quantization_mode", None) is not None
        }

    def _quantize_layers(self, modes):
        """Quantizes the layers named in `modes` ({path: mode}, from `quantized_layers`), so a
        `.keras` file's quantized weights (codes and scales) load into quantized variables."""
        layers = {layer.path: layer for layer in self._flatten_layers(include_self=False)}
        unknown = sorted(set(modes) - set(layers))
        if unknown:
            raise ValueError(f"The config names quantized layers this model does not have: {unknown}.")
        for path, mode in modes.items():
            layers[path].quantize(mode)

    # ------------------------------------------------------------------ LoRA
    def enable_lora(self, rank: int, target=lora.DEFAULT_TARGET, alpha: float | None = None) -> None:
        """Low-rank adaptation: `W → W + (α/r)·A·B` on the `target` projections
        (Keras's `layer.enable_lora`), every other weight frozen.

        Args:
            rank: LoRA rank (positive int).
            target: projection names: "query", "key", "value",
                "attention_output", "ffn_inner", "ffn_gate", "ffn_output".
            alpha: scale numerator (default `rank`).

        Raises:
            ValueError: bad rank/target, or LoRA already enabled.
        """
        self._lora = lora.enable_lora(self, rank, target, alpha)
        self.lora_weights = lora.LoraWeights(
            lora.target_layers(self, self._lora["target"]), name="lora_weights"
        )

    def merge_lora(self) -> None:
        """Folds the LoRA updates into the kernels (in place) and turns LoRA
        off: the model computes the same outputs with plain projections, ready
        for `export_for_serving`; every weight is trainable again."""
        if not getattr(self, "_lora", None):
            raise ValueError("`merge_lora()` needs LoRA enabled first (`enable_lora(rank)`).")
        lora.merge_lora(self, self._lora["target"])
        self._lora = None
        self.lora_weights = None


def lm_loss_and_accuracy(ignore_index: int | None) -> tuple:
    """`(loss, metrics, weighted)` of a token-prediction task: `MaskedSparseCategoricalCrossentropy`
    from logits and `MaskedAccuracy` as a weighted metric, both ignoring the label `ignore_index`
    (None: none), as `keras_tfm.training.compile_for_lm` compiles."""
    loss = MaskedSparseCategoricalCrossentropy(from_logits=True, ignore_index=ignore_index)
    return loss, [MaskedAccuracy(ignore_index=ignore_index, name="accuracy")], True


def classification_loss_and_accuracy() -> tuple:
    """`(loss, metrics, weighted)` of a classifier (logits (B, C), int labels (B,)): sparse
    cross-entropy from logits and accuracy, as `keras_tfm.training.compile_for_classification`."""
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return loss, [keras.metrics.SparseCategoricalAccuracy(name="accuracy")], False
