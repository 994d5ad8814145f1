"""Writing files safely: atomic writes (a killed process leaves the old file or none, never half
of one), directories removed when their work fails, temporary directories named by their
process (a killed one's removed by the next), the one ``--overwrite`` rule, locks, JSON."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from speechlab.errors import DataError, SpeechlabError


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str = "", durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only on success.

    Readers never see a half-written file, and a crash leaves at most a ``.tmp`` file behind
    that is removed here when the body raises. An OS error (disk full, read-only directory,
    ``path`` being a directory) is re-raised naming ``path`` rather than the temporary name;
    torch's failed writes (``RuntimeError`` from ``inline_container.cc``) become the
    ``OSError`` they stand for.

    ``suffix``: the temporary name ends with it, for writers that pick a format by the file
    name (lhotse's ``.jsonl.gz``). ``durable=False`` skips the fsync before the rename, for the
    many small files of a build that is redone from scratch after a crash anyway.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file", str(path))
    if path.exists() and not path.is_file():
        # A device or pipe (/dev/stdout): nothing to replace atomically, write to it directly.
        try:
            yield path
        except OSError as e:
            raise naming(e, path) from None
        return
    if path.is_symlink():
        path = path.resolve()  # replace the file the link points to; the link stays
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}",
                                   dir=path.parent)
    except OSError as e:
        raise naming(e, path) from None
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates 0600; give the file the mode a plain open() would (0666 minus umask).
    os.chmod(tmp_path, 0o666 & ~current_umask())
    try:
        yield tmp_path
        if durable:
            with open(tmp_path, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException as e:
        # Before the temporary file is removed: its size is what filled the disk.
        err = _write_failure(e, path)
        tmp_path.unlink(missing_ok=True)
        if err is not None:
            raise err from None
        if isinstance(e, OSError):
            raise naming(e, path) from None
        raise

# torch.save reports a failed write (disk full, quota, I/O error) as a RuntimeError from its
# zip writer, e.g. "[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598".
_TORCH_WRITE_FAILED = ("inline_container.cc", "PytorchStreamWriter")


def is_torch_write_failure(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and any(s in str(e) for s in _TORCH_WRITE_FAILED)


def _write_failure(e: BaseException, path: Path) -> OSError | None:
    """The OSError behind torch's write failure while writing ``path``, else None."""
    if not is_torch_write_failure(e):
        return None
    try:
        st = os.statvfs(path.parent)
        # root may write into the reserved blocks, so it runs out only when none are free.
        free = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize
    except OSError:
        free = None
    if free is not None and free < 1 << 20:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return OSError(errno.EIO, f"write failed ({str(e).splitlines()[0]})", str(path))


def naming(e: OSError, path: str | Path) -> OSError:
    """``e`` as an error about ``path`` (the user's path) when it names no file or only a
    temporary one (``.NAME.XXXX.tmp``, ``.tmp-...``); ``e`` itself otherwise."""
    if e.filename is not None and not any(_is_temporary(p) for p in Path(e.filename).parts):
        return e
    # OSError(errno, ...) builds the matching subclass (IsADirectoryError, PermissionError...).
    return OSError(e.errno, e.strerror, str(path))


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and (".tmp" in name)


@contextlib.contextmanager
def removed_on_failure(root: str | Path) -> Iterator[list[Path]]:
    """Yield a list for the body to record each file it writes under ``root`` (before writing
    it). If the body raises (a full disk, a bad input found late, Ctrl-C) those files are
    deleted, then the directories under ``root`` that this leaves empty, and ``root`` itself
    if it did not exist before and is empty: a failed command removes what it created. (A
    killed one cannot; its rerun cleans up.)"""
    root = Path(root)
    root_was_there = root.exists()
    made: list[Path] = []
    try:
        yield made
    except BaseException:
        dirs: set[Path] = set()
        for p in made:
            with contextlib.suppress(OSError):
                p.unlink(missing_ok=True)
            dirs.update(d for d in p.parents if d.is_relative_to(root) and d != root)
        for d in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
            with contextlib.suppress(OSError):
                d.rmdir()  # only when empty: files that were there before stay
        if not root_was_there:
            with contextlib.suppress(OSError):
                root.rmdir()
        raise


