"""Argument checks of plain values shared by every keras_tfm module: ints,
floats, rates, choices, seeds, dtypes, sizes, text batches and the generation
options. Each raises a ValueError or TypeError that names the argument, the value
received and what was expected. Check an option once, where it is stored.

The checks of tensors (ranks, token ids, lengths, masks; eager or in a graph)
live in `keras_tfm.tensor_checks`; files and memory in `keras_tfm.resources`;
the command line's argparse types in `keras_tfm.cli.options`.
"""

import math
import numbers

import numpy as np


def _is_int(value):
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise TypeError(f"`{name}` must be a positive int; received {value!r} ({type(value).__name__}).")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int; received {value}.")
    return int(value)


def check_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a float in [0, 1); received {value!r}.")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1); received {value}.")
    return float(value)


def check_open_rate(name, value):
    """A float strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a float in (0, 1); received {value!r}.")
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"`{name}` must be in (0, 1); received {value}.")
    return float(value)


def check_closed_rate(name, value):
    """A float inside [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a float in [0, 1]; received {value!r}.")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"`{name}` must be in [0, 1]; received {value}.")
    return float(value)


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"Unknown `{name}` {value!r}; expected one of {list(choices)}.")
    return value


def dtype_name(dtype):
    """ "float32", "int64", "bool", ... for any backend's dtype object (or a str)."""
    import keras

    try:
        return keras.backend.standardize_dtype(dtype)
    except (ValueError, TypeError, AttributeError):
        return str(dtype)


#: The dtypes a key/value decoding cache may have (None: the compute dtype).
CACHE_DTYPES = (None, "float32", "float16", "bfloat16")


def check_cache_dtype(name, value):
    """A float dtype for key/value caches: None, "float32", "float16" or
    "bfloat16" (or the same NumPy / TensorFlow dtype object); returns the name.

    Integer and bool caches would silently round every key and value.
    """
    if value is None:
        return None
    dtype = dtype_name(value) if not isinstance(value, bool) else repr(value)
    if dtype not in CACHE_DTYPES:
        raise ValueError(f"`{name}` must be one of {list(CACHE_DTYPES)} (a float dtype); received {value!r}.")
    return dtype


def _as_str(name, item):
    if isinstance(item, bytes):
        try:
            return item.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"`{name}` is not UTF-8 text ({error}).") from None
    return item


def text_batch(name, inputs):
    """`(texts, single)` when `inputs` is text, else None (token ids, other data).

    Text is a str or bytes (`single` True); a list or tuple whose items are all str/bytes;
    a 1-D NumPy array of strings (or of str/bytes objects); a scalar or 1-D string tensor
    of any backend. Bytes are UTF-8. An empty list or array is text (an empty batch: a
    ValueError). A list mixing text and other items, or a 2-D string array, raises.

    Raises:
        TypeError: a list mixing text and other items.
        ValueError: an empty batch, a string array or tensor that is not 1-D, bytes that are
            not UTF-8.
    """
    if hasattr(inputs, "numpy") and getattr(getattr(inputs, "dtype", None), "name", None) == "string":
        inputs = inputs.numpy()  # a TensorFlow string tensor
    if isinstance(inputs, (str, bytes)):
        return [_as_str(name, inputs)], True
    if isinstance(inputs, np.ndarray):
        is_text = inputs.dtype.kind in "USO" and (
            inputs.dtype.kind != "O" or all(isinstance(x, (str, bytes)) for x in inputs.flat)
        )
        if not is_text or (inputs.dtype.kind == "O" and inputs.size == 0):
            return None
        if inputs.ndim == 0:
            return [_as_str(name, inputs.item())], True
        if inputs.ndim != 1:
            raise ValueError(
                f"`{name}` must be a 1-D list of texts; received a string array of shape {inputs.shape}."
            )
        inputs = inputs.tolist()
    if not isinstance(inputs, (list, tuple)):
        return None
    if not inputs:
        raise ValueError(f"`{name}` is an empty batch; pass a str, a non-empty list of str or token ids.")
    is_text = [isinstance(item, (str, bytes)) for item in inputs]
    if not any(is_text):
        return None
    if not all(is_text):
        index = is_text.index(False)
        raise TypeError(
            f"`{name}[{index}]` must be a str like the other items of `{name}`; received "
            f"{inputs[index]!r:.60} ({type(inputs[index]).__name__}): pass a list of str, or token ids only."
        )
    return [_as_str(f"{name}[{i}]", item) for i, item in enumerate(inputs)], False


