"""scripts/common.py: small helpers shared by the Python scripts in scripts/ (and
sd_attention/plot_cascade.py).

Defines
- json_safe(v): v with every non-finite float replaced by None, recursively (JSON has no NaN or
  Infinity; an undefined number, e.g. the std of one run, becomes null);
- read_json(path, what, error): the parsed JSON of path, or error("<path>: no such file (expected
  WHAT)") / error("<path>: not JSON (<why>); expected WHAT"), one line for the caller to print;
- write_atomic(path, text): write text to path.tmp, then rename it, so a file under its final
  name is always complete;
- save_png(fig, out, dpi=110): save a matplotlib figure as a PNG the same way, and close it;
- pyplot(): matplotlib.pyplot on the Agg backend, or one error line naming the interpreter that
  has it (Debian's /usr/bin/python3 after bash .ci/run) when this one lacks it.

The llm.c main.log parser is plot_logs.parse_main_log; ab_summary.py uses it too.
"""
import json
import math
import os
import sys


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


def write_atomic(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError as e:
        sys.exit(f"error: {e.name} is not installed for {sys.executable}; run this with /usr/bin/python3 "
                 f"(Debian's python3-matplotlib; bash .ci/run installs it) or pip install matplotlib")
    return plt


def save_png(fig, out, dpi=110):
    plt = pyplot()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out + ".tmp", format="png", dpi=dpi)
    plt.close(fig)
    os.replace(out + ".tmp", out)
