"""Shared argument handling for the finding scripts: which run, where figures go. The scripts are user commands:
bad input is one line on stderr and exit status 2, as the CLI's (`one_line_errors`), and nothing is written."""

import argparse
import sys
from pathlib import Path

import interp


def one_line_errors(script: str) -> None:
    """Make an InterpError (bad input: a missing folder, a run where a sweep is wanted, ...) end `script` with one
    line and exit status 2, never a traceback."""
    from interp.errors import InterpError

    previous = sys.excepthook

    def hook(kind, value, tb):
        if issubclass(kind, InterpError):
            print(f"{script}: error: {value}", file=sys.stderr)
            sys.exit(2)  # in an excepthook: the interpreter then exits with this status
        previous(kind, value, tb)

    sys.excepthook = hook


def parser_of(description: str) -> argparse.ArgumentParser:
    """argparse with the CLI's one-line usage errors (exit 2)."""
    from interp.cli import _Parser

    return _Parser(description=description, prog=Path(sys.argv[0]).name)


def out_folder(text: str) -> Path:
    """The figures' folder: made if missing; a file there is refused (one line)."""
    from interp.errors import InterpError

    out = Path(text)
    if out.exists() and not out.is_dir():
        raise InterpError(f"--out {out} is a file; give a folder for the figures")
    out.mkdir(parents=True, exist_ok=True)
    return out


def parse(description: str) -> tuple[interp.Run, Path]:
    one_line_errors(Path(sys.argv[0]).name)
    parser = parser_of(description)
    parser.add_argument("run", nargs="?", default="checkpoints/demo", help="run folder (default: the demo)")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    args = parser.parse_args()
    run = interp.Run.open(args.run)  # before anything is written
    return run, out_folder(args.out)


def row(name: str, ours: str, paper: str) -> str:
    return f"  {name:<44} ours: {ours:<22} paper: {paper}"


def parse_sweep(description: str, default: str, with_y: bool = True):
    """A sweep folder (default: where its tiny preset's README command writes it), the figure folder and (where the
    script reads one: `with_y`) the plateau measure; bad input one line, exit 2."""
    from interp.sweeps.sweep import Sweep

    one_line_errors(Path(sys.argv[0]).name)
    parser = parser_of(description)
    parser.add_argument("sweep", nargs="?", default=default, help=f"sweep folder (default: {default})")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    if with_y:
        parser.add_argument("--y", default="tau_half", choices=["tau_half", "tau_window"], help="the plateau measure")
    args = parser.parse_args()
    sweep = Sweep.open(args.sweep)  # before anything is written
    return sweep, out_folder(args.out), getattr(args, "y", None)


def status_line(sweep) -> str:
    table = sweep.table()
    counts = table["status"].value_counts().to_dict()
    damaged = f", {counts['damaged']} damaged (left out)" if counts.get("damaged") else ""
    return (f"{sweep.path}: {len(table)} runs, {counts.get('done', 0)} done, {counts.get('failed', 0)} failed"
            f"{damaged}, {int(table['censored'].fillna(False).sum())} censored")


def parse_paths(description: str, defaults: tuple[str, ...]):
    """Runs, sweeps or fork families (default: those of `defaults` that exist), --cached, and the output folder
    (made): (paths, the defaults not found, cached, out)."""
    one_line_errors(Path(sys.argv[0]).name)
    parser = parser_of(description)
    parser.add_argument("paths", nargs="*", help="runs, sweeps or fork families (default: the demo and the tiny sweeps)")
    parser.add_argument("--cached", action="store_true", help="compute nothing: read the caches only")
    parser.add_argument("--out", default="out", help="folder for the HTML tables (default: out/)")
    args = parser.parse_args()
    paths = args.paths or [p for p in defaults if Path(p).is_dir()]
    missing = [p for p in defaults if not args.paths and not Path(p).is_dir()]
    return paths, missing, args.cached, out_folder(args.out)
