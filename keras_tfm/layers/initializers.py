"""Independent initializers for sublayers: one draw per weight.

Keras initializers are stateless: an instance seeded with an int, or unseeded
(it then picks one seed when it is created), returns the SAME values on every
call. A layer that hands one instance to several sublayers therefore starts
them all equal (Q = K = V, block 0 = block 1). `clone_initializer` gives each
sublayer its own instance:

- unseeded: a fresh instance, which draws its own seed from Python's `random`
  (so `keras.utils.set_random_seed(s)` still makes the whole model
  reproducible);
- seeded with an int `s`: the same class with the seed derived from `s` and a
  `salt` naming the sublayer (stable across processes), so a seeded model is
  reproducible and its sublayers still differ;
- seeded with a `keras.random.SeedGenerator` (stateful: every call draws new
  values) or a plain function: returned unchanged.
"""

import hashlib
from typing import Any

import keras


def derive_seed(seed: int, salt: str) -> int:
    """A seed in [1, 2³¹ − 1) determined by `seed` and the string `salt`."""
    digest = hashlib.sha256(f"{int(seed)}/{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**31 - 2) + 1


def clone_initializer(initializer: Any, salt: str) -> Any:
    """An independent copy of `initializer` for the sublayer named by `salt`.

    Args:
        initializer: an initializer instance, name or config (as accepted by
            `keras.initializers.get`).
        salt: string naming the sublayer within its parent ("query",
            "block_3", ...); only used to derive a new int seed.

    Returns:
        A `keras.initializers.Initializer` (or the original callable).
    """
    initializer = keras.initializers.get(initializer)
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer  # a plain function: nothing to clone
    if isinstance(getattr(initializer, "seed", None), keras.random.SeedGenerator):
        return initializer  # stateful: each call already draws new values
    config = initializer.get_config()
    seed = config.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        config["seed"] = derive_seed(seed, salt)
    return initializer.__class__.from_config(config)


def clone_initializers(kwargs: dict, salt: str) -> dict:
    """Copy of a layer's keyword arguments with every `*initializer` entry
    cloned for the layer named by `salt` (e.g. one Transformer block)."""
    return {
        key: clone_initializer(value, salt) if key.endswith("initializer") and value is not None else value
        for key, value in kwargs.items()
    }
