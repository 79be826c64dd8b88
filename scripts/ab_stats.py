"""scripts/ab_stats.py: the run readers and the statistics of the A/B summaries (scripts/ab_report.py;
scripts/ab.py and sd_attention/sd_claims.py read final val losses with it too). It defines:

- SummaryError: a ValueError whose text is the whole one-line error;
- final_val_loss(main_log) -> (val, steps): the val loss at the last step of a finished run (the
  last `tel` record, one past the last train record; an unfinished run is a SummaryError); a
  diverged run's NaN is kept;
- stdout_path(run_dir): the trainer's stdout of a run, <run>.log or <run>/stdout.log, or None;
- tokens_per_second(run_dir): tokens per step / "total average iteration time" from that stdout,
  or None;
- describe(values): n, mean, sample std (n - 1), min and max (NaN where undefined or a value is NaN);
- paired(diffs): the paired differences' n, mean, sd, standard error sd/sqrt(n) and 95% interval
  mean +- t(0.975, n-1) se;
- t975(df): the two-sided 95% Student t quantile (the normal 1.96 beyond 30 degrees of freedom);
- fmt(v, spec): v formatted, or "n/a" for None and NaN.

main.log is read by llmc_formats/main_log.py (doc/formats.md "main.log and stdout").
"""
import math
import os
import re
import statistics

import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from llmc_formats.main_log import parse_main_log  # noqa: E402

# two-sided 95% Student t quantiles t(0.975, df), df = 1..30; beyond, the normal 1.96
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


class SummaryError(ValueError):
    """The whole one-line error."""


def t975(df):
    return T975[df - 1] if df <= len(T975) else 1.96


def final_val_loss(main_log):
    """The val loss at the last step; the run must have finished (tel one past the last trl).
    main.log is read by llmc_formats.main_log.parse_main_log (after a resume, the repeated steps count); a
    diverged run's NaN is kept (its statistics print n/a) instead of stopping the summary."""
    series = parse_main_log(main_log, allow_nan=True)
    last_train = series["train"][-1][0] if "train" in series else -1
    last_val = series["val"][-1] if "val" in series else None
    if last_val is None or last_train < 0 or last_val[0] != last_train + 1:
        raise SummaryError(f"{main_log}: unfinished run: the last val loss "
                           f"{'is missing' if last_val is None else f'is at step {last_val[0]}'}, "
                           f"the last train step is {last_train} (expected a val loss at step "
                           f"{last_train + 1})")
    return last_val[1], last_train + 1


def stdout_path(run_dir):
    """The trainer's stdout of a run: <run>.log, else <run>/stdout.log (ab.py and run_gpt2.sh
    write the second); None when neither exists."""
    return next((p for p in (run_dir + ".log", os.path.join(run_dir, "stdout.log"))
                 if os.path.isfile(p)), None)


def tokens_per_second(run_dir):
    """Tokens per step / the average step time, from the trainer's stdout (stdout_path); None
    when there is none or it lacks either line."""
    path = stdout_path(run_dir)
    if path is None:
        return None
    tokens, ms = None, None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"= (\d+) tokens per step", line)
            if m:
                tokens = int(m.group(1))
            m = re.match(r"total average iteration time: ([0-9.]+) ms", line)
            if m:
                ms = float(m.group(1))
    return tokens / (ms / 1000.0) if tokens and ms else None


def _stat(fn, values, need):
    """fn(values), or NaN with fewer than `need` values or a NaN among them (a diverged run)."""
    return fn(values) if len(values) >= need and not any(math.isnan(v) for v in values) else math.nan


def describe(values):
    return {"n": len(values), "mean": _stat(statistics.fmean, values, 1), "std": _stat(statistics.stdev, values, 2),
            "min": _stat(min, values, 1), "max": _stat(max, values, 1)}


def paired(diffs):
    """The paired differences' n, mean, sample std, standard error sd/sqrt(n) and 95% interval
    mean +- t(0.975, n-1) se (NaN where undefined: fewer than 2 pairs, or a NaN among them)."""
    n = len(diffs)
    mean = _stat(statistics.fmean, diffs, 1)
    sd = _stat(statistics.stdev, diffs, 2)
    se = sd / math.sqrt(n) if n > 1 else math.nan
    half = t975(n - 1) * se if n > 1 else math.nan
    return {"n": n, "mean": mean, "sd": sd, "se": se, "ci95": [mean - half, mean + half]}


def fmt(v, spec="+.4f"):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)
