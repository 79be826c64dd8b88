"""scripts/common.py: small helpers shared by the Python scripts in scripts/ (and
sd_attention/'s plot_cascade.py and sd_claims.py).

Defines
- json_safe(v): v with every non-finite float replaced by None, recursively (JSON has no NaN or
  Infinity; an undefined number, e.g. the std of one run, becomes null);
- read_json(path, what, error): the parsed JSON of path, or error("<path>: no such file (expected
  WHAT)") / error("<path>: not JSON (<why>); expected WHAT"), one line for the caller to print;
- save_png(fig, out, dpi=110): save a matplotlib figure as a PNG atomically (llmc_formats/atomic.py:
  path.tmp, fsync, rename, so a file under its final name is always complete), and close it;
- pyplot(): matplotlib.pyplot on the Agg backend, or one error line naming the interpreter that
  has it (Debian's /usr/bin/python3 after `make deps`) when this one lacks it;
- make_target(path), build_missing(check, jobs, dry_run, error): the drivers (ab.py,
  sd_attention/sd_claims.py) build what they need and the Makefile makes (CPU programs, token shards, eval
  files) with one `make -jN TARGETS` before the first run, so that they run from one command on a
  fresh clone; anything else missing stays one error line per input.

The file formats (main.log, shards, tokenizer files, checkpoints, layer tables, descriptors) and the atomic write
are llmc_formats/'s (doc/formats.md).
"""
import io
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats
from llmc_formats.atomic import write_atomic


def json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    return v


def read_json(path, what, error=ValueError):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise error(f"{path}: no such file (expected {what})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{path}: not JSON ({e}); expected {what}") from None


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError as e:
        sys.exit(llmc_formats.missing_module_line(sys.argv[0], e.name or "matplotlib"))
    return plt


def save_png(fig, out, dpi=110):
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    write_atomic(out, buf.getvalue())


# The programs a driver may build for itself: the CPU ones (the GPU programs need USE_CUDNN=1 and
# the CUDA toolkit, doc/gpu.md, so a missing GPU program stays an error). The data targets (data,
# prose, evals) come from each driver's own table of inputs.
MAKE_PROGRAMS = ("train_gpt2", "build/blas/train_gpt2", "eval_gpt2", "attn_distance", "sd_spectrum", "sd_surgery")


def make_target(path):
    """The make target that builds the program at path, or None when make does not build it."""
    t = os.path.normpath(path)
    return t if t in MAKE_PROGRAMS else None


def build_missing(check, jobs, dry_run, error):
    """check() lists the missing inputs as [(one error line, the make target that builds it or
    None)]. Runs `make -jJOBS TARGETS` once for every target listed (printed first; with dry_run
    only printed) and returns what is still missing: check() again after the make, or in a dry
    run the inputs no target builds. A failed make is error("make ... failed (exit N): ...")."""
    missing = check()
    targets = list(dict.fromkeys(t for _, t in missing if t))
    if not targets:
        return missing
    cmd = [os.environ.get("MAKE", "make"), f"-j{jobs}"] + targets
    print(("" if dry_run else "building: ") + " ".join(cmd), flush=True)
    if dry_run:
        return [(m, t) for m, t in missing if not t]
    rc = subprocess.run(cmd).returncode
    if rc != 0:
        raise error(f"{' '.join(cmd)} failed (exit {rc}): see its output above")
    return check()
