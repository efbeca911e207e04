"""Shared argument handling for the finding scripts: which run, where figures go."""

import argparse
from pathlib import Path

import interp


def parse(description: str) -> tuple[interp.Run, Path]:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("run", nargs="?", default="checkpoints/demo", help="run folder (default: the demo)")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return interp.Run.open(args.run), out


def row(name: str, ours: str, paper: str) -> str:
    return f"  {name:<44} ours: {ours:<22} paper: {paper}"


def parse_sweep(description: str, default: str):
    """A sweep folder (default: where its tiny preset's README command writes it) and the figure folder."""
    from interp.sweeps.sweep import Sweep

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("sweep", nargs="?", default=default, help=f"sweep folder (default: {default})")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    parser.add_argument("--y", default="tau_half", choices=["tau_half", "tau_window"], help="the plateau measure")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return Sweep.open(args.sweep), out, args.y


def status_line(sweep) -> str:
    table = sweep.table()
    counts = table["status"].value_counts().to_dict()
    damaged = f", {counts['damaged']} damaged (left out)" if counts.get("damaged") else ""
    return (f"{sweep.path}: {len(table)} runs, {counts.get('done', 0)} done, {counts.get('failed', 0)} failed"
            f"{damaged}, {int(table['censored'].fillna(False).sum())} censored")


def parse_paths(description: str, defaults: tuple[str, ...]):
    """Runs, sweeps or fork families (default: those of `defaults` that exist), --cached, and the output folder
    (made): (paths, the defaults not found, cached, out)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("paths", nargs="*", help="runs, sweeps or fork families (default: the demo and the tiny sweeps)")
    parser.add_argument("--cached", action="store_true", help="compute nothing: read the caches only")
    parser.add_argument("--out", default="out", help="folder for the HTML tables (default: out/)")
    args = parser.parse_args()
    paths = args.paths or [p for p in defaults if Path(p).is_dir()]
    missing = [p for p in defaults if not args.paths and not Path(p).is_dir()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return paths, missing, args.cached, out
