#!/usr/bin/env bash
# The Python packages benchmarks/device_check.py needs on a lent GPU machine whose image lacks them, as wheels for
# its Python 3.12 (x86-64), fetched here with pip into .whl/ at the repository's root (kept out of git through
# .git/info/exclude). The machine reaches no registry: the run carries .whl and installs it into /tmp/site first
# (benchmarks/README.md, "A device checked end to end", gives the exact command).
#
# The image has torch, transformers, huggingface-hub, accelerate, pandas, numpy, scipy, einops, jaxtyping,
# safetensors, tqdm, pyarrow, xarray and msgpack. Missing there, at the versions this project's tests run with:
#   transformer-lens 3.9.0 and what it imports: better-abc, datasets, dill, multiprocess;
#   devinterp 2.0.1 (the LLC row; without it the row is skipped) and what it imports: pydantic (+ core, annotated-
#   types, typing-inspection, typing-extensions), zarr (+ numcodecs, donfig, google-crc32c).
# About 15 MB; the working tree and the wheels travel together within the tool's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
mkdir -p .whl
WHEELS=(
  transformer-lens==3.9.0 better-abc==0.0.3 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
  devinterp==2.0.1 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  typing-extensions==4.16.0 zarr==3.1.6 numcodecs==0.16.6 donfig==0.8.1.post1 google-crc32c==1.9.0
)
for wheel in "${WHEELS[@]}"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$wheel"
done
ls -1 .whl
du -sh .whl
