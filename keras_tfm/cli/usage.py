"""The one-line usage error of `keras-tfm`: a bad value ends with `PROG: error: --flag ...` on stderr and
exit status 2, nothing written. argparse's own errors (an unknown flag, a bad type) are one line too
(`OneLineParser`), with the hint `PROG --help`.

A handler raises `UsageError(flag, message)`, or lets through the ValueError / TypeError /
FileNotFoundError of a recipe or library function whose message names an argument in backquotes
(`` `max_length` must be a positive int ``): `call` reports those whose names are arguments of the
command, spelled as on the command line (`--max-length must be a positive int`). Any other exception
is a bug and propagates with its traceback. A write that found no room (a full disk, a file-size limit:
`keras_tfm.atomic_files.NoSpaceError`, or any OSError of `NO_SPACE`) is one line too, exit status 2:
the file, the room it needed and the room free (nothing half-written is left: writes go to temporaries).
Ctrl-C is one line too, `PROG: interrupted (Ctrl-C)`, exit status 130 (`INTERRUPTED`).

A Python warning raised while a command runs (e.g. "weights not in the checkpoint" when fine-tuning a
classifier whose head is new) is printed as one line, `PROG: warning: MESSAGE`, without Python's file,
line number and source line (`warnings_as_messages`); library users still get the `warnings.warn`.
"""

import argparse
import contextlib
import re
import sys
import warnings

from keras_tfm.atomic_files import NO_SPACE, NoSpaceError, no_space_message
from keras_tfm.generation import compiled

_NAME = re.compile(r"`(\w+)`")


class OneLineParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose errors are one line: `PROG: error: MESSAGE (PROG --help lists the
    options)`, exit status 2, without the usage block argparse prints first. Its subparsers are of the same
    class (argparse makes them with the parent's class)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


class UsageError(ValueError):
    """A bad command-line value: reported as one line naming `flag` (None: the message alone), exit 2."""

    def __init__(self, flag, message):
        super().__init__(f"{flag}: {message}" if flag else message)
        self.flag = flag


def flag(name):
    """The command-line spelling of argument `name`: `max_length` → `--max-length`."""
    return "--" + name.replace("_", "-")


def flags_of(parser):
    """{argument name: its spelling} of every argument of `parser` (`--max-length`, or a positional's
    metavar)."""
    spellings = {}
    for action in parser._actions:
        if action.dest == "help":
            continue
        long = [s for s in action.option_strings if s.startswith("--") and not s.startswith("--no-")]
        spellings[action.dest] = long[0] if long else (action.metavar or action.dest).upper()
    return spellings


def from_error(error, flags):
    """The UsageError of `error` when its message names arguments in `flags` (in backquotes), else None.

    The names become their flags; only the first line of the message is kept (one line on stderr).
    """
    lines = str(error).strip().splitlines()
    message = lines[0] if lines else ""
    if not any(name in flags for name in _NAME.findall(message)):
        return None
    return UsageError(None, _NAME.sub(lambda m: flags.get(m.group(1), m.group(0)), message))


def report(prog, error):
    """Prints `error` as one line after `prog`; returns the exit status 2."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


#: The exit status of a command stopped by Ctrl-C (SIGINT): 128 + 2, as shells report it.
INTERRUPTED = 130


def call(prog, function, flags):
    """`function()`'s exit status (None: 0), or 2 after one line on stderr for a UsageError or an
    exception naming one of the command's arguments (`flags`, see `flags_of`), or `INTERRUPTED` after one
    line for Ctrl-C (the `KeyboardInterrupt`'s message when it has one, e.g. where a training run can
    resume; nothing half-written is left: writes go to temporaries)."""
    try:
        return int(function() or 0)
    except KeyboardInterrupt as error:
        print(f"{prog}: interrupted (Ctrl-C){': ' + str(error) if str(error) else ''}", file=sys.stderr)
        compiled.set_exit_status(INTERRUPTED)  # should an abandoned generation call end the process
        return INTERRUPTED
    except (UsageError, NoSpaceError) as error:
        return report(prog, error)
    except (ValueError, TypeError, FileNotFoundError) as error:
        usage = from_error(error, flags)
        if usage is None:
            raise
        return report(prog, usage)
    except OSError as error:
        if error.errno not in NO_SPACE:
            raise
        return report(prog, no_space_message(error, error.filename or "a file"))


@contextlib.contextmanager
def warnings_as_messages(prog):
    """Inside the block, a Python warning that the filters let through prints as one line on stderr,
    `PROG: warning: MESSAGE` (Python's own format adds the file, the line number and the source line).
    The filters are unchanged; the previous display is restored afterwards."""

    def show(message, category, filename, lineno, file=None, line=None):
        try:
            print(f"{prog}: warning: {str(message).strip()}", file=sys.stderr if file is None else file)
        except (OSError, ValueError):  # a closed stream, as Python's own display
            pass

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def set_handler(parser, handler, start_devices=True):
    """Makes `handler(args)` the command of `parser` (call last, once every argument is added).

    Args:
        handler: called with the parsed arguments; returns the exit status (None: 0).
        start_devices: False when the handler configures devices itself (logical CPU devices must be
            set before TensorFlow starts them).
    """
    parser.set_defaults(
        _handler=handler, _prog=parser.prog, _flags=flags_of(parser), _start_devices=start_devices
    )
    return parser


def run(args):
    """Runs the handler `set_handler` stored in the parsed `args` (warnings as one-line messages);
    returns the exit status."""
    with warnings_as_messages(args._prog):
        return call(args._prog, lambda: args._handler(args), args._flags)