def is_text(x) -> bool:
    """Whether a model method's input is text: a str (or bytes), a list / tuple holding one
    (or empty), a NumPy array of strings, or a TensorFlow string tensor. The text methods
    then run (`keras_tfm.models.bert_text`); any other input goes to Keras."""
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (list, tuple)):
        return not x or any(isinstance(item, (str, bytes)) for item in x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "O":
            return any(isinstance(item, (str, bytes)) for item in x.flat)
        return x.dtype.kind in "US"
    return getattr(getattr(x, "dtype", None), "name", None) == "string"


def refuse_with_texts(method, **arguments):
    """A ValueError for Keras arguments (not None) that have no meaning with texts."""
    for name, value in arguments.items():
        if value is not None:
            raise ValueError(f"`{method}` on texts does not take `{name}`; received {value!r:.60}.")


# --------------------------------------------------------------------------- #
# Python options.
# --------------------------------------------------------------------------- #


def check_bool(name, value):
    """A real bool (or NumPy bool): the strings "false"/"true" and ints are rejected.

    `bool("false")` is True, so a config or CLI value passed through `bool()`
    would silently flip; this check refuses anything that is not a bool.
    """
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise TypeError(f"`{name}` must be a bool (True or False); received {value!r} ({type(value).__name__}).")


def check_non_negative_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise TypeError(f"`{name}` must be a non-negative int; received {value!r} ({type(value).__name__}).")
    if value < 0:
        raise ValueError(f"`{name}` must be a non-negative int; received {value}.")
    return int(value)


def check_index(name, value, size):
    """An int (Python or NumPy) in [0, size): an example, row or head of something of `size` entries."""
    if not _is_int(value) or not 0 <= value < size:
        raise ValueError(f"`{name}` must be an index in [0, {size}); received {value!r}.")
    return int(value)


def parse_int_list(name, text):
    """Integers separated by commas or spaces ("1,2 3") → [1, 2, 3]; a ValueError names `name` otherwise."""
    try:
        return [int(t) for t in str(text).replace(",", " ").split()]
    except ValueError:
        raise ValueError(
            f"`{name}` must be integers separated by commas or spaces; received {text!r}."
        ) from None


def check_int(name, value, minimum=None, maximum=None, allow_none=False, maximum_name="the maximum"):
    """A Python or NumPy integer (not a bool) in [minimum, maximum]; returns a Python int.

    Token ids, counts and widths often arrive as NumPy scalars (read from an
    array), so `numpy.int32` etc. are accepted. `maximum_name` says what the
    upper bound is (e.g. "the vocabulary size") in the error message.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int; received {value!r} of type {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}; received {value}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}`={value} exceeds {maximum_name} {maximum}.")
    return int(value)


def check_token_id(name, value, vocabulary_size, minimum=0, consequence=""):
    """An int id of a vocabulary of `vocabulary_size` tokens, in [minimum, vocabulary_size);
    `consequence` (e.g. ": generation could never stop on it") ends the error message."""
    value = check_int(name, value, minimum=minimum)
    if value >= vocabulary_size:
        raise ValueError(
            f"`{name}`={value} is outside the model's vocabulary [{minimum}, {int(vocabulary_size)}){consequence}."
        )
    return value


#: The end of the message for a stop id outside the vocabulary.
NO_STOP = ": generation could never stop on it"


def check_request_ids(request, eos_id, vocabulary_size, bos_minimum=0, unset=None):
    """A generation request's first decoder token `request["bos_id"]` (at least `bos_minimum`) and
    stop id `eos_id` (not checked when None or `unset`): ids of the vocabulary."""
    if request.get("bos_id") is not None:
        check_token_id("bos_id", request["bos_id"], vocabulary_size, minimum=bos_minimum)
    if eos_id is not None and eos_id is not unset:
        check_token_id("eos_id", eos_id, vocabulary_size, consequence=NO_STOP)


#: The largest random seed: one range, [0, SEED_MAX], for every seed of the recipes, the command line
#: and the serving signatures (an int32 there; NumPy's `set_random_seed` takes up to 2**32 - 1).
SEED_MAX = 2**31 - 1


def check_seed(name, value, allow_none=False):
    """A random seed: an int in [0, `SEED_MAX`]; returns a Python int."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int; received {value!r} of type {type(value).__name__}.")
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"`{name}` must be a seed in [0, {SEED_MAX}]; received {value}.")
    return int(value)


def check_float(name, value, low=None, high=None, low_open=False, high_open=False, allow_none=False):
    """A finite Python/NumPy float (or int) inside [low, high] (ends open on request).

    NaN and ±inf are always rejected: `nan > 0` is False, so a range check
    alone would let them through.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or isinstance(value, str):
        raise TypeError(f"`{name}` must be a number; received {value!r} ({type(value).__name__}).")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a number; received {value!r} ({type(value).__name__}).") from None
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"`{name}` must be a finite number in {span}; received {value!r}.")
    if low is not None and (number < low or (low_open and number == low)):
        raise ValueError(f"`{name}` must be in {span}; received {value!r}.")
    if high is not None and (number > high or (high_open and number == high)):
        raise ValueError(f"`{name}` must be in {span}; received {value!r}.")
    return number


def check_positive_float(name, value, allow_none=False):
    """A finite float > 0 (temperatures, learning rates, scales)."""
    return check_float(name, value, low=0.0, low_open=True, allow_none=allow_none)


def check_learning_rate(name, value):
    """A finite positive float, or a Keras `LearningRateSchedule` / callable of the step."""
    if callable(value) and not isinstance(value, (int, float)):
        return value
    return check_positive_float(name, value)


def check_known_keys(name, mapping, valid):
    """`mapping` is a dict whose keys are all in `valid`; unknown keys are listed with the valid ones."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise TypeError(f"`{name}` must be a dict; received {mapping!r} ({type(mapping).__name__}).")
    unknown = sorted(str(k) for k in mapping if k not in valid)
    if unknown:
        raise ValueError(f"`{name}` has unknown key(s) {unknown}; valid keys are {sorted(valid)}.")
    return mapping


