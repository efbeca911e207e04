"""`interp import SRC --out RUN` and `interp.import_run`: a run made elsewhere, or a folder of the author's eta-sweep
runs (imported as one interp sweep), becomes an interp run (or sweep) folder (docs/import.md).

One run is `interp.imports.writer.import_one`; a folder of eta-sweep runs is a sweep whose points are the runs' specs
(`SweepSpec` with explicit points over the fields in which they differ), each run imported into the point's folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from interp.errors import InterpError
from interp.imports.source import FORMATS, detect
from interp.imports.writer import ImportResult, check_places, import_one, read_source, with_context


def import_run(src, out, fmt: str | None = None, *, replace: bool = False, spec_file=None, version: int | None = None,
               ignore: tuple[str, ...] = (), progress: bool = True) -> ImportResult:
    """Import the run (or eta-sweep folder) at `src` into the new folder `out` (module docstring). `fmt` forces the
    format (FORMATS); `spec_file` a TransformerLens series' spec; `version` the author's generator's version;
    `ignore` config fields the user says have no effect."""
    src, out = Path(src), Path(out)
    if fmt is not None and fmt not in FORMATS:
        raise InterpError(f"--format {fmt!r}; allowed: {', '.join(FORMATS)}")
    if version is not None and version not in (1, 2, 3, 4, 5):
        raise InterpError(f"--generator-version {version}: the author's generator has versions 1 to 5")
    found = detect(src)
    fmt = fmt or found
    check_places(src, out)
    if fmt == "synass-eta-sweep":
        return _import_sweep(src, out, replace, version, ignore, progress)
    source = read_source(src, fmt, spec_file, version, ignore)
    return import_one(source, out, replace, progress)


# ---------------------------------------------------------------------------- a folder of eta-sweep runs
def _import_sweep(src: Path, out: Path, replace: bool, version, ignore, progress: bool) -> ImportResult:
    from interp.imports.synass import eta_runs, read_eta
    from interp.spec import dotted_names
    from interp.sweeps.sweep import SWEEP_FILE, Sweep, SweepSpec

    folders = eta_runs(src)
    sources = [read_eta(folder, version, ignore) for folder in folders]
    for source in sources:
        with_context(source)
    base = sources[0].spec
    varying = [n for n in dotted_names() if any(s.spec.get(n) != base.get(n) for s in sources)]
    spec = SweepSpec(base=base, points=tuple({n: s.spec.get(n) for n in varying} for s in sources), name=src.name)
    names = [name for name, _, _ in spec.runs()]
    if out.exists() and (out / SWEEP_FILE).is_file():
        results = []
        for name, source in zip(names, sources):
            results.append(import_one(source, out / name, replace, progress))
        return ImportResult(out, "synass-eta-sweep", runs=results, unchanged=all(r.unchanged for r in results),
                            notes=[f"{len(results)} runs"])
    if out.exists() and any(out.iterdir()):
        raise InterpError(f"{out} exists and is not an imported sweep; choose another --out")
    tmp = out.parent / f".{out.name}.importing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        Sweep.create(tmp, spec)
        results = [import_one(source, tmp / name, False, progress) for name, source in zip(names, sources)]
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for r, name in zip(results, names):
        r.path = out / name
    return ImportResult(out, "synass-eta-sweep", runs=results, notes=[f"{len(results)} runs over "
                                                                      f"{', '.join(varying) or 'nothing'}"])
