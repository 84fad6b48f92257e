"""Hugging Face Hub names: `"hf://org/name"` → a local checkpoint directory.

    checkpoint_path(path)     a directory as it is; "hf://org/name" → the snapshot folder of
                              that repository in the hub client's cache

The hub client, `huggingface_hub` (`pip install keras-tfm[hub]`), is imported only for hub
names. Its cache is the one every HuggingFace library shares:

    <cache>/models--org--name/blobs/<hash>                 file contents
    <cache>/models--org--name/refs/main                    the commit of the main branch
    <cache>/models--org--name/snapshots/<commit>/<file>    the files (links to blobs)

`<cache>` is `HF_HUB_CACHE` (default `~/.cache/huggingface/hub`). Online, the files a
checkpoint load reads (`ALLOW_PATTERNS`: config and tokenizer JSON, safetensors weights, text
vocabularies) are downloaded into it, once; offline (`HF_HUB_OFFLINE=1`, or
`local_files_only=True`) the cache alone is read. Both variables are read at each call, so
they may be set after `huggingface_hub` was imported.
"""

import os
import re

from keras_tfm.checkpoints.files import MissingCheckpointFile, check_directory
from keras_tfm.checks import check_bool

#: The prefix of a Hugging Face Hub name (`"hf://org/name"`).
HUB_PREFIX = "hf://"

#: The repository files a checkpoint load may read (the hub client's patterns; `*` matches `/` too).
ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.txt")
#: A repository id: "name" or "org/name" (letters, digits, "-", "_", ".").
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?")
_TRUE = ("1", "ON", "YES", "TRUE")
INSTALL_HINT = "pip install keras-tfm[hub]"


def is_hub_name(path) -> bool:
    """Whether `path` is a `"hf://..."` hub name."""
    return isinstance(path, str) and path.startswith(HUB_PREFIX)


def hub_offline() -> bool:
    """`HF_HUB_OFFLINE` as the hub client reads it ("1", "ON", "YES", "TRUE"), read now."""
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is not None:
        return value.strip().upper() in _TRUE
    import huggingface_hub.constants

    return bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def _import_hub(name):
    try:
        import huggingface_hub
    except ImportError:
        raise ImportError(
            f"{name!r}: loading a Hugging Face Hub name needs the `huggingface_hub` package: "
            f"`{INSTALL_HINT}` (or pass a local checkpoint directory)."
        ) from None
    return huggingface_hub


def _first_line(error):
    return (str(error).splitlines() or [type(error).__name__])[0]


def _repo_id(name):
    repo_id = name[len(HUB_PREFIX) :]
    if not _REPO_ID.fullmatch(repo_id) or ".." in repo_id or len(repo_id) > 96:
        raise ValueError(
            f"`path` {name!r} is not a Hugging Face Hub name; expected 'hf://org/name' (or 'hf://name'): "
            "letters, digits, '-', '_' and '.', at most 96 characters."
        )
    return repo_id


def checkpoint_path(path, *, cache_dir=None, local_files_only: bool | None = None) -> str:
    """The local checkpoint directory of a directory or of an `"hf://org/name"` hub name.

    Args:
        path: a checkpoint directory (str or os.PathLike), or `"hf://org/name"`.
        cache_dir: the hub cache (default `HF_HUB_CACHE`, else the client's default).
        local_files_only: read the cache only (default: `HF_HUB_OFFLINE`).

    Returns:
        The directory: `path` itself, or the repository's snapshot folder in the cache.

    Raises:
        MissingCheckpointFile: (a ValueError and a FileNotFoundError) `path` is not a
            directory; or the repository is neither in the cache nor downloadable (offline,
            no connection, no such repository, or private), naming the repository and the cache.
        ValueError: a malformed hub name.
        ImportError: a hub name without `huggingface_hub` installed.
    """
    if not is_hub_name(path):
        if isinstance(path, str) and not os.path.exists(path) and _REPO_ID.fullmatch(path) and "/" in path:
            raise MissingCheckpointFile(
                f"Checkpoint directory {path!r} does not exist; for the Hugging Face Hub repository of "
                f"that name write 'hf://{path}'."
            )
        return check_directory(path)
    repo_id = _repo_id(path)
    hub = _import_hub(path)
    offline = hub_offline() if local_files_only is None else check_bool("local_files_only", local_files_only)
    cache_dir = cache_dir or os.environ.get("HF_HUB_CACHE") or None
    import huggingface_hub.constants
    from huggingface_hub.utils import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    cache = os.fspath(cache_dir) if cache_dir else huggingface_hub.constants.HF_HUB_CACHE

    try:
        directory = hub.snapshot_download(
            repo_id, cache_dir=cache_dir, local_files_only=offline, allow_patterns=list(ALLOW_PATTERNS)
        )
    except LocalEntryNotFoundError as error:
        if offline:
            reason = (
                "downloads are off (HF_HUB_OFFLINE / local_files_only): download it once online "
                f"(`huggingface-cli download {repo_id}`) or pass a local checkpoint directory"
            )
        else:
            reason = f"the Hub could not be reached ({type(error).__name__}: {_first_line(error)})"
        raise MissingCheckpointFile(
            f"{path!r}: the repository {repo_id!r} is not in the Hugging Face cache {cache!r} and {reason}."
        ) from None
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise MissingCheckpointFile(
            f"{path!r}: the Hugging Face Hub has no repository {repo_id!r} that this session may read "
            f"(it does not exist, or it is private or gated: log in with `huggingface-cli login`); "
            f"the Hub said: {_first_line(error)}"
        ) from None
    return check_directory(directory)