def cache_dir(name: str) -> Path:
    """This user's cache for ``name`` (things rebuilt from a package, kept to load it faster
    next time): ``$SPEECHLAB_CACHE/name``, else ``$XDG_CACHE_HOME/speechlab/name``, else
    ``~/.cache/speechlab/name``; created if missing."""
    root = os.environ.get("SPEECHLAB_CACHE")
    if not root:
        root = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "speechlab")
    path = Path(root) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def make_temp_dir(parent: str | Path, prefix: str) -> Path:
    """A new directory ``parent/.{prefix}-{pid}-XXXXXXXX.tmp`` for work that is renamed into
    place when complete. First removes such directories of ``prefix`` left by processes that
    no longer exist (killed runs); those of live processes (a concurrent run) are left alone."""
    parent = Path(parent)
    for d in parent.glob(f".{glob.escape(prefix)}-*.tmp"):
        m = re.fullmatch(rf"\.{re.escape(prefix)}-(\d+)-[^-]*\.tmp", d.name)
        if m is not None and d.is_dir() and not _alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)
    made = Path(tempfile.mkdtemp(prefix=f".{prefix}-{os.getpid()}-", suffix=".tmp", dir=parent))
    # mkdtemp creates 0700; once renamed into place (a package, a corpus split) the directory
    # must have the mode a plain mkdir gives (0777 minus umask), readable by a lab's group.
    os.chmod(made, 0o777 & ~current_umask())
    return made


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory named by this process's pid (``make_temp_dir`` in the system's
    temporary directory), removed on exit; one a killed process left is removed by the next
    that asks for the same ``prefix``."""
    made = make_temp_dir(Path(tempfile.gettempdir()), prefix)
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def check_output(path: str | Path, kind: str = "file") -> None:
    """Raise, before any work is done, the OSError that writing ``path`` would end with.

    ``kind`` is ``"file"`` or ``"dir"``. Checks that a file is not a directory (and a
    directory not a file), that no part of the path is a file, and that the deepest existing
    directory can be written to: by creating an unnamed temporary file in it, which leaves
    nothing behind and is refused on read-only file systems and immutable directories even
    to root.
    """
    path = Path(path)
    if path.exists():
        if kind == "file" and path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file", str(path))
        if kind == "dir" and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "is a file, expected a directory",
                                     str(path))
        if kind == "file" and not path.is_file():  # a device or pipe, written to directly
            if not os.access(path, os.W_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return
    base = path if kind == "dir" else path.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{base} is a file, not a directory",
                                 str(path))
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


# What a command's declared output (``args.outputs``) is, and so how the CLI guards it:
# "file" and "dir" are made whole by the command and replaced only with --overwrite (a directory
# counts as existing when it holds anything); "corpus" is a directory a command adds splits to
# (the command refuses to replace a split itself); "run" is a run directory that a rerun
# resumes; "cache" is a cache that is reused. The last three are only checked for writability.
OUTPUT_KINDS = ("file", "dir", "corpus", "run", "cache")
REPLACED_ONLY_WITH_OVERWRITE = ("file", "dir")


def refuse_existing(path: str | Path, kind: str, overwrite: bool, option: str = "--out") -> None:
    """The one rule for every command that writes: an existing output of ``kind`` "file" or
    "dir" (a directory holding anything) is replaced only with ``overwrite`` (``--overwrite``).
    Raises a DataError naming ``path`` and ``option`` otherwise; other kinds are left to the
    command (see :data:`OUTPUT_KINDS`)."""
    if overwrite or kind not in REPLACED_ONLY_WITH_OVERWRITE:
        return
    path = Path(path)
    if kind == "file" and path.is_file():  # a device (/dev/stdout) is written to, not replaced
        what = "file"
    elif kind == "dir" and path.is_dir() and any(path.iterdir()):
        what = "directory, not empty"
    else:
        return
    raise DataError(f"{option} {path} already exists ({what}); pass --overwrite to replace it, "
                    f"or give another {option}")


def current_umask() -> int:
    """The process umask (read by setting it and setting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_json(path: str | Path, what: str = "JSON file") -> Any:
    """The JSON document in ``path``; a DataError naming the file (and line) if it is missing,
    a directory, not UTF-8 or not valid JSON. ``what`` says what the file is, for the message."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: {what} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a {what}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: corrupt {what} (not UTF-8 text); rerun the command that "
                        "wrote it") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: corrupt {what} ({e.msg} at column {e.colno}); "
                        "rerun the command that wrote it") from None


@contextlib.contextmanager
def exclusive_dir(path: str | Path, what: str = "a run") -> Iterator[Path]:
    """Hold an exclusive lock on directory ``path`` (created if missing) while in the block.

    Two processes writing one run directory (say a restarted job while the old one still runs)
    would interleave checkpoints; the second gets a clear error instead. The lock is an
    ``flock`` on ``path/.lock``, so the kernel drops it when its holder dies, however it dies.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise SpeechlabError(f"{path} is in use by another process (pid {holder}) running "
                                 f"{what}; wait for it or stop it first") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        try:
            yield path
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the file ``path`` (created if missing) meanwhile: two
    processes building the same cache entry build it once instead of racing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def canonical_safetensors(path: str | Path) -> None:
    """Rewrite the JSON header of the safetensors file ``path`` in place with its keys sorted.

    safetensors writes its ``__metadata__`` entries in no fixed order, so the same weights
    saved twice could give two different files (a shipped package re-exported unchanged would
    show up as a new binary in git). Sorting changes neither the header's length nor the
    tensors' offsets, so only the header's bytes are rewritten."""
    with open(path, "r+b") as f:
        length = int.from_bytes(f.read(8), "little")
        raw = f.read(length)
        text = raw.rstrip(b" ")  # safetensors pads the header with spaces to 8-byte alignment
        canonical = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False).encode("utf-8")
        if len(canonical) != len(text):
            raise SpeechlabError(f"{path}: its safetensors header is not in the compact form "
                                 "this rewrite keeps the length of")
        if canonical != text:
            f.seek(8)
            f.write(canonical)
