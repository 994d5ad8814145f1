"""The ``speechlab`` console script.

Each area contributes its subcommands through an ``add_commands(subparsers)`` function in its
own ``commands.py``; they are imported here by name (no registry), so go-to-definition reaches
every command. A command is a function ``run(args) -> int`` stored as ``args.func``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from speechlab.errors import SpeechlabError

# Modules that contribute subcommands, in the order they appear in --help. Listed by name so a
# broken optional area cannot take the whole CLI down; a missing module is a bug, and its
# import error is shown when that command is asked for.
COMMAND_MODULES = (
    "speechlab.data.commands",
    "speechlab.audio.commands",
    "speechlab.train.commands",
    "speechlab.metrics.commands",
    "speechlab.report.commands",
    "speechlab.asr.rnnt.commands",
    "speechlab.reproduce",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="speechlab", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            continue
        module.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SpeechlabError as e:
        print(f"speechlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("speechlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
