#!/usr/bin/env bash
# TransformerLens 4 beside the default 3.9 (issue 35): makes (or reuses) a virtual environment OUTSIDE the
# repository with TL 4 (constraints/tl4.txt) and interp installed editable, then runs there the unit tier and
# the cross-version equality tests (tests/integration/test_tl_versions.py, which compare against the README's
# TL 3.9 .venv). Part of the slow tier (tests/integration/test_tl_versions.py::test_the_tl4_environment_script).
#   bash tests/tl4_env.sh [PYTEST ARGS...]     e.g. bash tests/tl4_env.sh -k model_versions
# INTERP_TL4_VENV: where the venv lives (default ~/.cache/interp/tl4-venv); INTERP_TL3_PYTHON: the TL 3.9
# interpreter the equality tests compare against (default .venv/bin/python, made by the README's commands).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${INTERP_TL4_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/interp/tl4-venv}"
tl3="${INTERP_TL3_PYTHON:-$PWD/.venv/bin/python}"
if [ ! -x "$tl3" ]; then
  echo "tl4_env: no TL 3.9 interpreter at $tl3 to compare against; run the README's test command first" >&2
  exit 2
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import transformer_lens, interp, devinterp" 2>/dev/null; then
  echo "tl4_env: making $venv (torch 2.13.0 CPU, TransformerLens per constraints/tl4.txt; about 2 min)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch==2.13.0
  "$venv/bin/pip" install -q -e '.[dev,landscape]' -c constraints/tl4.txt  # landscape: the LLC compared too
fi
"$venv/bin/python" -c "import importlib.metadata as m; print('tl4_env: TransformerLens', m.version('transformer-lens'))"
export INTERP_TL3_PYTHON="$tl3"
status=0
run() {  # pytest's exit 5 (no test selected, e.g. by a -k given here) is no failure
  local rc=0
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=$rc; fi
}
run tests/unit "$@"
run -m slow tests/integration/test_tl_versions.py -k "not environment_script" "$@"
exit $status
