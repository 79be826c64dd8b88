"""llmc_formats/main_log.py: the trainer's main.log (doc/formats.md "main.log and stdout").

llm.c's format, one record per line, `s` the 0-based step:

  s:%d trl:%.4f lr:%.6f norm:%.2f      train loss, learning rate, grad norm (older llm.c
                                       logs: trl alone)
  s:%d tel:%.4f                        val loss
  s:%d eval:%.4f                       HellaSwag acc_norm (llm.c's -h 1)
  s:%d eval_<task>:%.4f                other zero-shot evals
  s:%d rms0:%.4g ... rmsL:%.4g         the residual stream's RMS per block and ln_f (ours)

Defines
- LogError: a ValueError whose message is the whole one-line error (file:line and what);
- log_path(run): the main.log of a run directory, or the file itself;
- parse_main_log(path, allow_nan=False) -> {series: [(step, value), ...]}. A resumed run (-y 1)
  appends and logs again from its checkpoint's step: a step that does not increase within a
  series replaces everything from that step on.
scripts/plot_logs.py plots it, scripts/ab_stats.py reads the final val loss with it.
"""
import math
import os
import re

TRAIN_KEYS = ("trl", "lr", "norm")
RECORD = re.compile(r"s:(-?\d+)((?: +[A-Za-z_][A-Za-z0-9_]*:\S+)+)")
EXPECTED = ("expected 's:<step> trl:<loss> lr:<lr> norm:<norm>', 's:<step> tel:<loss>', "
            "'s:<step> eval[_<task>]:<acc>' or 's:<step> rms0:<r0> rms1:<r1> ...'")


class LogError(ValueError):
    """A malformed log: the message is the whole one-line error."""


def log_path(run):
    """The main.log of a run directory, or the file itself."""
    path = os.path.join(run, "main.log") if os.path.isdir(run) else run
    if not os.path.isfile(path):
        raise LogError(f"{run}: no main.log (expected a run directory written with -o, or a "
                       f"main.log path)")
    return path


def _number(text, where, key, allow_nan=False):
    try:
        v = float(text)
    except ValueError:
        raise LogError(f"{where}: {key}: expected a number, got '{text}'") from None
    if math.isnan(v) and not allow_nan:
        raise LogError(f"{where}: {key}: expected a number, got NaN")
    return v


def _append(series, name, step, value):
    """Adds (step, value); a step that does not increase truncates the series there (resume)."""
    points = series.setdefault(name, [])
    while points and points[-1][0] >= step:
        points.pop()
    points.append((step, value))


def parse_main_log(path, allow_nan=False):
    """main.log -> {series name: [(step, value), ...]}: 'train' (trl), 'lr', 'norm', 'val' (tel),
    'eval' and 'eval_<task>', and 'rms' (the stream's RMS per layer: value is a list). A NaN value (a diverged run: the trainer logs nan and goes on) is an
    error unless allow_nan."""
    series = {}
    with open(path, "r", errors="replace") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            where = f"{path}:{lineno}"
            m = RECORD.fullmatch(line)
            if not m:
                raise LogError(f"{where}: {EXPECTED}; got '{line[:60]}'")
            step = int(m.group(1))
            fields = dict(kv.split(":", 1) for kv in m.group(2).split())
            keys = set(fields)
            if "trl" in keys and keys <= set(TRAIN_KEYS):
                # older llm.c logs have trl alone; lr and norm are optional
                for key in TRAIN_KEYS:
                    if key in fields:
                        name = "train" if key == "trl" else key
                        _append(series, name, step, _number(fields[key], where, key, allow_nan))
            elif keys and keys == {f"rms{i}" for i in range(len(keys))}:
                # the residual stream's RMS entering each block and ln_f: rms0 ... rmsL
                _append(series, "rms", step, [_number(fields[f"rms{i}"], where, f"rms{i}", allow_nan)
                                               for i in range(len(keys))])
            elif len(keys) == 1 and (keys == {"tel"} or keys == {"eval"} or
                                     next(iter(keys)).startswith("eval_")):
                key = next(iter(keys))
                _append(series, "val" if key == "tel" else key, step,
                        _number(fields[key], where, key, allow_nan))
            else:
                raise LogError(f"{where}: {EXPECTED}; got keys {', '.join(sorted(keys))}")
    if not series:
        raise LogError(f"{path}: no 's:<step> ...' records (an empty log?)")
    return series
