#!/usr/bin/env bash
# mk/deps.sh: installs what the project needs on Debian/Ubuntu (`make deps`; .ci/run calls it
# first). Idempotent: a second run installs nothing and only says so. Uses sudo when not root.
#
#   apt   a C toolchain; PyTorch (CPU), numpy, regex and matplotlib for the reference model, the
#         data scripts and the plots, all for the system Python /usr/bin/python3; LAPACKE for the
#         spectral diagnostics; Open MPI for the multi-GPU build of the CUDA trainer; clang with its
#         libFuzzer runtime for the fuzz targets (test/fuzz/); OpenBLAS (OpenMP build) for
#         `make USE_BLAS=1` (test/test_blas.sh).
#   pip   the pinned lists, for /usr/bin/python3 (each pin says why): mk/requirements.txt (the
#         tokenizer cross-check, the cuDNN frontend headers, transformers, safetensors) and
#         mk/requirements-eval.txt (EleutherAI's lm-evaluation-harness, held to versions that keep
#         Debian's torch 1.13 and numpy; doc/evals.md).
#
# The CUDA toolkit is not installed here: without it `make test` skips the GPU checks in one line
# (README "Quick start"); CI insists on it (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=/usr/bin/python3
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

APT_PKGS=(build-essential python3 python3-pip python3-torch python3-numpy python3-regex
          python3-matplotlib liblapacke-dev liblapack-dev libopenmpi-dev openmpi-bin
          clang libclang-rt-dev libopenblas-openmp-dev pkg-config)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
else
  echo "deps: the ${#APT_PKGS[@]} Debian packages are installed"
fi

# The pins of mk/requirements.txt that the system Python does not have at that exact version.
REQS=(mk/requirements.txt mk/requirements-eval.txt)
stale=$("$PY" - "${REQS[@]}" <<'EOF'
import sys
from importlib import metadata
for path in sys.argv[1:]:
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = line.partition("==")
        try:
            have = metadata.version(name.strip())
        except metadata.PackageNotFoundError:
            have = None
        if have != version.strip():
            print(f"{name.strip()} (have {have or 'none'}, want {version.strip()})")
EOF
)
if [ -n "$stale" ]; then
  echo "deps: pip install for $PY: $(echo "$stale" | paste -sd, -)"
  $SUDO "$PY" -m pip install -q --break-system-packages -r "${REQS[0]}" -r "${REQS[1]}"
else
  echo "deps: the pinned Python packages are installed for $PY"
fi
