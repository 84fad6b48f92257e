"""`ModelClass.from_preset(directory | "hf://org/name")`: a checkpoint as a given model class.

The model classes define `from_preset` (`keras_tfm.models.base`); built-in preset names they
build themselves, checkpoints they hand to `load_preset_directory`, registered here as their
"load_preset_directory" extension. It resolves a hub name (`keras_tfm.checkpoints.hub`), checks
that the checkpoint's family builds the class (a GPT-2 checkpoint is no `BertClassifier`), and
calls `from_pretrained` with the class's `checkpoint_task`, which attaches the tokenizer.
"""

import os

from keras_tfm.checkpoints import bert as bert_checkpoint
from keras_tfm.checkpoints.files import CONFIG_FILE, read_json
from keras_tfm.checkpoints.hub import checkpoint_path
from keras_tfm.checkpoints.pretrained import checkpoint_family, from_pretrained
from keras_tfm.models import (
    GPT,
    BertClassifier,
    BertEncoder,
    BertMaskedLM,
    BertTokenClassifier,
    SentenceEncoder,
    TransformerModel,
    extensions,
)

#: The classes a checkpoint can build (each with its `checkpoint_task`).
CHECKPOINT_CLASSES = (GPT, BertEncoder, BertMaskedLM, BertClassifier, BertTokenClassifier, SentenceEncoder)


def family_tasks(family) -> tuple:
    """The `from_pretrained` tasks a checkpoint family builds ("encoder": BERT's bare encoder)."""
    return family.TASKS + (("encoder",) if family is bert_checkpoint else ())


@extensions.provide("load_preset_directory")
def load_preset_directory(model_class, preset, **options):
    """`model_class.from_preset(preset, **options)` for a checkpoint directory or hub name.

    Args:
        model_class: the class `from_preset` was called on (`TransformerModel`: any).
        preset: a checkpoint directory or `"hf://org/name"`.
        **options: `from_pretrained` overrides and head options.

    Returns:
        The model (an instance of `model_class`), its tokenizer attached when the checkpoint
        has one.

    Raises:
        ValueError: the checkpoint's family does not build `model_class` (naming the
            classes that load it), and the errors of `checkpoint_path` / `from_pretrained`.
    """
    directory = checkpoint_path(preset)
    if model_class is TransformerModel:
        return from_pretrained(directory, **options)
    family = checkpoint_family(read_json(directory, CONFIG_FILE), os.path.join(directory, CONFIG_FILE))
    tasks = family_tasks(family)
    if model_class.checkpoint_task not in tasks:
        loaders = [cls.__name__ for cls in CHECKPOINT_CLASSES if cls.checkpoint_task in tasks]
        raise ValueError(
            f"{model_class.__name__}.from_preset({preset!r}): a {family.MODEL_TYPE!r} checkpoint does not "
            f"build a {model_class.__name__}; load it with {' / '.join(f'{n}.from_preset' for n in loaders)} "
            "(or `keras_tfm.checkpoints.from_pretrained`)."
        )
    model = from_pretrained(directory, task=model_class.checkpoint_task, **options)
    if not isinstance(model, model_class):
        raise ValueError(
            f"{model_class.__name__}.from_preset({preset!r}): the checkpoint builds a {type(model).__name__}, "
            f"not a {model_class.__name__}; call {type(model).__name__}.from_preset instead."
        )
    return model
