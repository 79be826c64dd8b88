"""scripts/common.py: small helpers shared by the Python scripts in scripts/ (and
sd_attention/plot_cascade.py).

Defines
- json_safe(v): v with every non-finite float replaced by None, recursively (JSON has no NaN or
  Infinity; an undefined number, e.g. the std of one run, becomes null);
- write_atomic(path, text): write text to path.tmp, then rename it, so a file under its final
  name is always complete;
- save_png(fig, out, dpi=110): save a matplotlib figure as a PNG the same way, and close it.

The llm.c main.log parser is plot_logs.parse_main_log; ab_summary.py uses it too.
"""
import math
import os


def json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    return v


def write_atomic(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def save_png(fig, out, dpi=110):
    import matplotlib.pyplot as plt
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out + ".tmp", format="png", dpi=dpi)
    plt.close(fig)
    os.replace(out + ".tmp", out)
