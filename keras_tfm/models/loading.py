"""Models from names: `Class.from_preset(name | directory | "hf://org/name")`, `from_pretrained`.

`PresetLoading` gives every model class (`TransformerModel` derives from it) KerasHub's
constructor `from_preset`:

* a built-in preset name (`keras_tfm.models.presets`): an untrained model of that size;
* a HuggingFace-layout checkpoint directory or hub name (`keras_tfm.checkpoints.Checkpoint`):
  the class builds itself from the checkpoint's sizes (`_from_checkpoint`), the checkpoint
  fills its weights and attaches its tokenizer.

`from_pretrained(path, task)` is `from_preset` on the base class: the checkpoint's task (or
the one given) picks the class whose `checkpoint_task` it is.
"""

import os

import keras

from keras_tfm.checkpoints import Checkpoint
from keras_tfm.checkpoints.hub import HUB_PREFIX
from keras_tfm.checkpoints.loading import family_tasks
from keras_tfm.models.presets import PRESETS, list_presets, preset_options


def _looks_like_path(name):
    """An existing path, or a name written as one (a separator, "~" or a leading ".")."""
    return (
        os.path.exists(name)
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
        or name.startswith((".", "~"))
    )


class PresetLoading:
    """`from_preset` and the class attributes it reads: `preset_family` (the
    `keras_tfm.models.presets` family whose names it builds; None: no built-in presets)
    and `checkpoint_task` (the checkpoint task that builds this class; None: none)."""

    #: The preset family ("gpt", "bert", "seq2seq") whose named sizes `from_preset` builds.
    preset_family: str | None = None
    #: The checkpoint task giving this class ("encoder": BERT's bare encoder).
    checkpoint_task: str | None = None

    @staticmethod
    def root() -> type:
        """The base model class (`TransformerModel`), on which `from_preset` picks the class."""
        return PresetLoading.__subclasses__()[0]

    # ---------------------------------------------------------------- presets
    @classmethod
    def from_preset(cls, preset: "str | os.PathLike", **options) -> "keras.Model":
        """A model of this class from a built-in preset, a checkpoint directory or a hub name.

        * a built-in preset name (`list_presets(cls.preset_family)`, e.g. "tiny", "gpt2_small"):
          an UNTRAINED model of that size, `builder(preset, **options)` (e.g. `gpt`,
          `bert_classifier`); the name wins over a directory of the same name (write
          "./tiny" for the directory);
        * a HuggingFace-layout checkpoint directory (`keras_tfm.checkpoints.Checkpoint`): the
          model of its sizes with its weights, the checkpoint's tokenizer attached as
          `model.tokenizer` when the directory has its files;
        * `"hf://org/name"`: that repository of the Hugging Face Hub, downloaded into (or, when
          offline, read from) the hub client's cache, then loaded as a directory
          (`pip install keras-tfm[hub]`).

        On the base class (`TransformerModel.from_preset`, or `from_pretrained`) a checkpoint
        gives the model its family and `task` (default: the one it remembers, else the
        family's) choose; built-in names need a model class.

        Args:
            preset: a built-in preset name, a checkpoint directory or `"hf://org/name"`.
            **options: builder options for a built-in preset (sizes, `dropout`, `dtype`,
                `num_classes`, `pooling`, ...; explicit values override the preset's);
                for a checkpoint, options over its config (`dropout=0.0`,
                `dtype="mixed_bfloat16"`, ...) and the head's (`num_classes`, `pooling`,
                `classifier_dropout`, `normalize`); on the base class also `task`.

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
        if cls is not PresetLoading.root() and family is None and cls.checkpoint_task is None:
            raise ValueError(
                f"{cls.__name__}.from_preset({preset!r}): {cls.__name__} has no built-in presets and no "
                "checkpoint layout; build it with its builder function, or load a saved model with "
                "`keras.saving.load_model(path)`."
            )
        if not preset.startswith(HUB_PREFIX) and not _looks_like_path(preset):
            names = "" if family is None else f"a built-in preset name {list_presets(family)}, "
            if cls is PresetLoading.root():
                names = "a model class's built-in preset name (e.g. `GPT.from_preset('tiny')`), "
            raise ValueError(
                f"Unknown `preset` {preset!r} for {cls.__name__}: expected {names}a checkpoint directory "
                f"(none exists at {os.path.abspath(preset)!r}) or a hub name 'hf://org/name'."
            )
        if cls is not PresetLoading.root() and cls.checkpoint_task is None:
            raise ValueError(
                f"{cls.__name__}.from_preset({preset!r}): no HuggingFace checkpoint layout builds a "
                f"{cls.__name__} (its built-in presets: {list_presets(family)}); load a saved model with "
                "`keras.saving.load_model(path)`."
            )
        return cls._load_checkpoint(preset, **options)

    @classmethod
    def _load_checkpoint(cls, path, task=None, **options):
        """`from_preset` of a checkpoint: the class for its task, built (`_from_checkpoint`), its
        weights loaded and its tokenizer attached. `task` only on the base class."""
        checkpoint = Checkpoint(path)
        if cls is PresetLoading.root():
            target = checkpoint_class(checkpoint.task(task))
        elif task is not None:
            raise TypeError(f"{cls.__name__}.from_preset got an unexpected keyword argument 'task'.")
        else:
            target = cls
        tasks = family_tasks(checkpoint.family)
        if target.checkpoint_task not in tasks:
            loaders = [c.__name__ for c in _model_classes() if c.checkpoint_task in tasks]
            raise ValueError(
                f"{cls.__name__}.from_preset({path!r}): a {checkpoint.family.MODEL_TYPE!r} checkpoint does "
                f"not build a {cls.__name__}; load it with "
                f"{' / '.join(f'{n}.from_preset' for n in loaders)}."
            )
        model = target._from_checkpoint(checkpoint, **options)
        checkpoint.load_weights(model, target.checkpoint_task)
        model.tokenizer = checkpoint.tokenizer(model)
        model.generation_defaults = checkpoint.generation_defaults()  # HF beam search, eos (`generation`)
        return model

    @classmethod
    def _from_checkpoint(cls, checkpoint: Checkpoint, **options) -> "keras.Model":
        """The untrained model of `checkpoint`'s sizes (`builder_options`, `options` over them).
        Subclasses built from other models (BERT heads) override it."""
        return cls(**checkpoint.builder_options(options))

    @classmethod
    def _build_preset(cls, preset: str, **options) -> "keras.Model":
        """The untrained model of built-in `preset` (a name of `cls.preset_family`) with
        `options` over it. Subclasses built from other models (BERT heads) override it."""
        return cls(**preset_options(cls, cls.preset_family, preset, options))


def _model_classes(base: type = None) -> list:
    """The keras_tfm model classes under `base` (default `TransformerModel`), in definition order."""
    found = []
    for sub in (base or PresetLoading.root()).__subclasses__():
        if sub.__module__.startswith("keras_tfm.models"):
            found.append(sub)
        found += _model_classes(sub)
    return found


def checkpoint_class(task: str) -> type:
    """The keras_tfm model class a checkpoint `task` builds (its `checkpoint_task`)."""
    for cls in _model_classes():
        if cls.checkpoint_task == task:
            return cls
    raise ValueError(f"No keras_tfm model class builds the checkpoint task {task!r}.")


def from_pretrained(path: "str | os.PathLike", task: str | None = None, **options) -> "keras.Model":
    """A keras_tfm model from a HuggingFace-layout checkpoint, with its weights and tokenizer:
    `TransformerModel.from_preset(path, task=task, **options)`.

    Args:
        path: a checkpoint directory or `"hf://org/name"`.
        task: the model to build. BERT: "encoder" (the bare encoder: `sequence_output`,
            `pooled_output`), "masked_lm", "classifier", "token_classifier",
            "sentence_embedding"; GPT-2 and Llama: "causal_lm". None: the task the
            checkpoint remembers (`save_pretrained`), else the family's first.
        **options: options over the config's (e.g. `dropout=0.0`, `dtype=...`,
            `attention_impl=...`) and the head's (`num_classes` (default: the config's
            `id2label`), `pooling`, `classifier_dropout`, `normalize`).

    Returns:
        A `GPT`, `BertEncoder`, `BertMaskedLM`, `BertClassifier`, `BertTokenClassifier` or
        `SentenceEncoder`.

    Warns:
        UserWarning listing the weights the checkpoint lacks and those left unused; naming the
        tokenizer files when they cannot be read or do not fit the model.

    Raises:
        ValueError: a missing or unreadable file, an unsupported `model_type` or task, a config
            field of the wrong type, a missing weight or one of another shape (named).
        ImportError: an `"hf://"` name without `huggingface_hub`.
    """
    return PresetLoading.root().from_preset(path, task=task, **options)
