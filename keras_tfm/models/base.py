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
listed in `keras_tfm.models.extensions`.

`ModelClass.from_preset(name_or_dir, **options)` (KerasHub's constructor) takes a built-in
preset name (`list_presets`: an untrained model of that size, built from the class's preset
family), a HuggingFace-layout checkpoint directory or an `"hf://org/name"` hub name (loaded by
`keras_tfm.checkpoints` with the class's checkpoint task, tokenizer attached).
"""

import os

import keras

from keras_tfm.models import extensions, layout, lora
from keras_tfm.models.presets import PRESETS, list_presets, preset_options

#: The prefix of a Hugging Face Hub name (`"hf://org/name"`).
HUB_PREFIX = "hf://"


class _TokenizerSlot:
    """Plain (non-trackable) holder of a model's tokenizer: Keras does not track it as a
    sublayer (no weights, no place in `model.layers`); the config saves it."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer


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
    try:
        return keras.saving.deserialize_keras_object(config)
    except TypeError as error:
        raise TypeError(
            f"This model was saved with its tokenizer ({config.get('class_name')}), a TensorFlow layer of "
            "`keras_tfm.tokenizers`: `import keras_tfm.tokenizers` before loading it (on the TensorFlow "
            f"backend `import keras_tfm` does). Keras said: {error}"
        ) from None


def _looks_like_path(name):
    """An existing path, or a name written as one (a separator, "~" or a leading ".")."""
    return (
        os.path.exists(name)
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
        or name.startswith((".", "~"))
    )


def serialize_option(value):
    """A JSON-friendly form of an initializer / dtype policy argument."""
    if value is None or isinstance(value, (str, int, float, bool, dict, list, tuple)):
        return value
    if isinstance(value, keras.initializers.Initializer):
        return keras.initializers.serialize(value)
    if isinstance(value, keras.DTypePolicy):
        return keras.dtype_policies.serialize(value)
    return keras.saving.serialize_keras_object(value)


class TransformerModel(keras.Model):
    """Base of the keras_tfm model classes: stores the constructor arguments.

    Subclasses call `self._init_model(inputs, outputs, name, config)` once
    their layers are created and wired (as local variables), with `config` the
    dict of their constructor arguments (checked values, each by name), and
    assign their layer attributes after it.

    `from_preset` reads two class attributes: `preset_family` (the
    `keras_tfm.models.presets` family whose names it builds; None: no built-in
    presets) and `checkpoint_task` (the `from_pretrained` task that builds this
    class from a checkpoint; None: no checkpoint layout).
    """

    #: The preset family ("gpt", "bert", "seq2seq") whose named sizes `from_preset` builds.
    preset_family: str | None = None
    #: The `keras_tfm.checkpoints.from_pretrained` task giving this class ("encoder": BERT's bare encoder).
    checkpoint_task: str | None = None
    #: The sizes `get_layout_map` checks (`layout.model_sizes`); set by `_init_model`.
    _layout_sizes = None

    def _init_model(self, inputs, outputs, name, config, layout_sizes=None, **kwargs):
        """`keras.Model.__init__` on the functional graph `inputs` → `outputs`;
        stores `config` (the constructor arguments) for `get_config` and `layout_sizes`
        (the dict the constructor gave `layout.bind_sizes`) for `get_layout_map`."""
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self._model_config = {key: serialize_option(value) for key, value in config.items()}
        self._tokenizer_slot = _TokenizerSlot()
        object.__setattr__(self, "_layout_sizes", layout_sizes)

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

    # ---------------------------------------------------------------- presets
    @classmethod
    def from_preset(cls, preset: "str | os.PathLike", **options) -> "TransformerModel":
        """A model of this class from a built-in preset, a checkpoint directory or a hub name.

        * a built-in preset name (`list_presets(cls.preset_family)`, e.g. "tiny", "gpt2_small"):
          an UNTRAINED model of that size, `builder(preset, **options)` (e.g. `gpt`,
          `bert_classifier`); the name wins over a directory of the same name (write
          "./tiny" for the directory);
        * a HuggingFace-layout checkpoint directory: `keras_tfm.checkpoints.from_pretrained(
          directory, task=cls.checkpoint_task, **options)`, with the checkpoint's tokenizer
          attached as `model.tokenizer` when the directory has its files;
        * `"hf://org/name"`: that repository of the Hugging Face Hub, downloaded into (or, when
          offline, read from) the hub client's cache, then loaded as a directory
          (`pip install keras-tfm[hub]`).

        On the base class (`TransformerModel.from_preset`) a checkpoint gives the model its
        family and saved task choose; built-in names need a model class.

        Args:
            preset: a built-in preset name, a checkpoint directory or `"hf://org/name"`.
            **options: builder options for a built-in preset (sizes, `dropout`, `dtype`,
                `num_classes`, `pooling`, ...; explicit values override the preset's);
                `from_pretrained` overrides and head options for a checkpoint.

        Returns:
            An instance of this class (`GPT.from_preset` → `GPT`, ...).

        Raises:
            ValueError: an unknown preset name (listing the known ones); a checkpoint that
                does not build this class (naming the class that loads it); a class without
                presets or checkpoints; a hub repository neither downloadable nor cached.
            ImportError: an `"hf://"` name without `huggingface_hub` installed.
        """
        if isinstance(preset, os.PathLike):
            preset = os.fspath(preset)
        if not isinstance(preset, str) or not preset:
            raise TypeError(
                f"`preset` must be a preset name, a checkpoint directory or 'hf://org/name' (a non-empty "
                f"str or os.PathLike); received {preset!r}."
            )
        family = cls.preset_family
        if family is not None and preset in PRESETS[family]:
            return cls._build_preset(preset, **options)
        if cls is not TransformerModel and family is None and cls.checkpoint_task is None:
            raise ValueError(
                f"{cls.__name__}.from_preset({preset!r}): {cls.__name__} has no built-in presets and no "
                "checkpoint layout; build it with its builder function, or load a saved model with "
                "`keras.saving.load_model(path)`."
            )
        if not preset.startswith(HUB_PREFIX) and not _looks_like_path(preset):
            names = "" if family is None else f"a built-in preset name {list_presets(family)}, "
            if cls is TransformerModel:
                names = "a model class's built-in preset name (e.g. `GPT.from_preset('tiny')`), "
            raise ValueError(
                f"Unknown `preset` {preset!r} for {cls.__name__}: expected {names}a checkpoint directory "
                f"(none exists at {os.path.abspath(preset)!r}) or a hub name 'hf://org/name'."
            )
        if cls is not TransformerModel and cls.checkpoint_task is None:
            raise ValueError(
                f"{cls.__name__}.from_preset({preset!r}): no HuggingFace checkpoint layout builds a "
                f"{cls.__name__} (its built-in presets: {list_presets(family)}); load a saved model with "
                "`keras.saving.load_model(path)`."
            )
        return extensions.provided("load_preset_directory", f"{cls.__name__}.from_preset")(
            cls, preset, **options
        )

    @classmethod
    def _build_preset(cls, preset: str, **options) -> "TransformerModel":
        """The untrained model of built-in `preset` (a name of `cls.preset_family`) with
        `options` over it. Subclasses built from other models (BERT heads) override it."""
        return cls(**preset_options(cls, cls.preset_family, preset, options))

    # ------------------------------------------------------------- tokenizer
    @property
    def tokenizer(self):
        """The model's tokenizer (None until one is attached); saved with the model."""
        slot = getattr(self, "_tokenizer_slot", None)
        return None if slot is None else slot.tokenizer

    @tokenizer.setter
    def tokenizer(self, tokenizer):
        if tokenizer is not None:
            tokenizer = self._check_tokenizer(tokenizer)
        self._tokenizer_slot = _TokenizerSlot(tokenizer)

    def __setattr__(self, name, value):
        if name == "tokenizer":  # the property above: on PyTorch, Module.__setattr__ would take a
            object.__setattr__(self, name, value)  # tokenizer (a Keras layer) as a submodule
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
        return config

    @classmethod
    def from_config(cls, config: dict, custom_objects=None) -> "TransformerModel":
        config = dict(config)
        lora = config.pop("lora", None)
        quantized = config.pop("quantized", None)
        tokenizer = config.pop("tokenizer", None)
        model = cls(**config)
        if tokenizer is not None:
            model.tokenizer = _deserialize_tokenizer(tokenizer)
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
