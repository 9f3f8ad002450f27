"""The ``flashtune`` command line (also ``python -m flashtune``).

Each subcommand lives in its own module of this package and exposes ``register(subparsers)``;
the table below is the whole list (no import-time registry).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import warnings

# subcommand name -> module; each is imported to build the parser (optuna and the database
# layer are imported only inside the run functions that need them).
SUBCOMMANDS = {
    "tune": "flashtune.cli.tune_cmd",
    "show": "flashtune.cli.show_cmd",
    "source": "flashtune.cli.source_cmd",
    "env": "flashtune.cli.env_cmd",
    "export": "flashtune.cli.export_cmd",
    "import": "flashtune.cli.import_cmd",
    "clear": "flashtune.cli.clear_cmd",
    "bench": "flashtune.cli.bench_cmd",
    "report": "flashtune.cli.report_cmd",
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too: add_subparsers makes them of this class), with
    a hint where a value that starts with '-' was taken for an option."""

    def error(self, message: str):
        # argparse reads a value that starts with '-' (--shape -4x5, --time-budget -1e3, a
        # path) as the next option unless it is a plain negative number, and then said only
        # "argument --shape: expected one argument", though the user gave one.
        where, _, what = message.partition(": ")
        if what == "expected one argument" and where.startswith("argument -"):
            option = where.removeprefix("argument ").split("/")[-1]
            message += f" (a value that starts with '-' goes after '=': {option}=VALUE)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="flashtune", description="Auto-tuned Triton softmax and attention kernels."
    )
    from .. import __version__

    # The first thing many users type; without it they were told "the following arguments
    # are required: COMMAND" (parse_known_args had set --version aside as unknown).
    parser.add_argument("--version", action="version", version=f"flashtune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in SUBCOMMANDS.values():
        importlib.import_module(module_name).register(sub)
    parser.set_defaults(subcommand_parsers=sub.choices)  # name -> that subcommand's parser
    return parser


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C at any point (torch's import while the parser is built, a database opening, a
    # tune's startup before its search): one line and the status of the shell's SIGINT
    # (128 + 2), not a KeyboardInterrupt traceback. A tune or bench stopped mid-run says what
    # it kept itself and returns its own status.
    name = "flashtune"
    started_at = time.monotonic()  # tune --total-time counts from here, imports included
    try:
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        args.started_at = started_at
        name = f"flashtune {args.command}"
        return _run(args, unknown)
    except KeyboardInterrupt:
        print(f"{name}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace, unknown: list[str]) -> int:
    if unknown:  # named by the subcommand's parser: "flashtune source: error: ..." and its usage
        args.subcommand_parsers[args.command].error(
            f"unrecognized arguments: {' '.join(unknown)}")
    # Our own warnings (e.g. skipped database rows) as one line each, without Python's source
    # echo; other libraries' warnings keep the standard form, which names their category.
    previous = warnings.formatwarning

    def one_line(message, category, *rest, **kwargs):
        if category.__module__.startswith("flashtune"):
            return f"flashtune {args.command}: warning: {message}\n"
        return previous(message, category, *rest, **kwargs)

    warnings.formatwarning = one_line
    try:
        if getattr(args, "db", None) is not None:  # every command that takes --db
            from .options import check_db_option

            check_db_option(args.db)  # before any work, as "--db: ...", not the API's "url: ..."
        return int(args.run(args) or 0)
    except BrokenPipeError:
        # The reader went away (`flashtune show | head`): stop quietly, as Unix tools do
        # (their status after SIGPIPE, 128 + 13), not "error: [Errno 32] Broken pipe".
        _silence_stdout()
        return 141
    except (ValueError, TypeError, OSError) as err:
        from ..cache.records import printable

        # spelled out: the text may quote a path or URL holding an escape sequence or newline
        print(f"flashtune {args.command}: error: {printable(str(err))}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = previous


def _silence_stdout() -> None:
    """Point stdout at the null device: Python flushes it again at exit, which would report
    the broken pipe a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (captured, replaced)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
