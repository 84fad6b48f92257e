"""Model methods whose work lives above `models`: the text API and `from_preset`.

Imports flow one way (`layers ← models ← checkpoints / generation / data ← ...`), yet a
user asks the model itself: `gpt_model.generate("To be")`, `classifier.predict(["great film"])`,
`GPT.from_preset("path/to/checkpoint")`. The model classes therefore define these methods (with
their documentation) and hand the work to a function that the package above registers here
under the method's name when it is imported:

    # keras_tfm/generation/text.py
    @extensions.provide("generate_text")
    def generate_text(model, prompts, max_new_tokens, **options): ...

`import keras_tfm` imports the providing packages on the TensorFlow backend (tokenizers are
TensorFlow ops), so every method works after a plain import; on another backend the method
names the package to import (`keras_tfm.generation`, ...).
"""

from collections.abc import Callable

#: Registered implementations: {name: function(model, ...)}.
_PROVIDED: dict[str, Callable] = {}

#: The package that provides each name (for the message when it is not imported yet).
PROVIDERS = {
    "generate_text": "keras_tfm.generation",
    "beam_search_text": "keras_tfm.generation",
    "translate": "keras_tfm.generation",
    "predict_texts": "keras_tfm.data",
    "fit_texts": "keras_tfm.data",
    "evaluate_texts": "keras_tfm.data",
    "embed_texts": "keras_tfm.data",
    "fill_mask": "keras_tfm.data",
    "label_words": "keras_tfm.data",
    "load_preset_directory": "keras_tfm.checkpoints",
}


def provide(name: str) -> Callable[[Callable], Callable]:
    """Decorator: registers `fn` as the implementation of `name` (one of `PROVIDERS`)."""
    if name not in PROVIDERS:
        raise ValueError(f"`name`={name!r} is not a model extension; expected one of {sorted(PROVIDERS)}.")

    def register(fn):
        _PROVIDED[name] = fn
        return fn

    return register


def provided(name: str, method: str) -> Callable:
    """The implementation registered under `name`, for the model method `method` (named in the
    error raised when its package has not been imported)."""
    fn = _PROVIDED.get(name)
    if fn is None:
        package = PROVIDERS[name]
        raise RuntimeError(
            f"`{method}` is implemented in `{package}`, which is not imported (it needs TensorFlow; "
            f"`import keras_tfm` imports it on the TensorFlow backend): `import {package}` first."
        )
    return fn
