#!/usr/bin/env bash
# mk/cudnn_frontend.sh: finds and checks the cuDNN frontend headers for mk/cuda.mk.
#
#   bash mk/cudnn_frontend.sh find PYTHON...   prints the include directory holding cudnn_frontend.h
#                                              (nothing when there is none)
#   bash mk/cudnn_frontend.sh check DIR        exits 0 when DIR holds a frontend of 1.13.0 or newer;
#                                              otherwise one "error:" line and exit 1
#   bash mk/cudnn_frontend.sh version DIR      prints DIR's frontend version (1.32.0), or nothing
#
# The search order of `find` (doc/gpu.md "cuDNN version and build facts"): the pip package nvidia-cudnn-frontend of the
# active virtualenv or conda environment, then llm.c's places ~/cudnn-frontend/include and
# ./cudnn-frontend/include, then the pip package of each PYTHON given (mk/cuda.mk passes the
# python3 first on PATH and the Makefile's PYTHON). CUDNN_FRONTEND_PATH, when set, is used as it is
# and never searched for.
set -u
MIN=1.13.0  # set_generate_stats and the handle-free check_support()/build_plans() (llmc/attention/cudnn.cpp)

pip_include() {  # python -> the include dir of its nvidia-cudnn-frontend package, if installed
  [ -n "$1" ] && command -v "$1" >/dev/null 2>&1 || return 0
  "$1" - 2>/dev/null <<'EOF'
import importlib.metadata as m, os
try:
    d = str(m.distribution("nvidia-cudnn-frontend").locate_file("include"))
except Exception:
    d = ""
if d and os.path.isfile(os.path.join(d, "cudnn_frontend.h")):
    print(d)
EOF
}

version_of() {  # include dir -> "major.minor.patch" from cudnn_frontend_version.h
  local h=$1/cudnn_frontend_version.h
  [ -f "$h" ] || return 0
  local v
  v=$(sed -n 's/^#define CUDNN_FRONTEND_\(MAJOR\|MINOR\|PATCH\)_VERSION  *\([0-9][0-9]*\).*/\2/p' "$h" | paste -sd. -)
  case $v in *.*.*) echo "$v" ;; esac
}

case ${1:-} in
find)
  shift
  for py in ${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python} ${CONDA_PREFIX:+$CONDA_PREFIX/bin/python}; do
    d=$(pip_include "$py"); [ -n "$d" ] && { echo "$d"; exit 0; }
  done
  for d in "$HOME/cudnn-frontend/include" ./cudnn-frontend/include; do
    [ -f "$d/cudnn_frontend.h" ] && { echo "$d"; exit 0; }
  done
  for py in "$@"; do
    d=$(pip_include "$py"); [ -n "$d" ] && { echo "$d"; exit 0; }
  done
  exit 0 ;;
version)
  version_of "${2:?usage: $0 version DIR}" ;;
check)
  d=${2:-}
  fix="pip install nvidia-cudnn-frontend==1.32.0 in the active Python, or set CUDNN_FRONTEND_PATH to a newer include directory"
  if [ -z "$d" ]; then
    echo "error: cudnn_frontend.h not found (searched the active environment's pip package, ~/cudnn-frontend/include, ./cudnn-frontend/include and python3's pip package): $fix" >&2
    exit 1
  fi
  [ -f "$d/cudnn_frontend.h" ] || { echo "error: CUDNN_FRONTEND_PATH=$d: no cudnn_frontend.h there: $fix" >&2; exit 1; }
  v=$(version_of "$d")
  [ -n "$v" ] || { echo "error: $d/cudnn_frontend_version.h: no CUDNN_FRONTEND_{MAJOR,MINOR,PATCH}_VERSION found (expected a frontend of $MIN or newer): $fix" >&2; exit 1; }
  if [ "$(printf '%s\n%s\n' "$MIN" "$v" | sort -V | head -n 1)" != "$MIN" ]; then
    echo "error: $d: cudnn_frontend $v is older than $MIN (no SDPA set_generate_stats): $fix" >&2
    exit 1
  fi ;;
*)
  echo "usage: $0 find PYTHON... | check DIR | version DIR" >&2
  exit 2 ;;
esac
