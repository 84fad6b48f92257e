"""Argument checks shared by all keras_tfm layers: each raises a ValueError or
TypeError that names the argument and the value it expected."""


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be a positive int; received {value!r} ({type(value).__name__}).")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int; received {value}.")
    return value


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


def check_rank(name, tensor, ranks):
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    rank = len(tensor.shape)
    if rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ValueError(f"`{name}` must have rank {want}; received shape {tuple(tensor.shape)} (rank {rank}).")


def check_last_dim(name, tensor, expected):
    got = tensor.shape[-1]
    if got is not None and expected is not None and got != expected:
        raise ValueError(f"`{name}` last dimension must be {expected}; received shape {tuple(tensor.shape)}.")
