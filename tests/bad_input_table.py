"""The machinery shared by the bad-input tables (`tests/test_bad_input*.py`).

Each table file makes one `Table`, registers its cases with `@table.case(id, exc, match)` (a function
of the file's `env` fixture) or `table.simple(id, exc, match, fn)` (a function of nothing), and runs
them all with one parametrised test that calls `run_case`. A case expects `exc` with a message
matching the regular expression `match`; a case whose documented behaviour is a recovery has
`exc=RECOVERS` and asserts the recovery itself.
"""

import contextlib
import re
import signal

import pytest

#: `exc` of a case whose documented behaviour is a recovery it asserts itself.
RECOVERS = None


class Table:
    """The cases of one table, as `pytest.param(fn, exc, match, id=...)` in `cases`."""

    def __init__(self):
        self.cases = []

    def case(self, case_id, exc, match=None):
        """Registers `fn(env)` as a case that must raise `exc` matching `match`."""

        def register(fn):
            self.cases.append(pytest.param(fn, exc, match, id=case_id))
            return fn

        return register

    def simple(self, case_id, exc, match, fn):
        """Registers `fn()` (no fixture) as a case that must raise `exc` matching `match`."""
        self.cases.append(pytest.param(lambda env: fn(), exc, match, id=case_id))

    def assert_ids_unique(self):
        ids = [p.id for p in self.cases]
        duplicated = sorted({i for i in ids if ids.count(i) > 1})
        assert not duplicated, f"duplicate case ids: {duplicated}"


def run_case(env, fn, exc, match):
    """Runs one case: `fn(env)` raises `exc` with a message matching `match` (or recovers)."""
    if exc is RECOVERS:
        fn(env)
        return
    with pytest.raises(exc) as info:
        fn(env)
    message = str(info.value)
    assert re.search(match, message, re.S), f"message does not match {match!r}:\n{message[:3000]}"


@contextlib.contextmanager
def interactive_sigint():
    """SIGINT raises KeyboardInterrupt inside the block, as in an interactive Python process, also
    where the suite was started with SIGINT ignored (a background job of a non-interactive shell,
    whose children inherit SIG_IGN and so never install Python's handler); restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
