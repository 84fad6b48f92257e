"""Atomic writes: a temporary name in the same folder, then a rename; stale temporaries are cleaned.

    atomic_write_text(path, text)           one file: temporary file, fsync, `os.replace`
    atomic_write_bytes(path, data)          the same for bytes (a `.tflite` model)
    atomic_directory(path, overwrite)       a directory written under a temporary name, renamed into place
    temporary_directory(target)             `.NAME.tmp-PID@HOST-XXXX` beside `target` (mkdtemp)
    remove_stale_temporaries(folder, name)  removes the temporaries of writers that no longer run
    write_guard(target, needed)             a full disk / file-size limit → `NoSpaceError`, one line

A writer killed before its rename (SIGKILL, power loss) leaves its temporary folder behind. Its name
records the writer's process id and host, so the next write to the same target removes it when that
process is gone; the temporary of a writer that still runs (or of another host) is never touched.
"""

import contextlib
import errno
import os
import re
import shutil
import socket
import tempfile

#: A temporary of this module, `.NAME.tmp-PID@HOST-XXXX`, or `.NAME.old-PID@HOST-XXXX` (an old
#: directory moved aside by `atomic_directory`).
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)@(?P<host>.+)-[A-Za-z0-9_]+$")


def fsync_dir(path):
    """Flushes a directory's entries to disk (a rename inside it survives a crash); a no-op where
    directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def fsync_file(path):
    """Flushes a file's contents to disk."""
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def atomic_write_text(path, text):
    """Writes `text` to `path` atomically: temporary file in the same folder, fsync, `os.replace`."""
    _atomic_write(path, text, "w")


def atomic_write_bytes(path, data):
    """Writes the bytes `data` to `path` atomically, as `atomic_write_text`."""
    _atomic_write(path, data, "wb")


def _atomic_write(path, content, mode):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, mode) as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    fsync_dir(folder)


def _writer():
    return f"{os.getpid()}@{socket.gethostname()}"


def temporary_directory(target, kind="tmp"):
    """A new empty directory `.NAME.KIND-PID@HOST-XXXX` beside `target` (NAME its base name, PID this
    process), mode 0700 (`publish` gives it the usual permissions)."""
    target = os.path.abspath(os.fspath(target))
    prefix = f".{os.path.basename(target)}.{kind}-{_writer()}-"
    return tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(target))


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    except OverflowError:
        return False
    return True


def remove_stale_temporaries(folder, name=None):
    """Removes the temporaries in `folder` left by writers that no longer run.

    A temporary (see `temporary_directory`) is stale when its process, on this host, has ended. Those
    of running processes and of other hosts are left alone. An old directory moved aside by
    `atomic_directory` is removed only once its target exists again (else it is the only copy).

    Args:
        folder: the folder holding the temporaries (a target's parent).
        name: only the temporaries of the target of this base name (None: of every target).

    Returns:
        The removed paths.
    """
    removed = []
    if not os.path.isdir(folder):
        return removed
    host = socket.gethostname()
    for entry in sorted(os.listdir(folder)):
        match = _TEMPORARY.match(entry)
        path = os.path.join(folder, entry)
        if not match or not os.path.isdir(path) or os.path.islink(path):
            continue
        target = match.group("name")
        if name is not None and target != name:
            continue
        if match.group("host") != host or _pid_alive(int(match.group("pid"))):
            continue
        if match.group("kind") == "old" and not os.path.exists(os.path.join(folder, target)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def publish(temp):
    """Gives the directory `temp` (mkdtemp's 0700) the permissions the umask gives a new directory."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temp, 0o777 & ~umask)


def replace_directory(temp, path):
    """Renames the finished directory `temp` to `path`, replacing an existing `path`: the old one is
    moved aside (`.NAME.old-PID@HOST-XXXX`), the new one renamed in, the old one deleted, so a reader
    sees the old or the new directory, never a mixture."""
    if not os.path.exists(path):
        os.rename(temp, path)
        return
    old = temporary_directory(path, kind="old")
    moved = os.path.join(old, os.path.basename(path))
    os.rename(path, moved)
    try:
        os.rename(temp, path)
    except BaseException:
        os.rename(moved, path)  # put the old directory back
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(path, overwrite=False, refuse=None):
    """Yields a temporary directory beside `path`; renames it to `path` when the block succeeds and
    removes it when the block raises.

    The stale temporaries of earlier writers of `path` (killed before their rename) are removed first
    (`remove_stale_temporaries`).

    Args:
        path: the directory to write.
        overwrite: replace an existing non-empty `path` (`replace_directory`).
        refuse: `refuse(path)` → an exception to raise instead of replacing an existing `path`
            (checked before the block and again before the rename). Default: a non-empty `path`
            without `overwrite` is a `FileExistsError`.

    Raises:
        FileNotFoundError: the parent directory does not exist.
        NotADirectoryError: `path` is a file.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"Cannot write {path!r}: the parent directory {parent!r} does not exist.")
    if refuse is None:

        def refuse(path):
            if not overwrite and os.path.isdir(path) and os.listdir(path):
                return FileExistsError(
                    f"{path!r} already exists and is not empty; pass overwrite=True to replace it."
                )
            return None

    def check():
        if os.path.exists(path) and not os.path.isdir(path):
            raise NotADirectoryError(f"Cannot write a directory at {path!r}: it is a file.")
        error = refuse(path) if os.path.exists(path) else None
        if error is not None:
            raise error

    check()
    remove_stale_temporaries(parent, os.path.basename(path))
    temp = temporary_directory(path)
    try:
        yield temp
        check()
        publish(temp)
        replace_directory(temp, path)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_dir(parent)


#: The errno values of a write that found no room: a full disk, a file past the size limit
#: (`ulimit -f`, RLIMIT_FSIZE), a full quota.
NO_SPACE = tuple(getattr(errno, name) for name in ("ENOSPC", "EFBIG", "EDQUOT") if hasattr(errno, name))


class NoSpaceError(OSError):
    """A write failed for lack of room (`NO_SPACE`); the message names the file, the space it needed
    and the space free. Nothing half-written is left (the writes go to temporaries)."""

    def __str__(self):
        return self.strerror


def _size(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000


def no_space_message(error, target, needed=None):
    """One line: `target` (the file or folder being written) could not be written, why, how much room it
    needed (`needed` bytes, when known) and how much is free."""
    parts = [f"cannot write {os.fspath(target)!r}: {error.strerror or error}"]
    if needed:
        parts.append(f"it needs about {_size(needed)}")
    folder = os.path.dirname(os.path.abspath(target))
    while folder and not os.path.exists(folder):
        folder = os.path.dirname(folder)
    try:
        parts.append(f"{_size(shutil.disk_usage(folder).free)} free on {folder!r}")
    except OSError:
        pass
    if error.errno == getattr(errno, "EFBIG", None):
        try:
            import resource

            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        except (ImportError, OSError, ValueError):
            limit = None
        if limit is not None and limit != getattr(resource, "RLIM_INFINITY", -1):
            parts.append(f"files are limited to {_size(limit)} (ulimit -f)")
    return "; ".join(parts) + "."


@contextlib.contextmanager
def write_guard(target, needed=None):
    """Turns an `OSError` of `NO_SPACE` raised in the block into a `NoSpaceError` whose one-line message
    names `target`, the room needed (`needed` bytes) and free (`no_space_message`)."""
    try:
        yield
    except NoSpaceError:
        raise
    except OSError as error:
        if error.errno not in NO_SPACE:
            raise
        raise NoSpaceError(error.errno, no_space_message(error, target, needed), os.fspath(target)) from error