# --------------------------------------------------------------------------- #
# Generation options: the rules of in-process generation, the served signatures
# and the command line.
# --------------------------------------------------------------------------- #

#: The `sampler` names of the decoding loops: `greedy`, or `sample` (temperature,
#: top-k and top-p are arguments of `sample`; each filter is off at its default).
SAMPLERS = ("greedy", "sample")

#: Largest beam-search length penalty α: ((5 + n) / 6)^α stays finite in float32 for every
#: n <= `generation.prompts.MAX_NEW_TOKENS` (a larger α overflows it and every score becomes 0).
MAX_LENGTH_PENALTY = 5.0


def check_sampling_args(
    temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, vocabulary_size: int | None = None
) -> tuple[float, int, float]:
    """Validates Python sampling arguments before they reach a graph.

    Rules (the same for `generate`, `sample` and the served `generate`
    signature, which checks its tensor inputs the same way):

    * `temperature` 0 (or below 1e-6) means greedy decoding; NaN, inf and
      negative values are refused.
    * `top_k` 0 disables the filter; `top_k` equal to the vocabulary size
      keeps every token (no filter); a Python `top_k` *larger* than the
      vocabulary is refused (it is almost always a mistake: the model has
      fewer tokens than asked for). A tensor `top_k` cannot be checked
      inside a compiled graph and larger values then mean "no filter".
    * `top_p` must be in (0, 1]; 1 disables the filter.

    Args:
        temperature: float >= 0 (values < 1e-6 mean greedy).
        top_k: int >= 0 (0 disables top-k filtering), at most
            `vocabulary_size` when that is given.
        top_p: float in (0, 1] (1 disables nucleus filtering).
        vocabulary_size: the model's vocabulary size, or None (not checked).

    Returns:
        The tuple `(float(temperature), int(top_k), float(top_p))`.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: an argument is out of range.
    """
    temperature = check_float("temperature", temperature, low=0.0)
    top_k = check_int("top_k", top_k, minimum=0, maximum=vocabulary_size, maximum_name="the vocabulary size")
    top_p = check_float("top_p", top_p, low=0.0, high=1.0, low_open=True)
    return float(temperature), int(top_k), float(top_p)


def check_sampling(
    sampler: str | None,
    temperature: float | None,
    top_k: int | None,
    top_p: float | None,
    seed: object = None,
    vocabulary_size: int | None = None,
) -> tuple[str, float, int, float]:
    """The sampler of a generation call and its checked arguments; no option is ever ignored.

    `sampler` None picks "sample" when any of `temperature`, `top_k`, `top_p`, `seed` is
    given, else "greedy". `sampler="greedy"` with any of them is refused (greedy decoding
    would ignore them). Unset options take the defaults of `sample` (1.0, 0, 1.0).

    Returns:
        `(sampler, temperature, top_k, top_p)`, checked as `check_sampling_args` does (an int
        `seed` too; a seed array is checked where it is converted).

    Raises:
        ValueError: an unknown sampler, a sampling option with "greedy", an option out of range.
        TypeError: an option of the wrong type.
    """
    given = {
        name: value
        for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("seed", seed))
        if value is not None
    }
    if sampler is None:
        sampler = "sample" if given else "greedy"
    check_choice("sampler", sampler, SAMPLERS)
    if sampler == "greedy" and given:
        name, value = next(iter(given.items()))
        raise ValueError(
            f"`{name}`={value!r} has no effect with sampler='greedy' (the most likely token is always "
            "chosen); pass sampler='sample' (or leave `sampler` unset) to sample with it."
        )
    temperature, top_k, top_p = check_sampling_args(
        1.0 if temperature is None else temperature,
        0 if top_k is None else top_k,
        1.0 if top_p is None else top_p,
        vocabulary_size=vocabulary_size,
    )
    if isinstance(seed, (numbers.Number, str, bytes)):  # arrays are checked where they are converted
        check_seed("seed", seed)
    return sampler, temperature, top_k, top_p


def check_num_beams(num_beams, vocabulary_size):
    """Beams per input: an int in [1, vocabulary size]."""
    return check_int(
        "num_beams", num_beams, minimum=1, maximum=vocabulary_size, maximum_name="the vocabulary size"
    )


def check_length_penalty(alpha):
    """The beam search's length penalty α of ((5 + len) / 6)^α, in [0, `MAX_LENGTH_PENALTY`]."""
    return check_float("length_penalty", alpha, low=0.0, high=MAX_LENGTH_PENALTY)
