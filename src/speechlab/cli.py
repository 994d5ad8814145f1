"""speechlab: speech recognition and synthesis, from training to a served model.

Each area contributes its subcommands through an ``add_commands(subparsers)`` function in its
own ``commands.py``, imported here by name: the shared areas, the model families of the
registry (:mod:`speechlab.families`), and the commands above them. A command is a function ``run(args) -> int`` stored as ``args.func``; it
declares the paths it writes as ``args.outputs`` (``{"out": "dir", "json": "file"}``, names of
``args`` attributes to a kind of :data:`speechlab.files.OUTPUT_KINDS`), which are checked
before it runs: each can be written, and an existing "file" or "dir" output is replaced only
with ``--overwrite``, an option every such command has (tests/test_cli_errors.py checks it).

Exit codes: 0 success; 2 a bad input, config or an operating-system fault (one line on stderr,
``speechlab: error: ...``, naming the file, line or utterance and what to do); 130 interrupted.
Every fault the user can act on is turned into that one line here, in :func:`fault_message`;
anything else is a bug in speechlab and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from speechlab.devices import apply_device_option
from speechlab.errors import SpeechlabError
from speechlab.files import check_output, is_torch_write_failure, refuse_existing

# Modules that contribute subcommands, in the order they appear in --help: the shared areas,
# then each registered family's (speechlab.families), then the commands above every family.
CORE_COMMAND_MODULES = (
    "speechlab.data.commands",
    "speechlab.audio.commands",
    "speechlab.metrics.commands",
    "speechlab.report.commands",
)
TOP_COMMAND_MODULES = (
    "speechlab.inference",
    "speechlab.calibrate",
    "speechlab.shipping",
    "speechlab.papers",
    "speechlab.serve.commands",
)


def command_modules() -> tuple[str, ...]:
    from speechlab.families import command_modules as of_families

    return (*CORE_COMMAND_MODULES, *of_families(), *TOP_COMMAND_MODULES)


# What a rerun after a fault does; said with every "disk full" message.
RERUN = "nothing half-written was kept; a training run resumes from its last checkpoint"

# errno -> (what happened, what to do), for the one-line message about ``path``.
OS_ERRORS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on device while writing {path}", f"free space and rerun ({RERUN})"),
    errno.EDQUOT: ("disk quota exceeded while writing {path}", f"free space and rerun ({RERUN})"),
    errno.EACCES: ("permission denied: {path}",
                   "choose a location you may write to (or read), or fix its permissions"),
    errno.EPERM: ("operation not permitted on {path}",
                  "choose another location, or fix its permissions or attributes"),
    errno.EROFS: ("{path} is on a read-only file system", "write to another location"),
    errno.EISDIR: ("{path} is a directory", "give the path of a file"),
    errno.ENOTDIR: ("{path} is not a directory (it, or a directory above it, is a file)",
                    "fix the path, or move the file away"),
    errno.ENOENT: ("{path} does not exist", "check the path"),
    errno.EEXIST: ("{path} already exists and is not a directory",
                   "give a directory path, or move the file away"),
    errno.ENAMETOOLONG: ("file name too long: {path}", "use a shorter path"),
    errno.EMFILE: ("too many open files ({path})", "raise the limit (ulimit -n) and rerun"),
    errno.EIO: ("input/output error on {path}", f"check the disk, then rerun ({RERUN})"),
}


def os_error_message(e: OSError) -> str:
    """One line for an OSError: what happened to which path, and what to do."""
    path = e.filename if e.filename is not None else "a file"
    happened, todo = OS_ERRORS.get(e.errno, ("{path}: " + (e.strerror or str(e)),
                                             "check the path and rerun"))
    detail = f" ({e.strerror})" if e.errno == errno.EIO and e.strerror else ""
    return f"{happened.format(path=path)}{detail}; {todo}"


def fault_message(e: BaseException) -> str | None:
    """The one-line message for a fault of the input or the machine; None for a bug."""
    if isinstance(e, SpeechlabError):
        return str(e)
    if isinstance(e, OSError):
        return os_error_message(e)
    if is_torch_write_failure(e):
        # Raised outside utils.atomic_path (which names the file): no path to give.
        return (f"writing a checkpoint or tensor file failed ({str(e).splitlines()[0]}); the "
                f"disk is probably full: free space and rerun ({RERUN})")
    if isinstance(e, json.JSONDecodeError):
        return (f"a JSON file is corrupt ({e.msg} at line {e.lineno}, column {e.colno}); "
                "rewrite it by rerunning the command that made it")
    if isinstance(e, MemoryError):
        return "out of memory; use smaller inputs or batches, or a machine with more memory"
    return None


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line like every other error (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("speechlab").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"speechlab: error: {where}{message}; see '{self.prog} --help'\n")


def _new_dirs(args: argparse.Namespace) -> list[Path]:
    """Directories a command's declared outputs would create (deepest first)."""
    new: list[Path] = []
    for name, kind in (getattr(args, "outputs", None) or {}).items():
        path = getattr(args, name, None)
        if path is None:
            continue
        d = Path(path).parent if kind == "file" else Path(path)
        while not d.exists() and d != d.parent:
            new.append(d)
            d = d.parent
    return sorted(set(new), key=lambda p: len(p.parts), reverse=True)


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:
        try:
            d.rmdir()  # only if empty: a failed command leaves no directory it made for nothing
        except OSError:
            pass


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="speechlab", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules():
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        # Options no parser knows are kept for the commands that take a paper's own switches
        # (`reproduce salad --no-stateful`); for every other command they are an error, as
        # parse_args would make them.
        args, unknown = parser.parse_known_args(argv)
        if unknown and not getattr(args, "accepts_switches", False):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.switches = unknown
    except SystemExit as e:  # --help (0) or a usage error (2, already printed)
        return e.code if isinstance(e.code, int) else 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    new_dirs = _new_dirs(args)
    try:
        apply_device_option(args)
        for name, kind in (getattr(args, "outputs", None) or {}).items():
            if getattr(args, name, None) is not None:
                check_output(getattr(args, name), "file" if kind == "file" else "dir")
                refuse_existing(getattr(args, name), kind, getattr(args, "overwrite", False),
                                "--" + name.replace("_", "-"))
        return int(args.func(args) or 0)
    except KeyboardInterrupt as e:
        _remove_empty(new_dirs)
        # A training stopped by a signal says where it stopped (rerun the command to resume).
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"speechlab: interrupted{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # The reader of our output stopped (`speechlab ctc topology ... | head`): not a fault.
        # Point stdout at /dev/null so that flushing it at exit does not fail again.
        _remove_empty(new_dirs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        _remove_empty(new_dirs)
        message = fault_message(e)
        if message is None:
            raise
        print(f"speechlab: error: {' '.join(message.split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
