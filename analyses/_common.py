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
