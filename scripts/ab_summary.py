#!/usr/bin/env python3
"""scripts/ab_summary.py: the result of an A/B of uniform vs Prism runs over several seeds
(runs laid out as scripts/ab.py lays them out; GPU runs of scripts/run_gpt2.sh can be laid out alike).

  python scripts/ab_summary.py DIR [--markdown summary.md] [--json summary.json]

DIR holds one run per arm and seed: DIR/<arm>_seed<S>/main.log (arm = uniform or prism), and
optionally the run's stdout as DIR/<arm>_seed<S>.log or DIR/<arm>_seed<S>/stdout.log (for
tokens/s; the second is what scripts/run_gpt2.sh writes, so GPU runs launched with
--out DIR/<arm>_seed<S> summarize alike). Per run: the final val loss
(the last `tel` record of main.log, which must be at the last step, one past the last train
record: an unfinished run is an error). Then:
  - per arm: the number of runs, mean, sample standard deviation (n - 1), min and max;
  - per seed present in both arms: the paired difference d = prism - uniform (negative: Prism
    better). Pairs share the init weights and the data order, so the pairing removes the part of
    the seed-to-seed noise that both arms share;
  - the mean paired difference, its standard error sd(d)/sqrt(n), and the 95% confidence interval
    mean +- t(0.975, n-1) x se (Student t; n = number of pairs);
  - a plain statement: the difference is within the noise when the interval contains 0 (or when
    there are fewer than 2 pairs, so no noise estimate exists); otherwise the sign and size;
  - tokens/s per arm (median over the arm's runs of batch tokens / "total average iteration time")
    and the Prism/uniform ratio, when the stdout logs are there.
Errors (a missing or unfinished run, a malformed log) are one line naming the file.
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import json_safe, write_atomic  # noqa: E402
from plot_logs import LogError, parse_main_log  # noqa: E402

ARMS = ("uniform", "prism")
RUN_DIR = re.compile(r"(uniform|prism)_seed(\d+)")
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
    main.log is read by plot_logs.parse_main_log (after a resume, the repeated steps count); a
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


def tokens_per_second(run_dir):
    """Tokens per step / the average step time, from the trainer's stdout: <run>.log
    or <run>/stdout.log (ab.py, run_gpt2.sh); None when neither exists."""
    stdout_log = next((p for p in (run_dir + ".log", os.path.join(run_dir, "stdout.log"))
                       if os.path.isfile(p)), None)
    if stdout_log is None:
        return None
    tokens, ms = None, None
    with open(stdout_log, errors="replace") as f:
        for line in f:
            m = re.search(r"= (\d+) tokens per step", line)
            if m:
                tokens = int(m.group(1))
            m = re.match(r"total average iteration time: ([0-9.]+) ms", line)
            if m:
                ms = float(m.group(1))
    return tokens / (ms / 1000.0) if tokens and ms else None


def collect(directory):
    """{arm: {seed: {'val': float, 'steps': int, 'tok_s': float|None}}}."""
    runs = {a: {} for a in ARMS}
    for path in sorted(glob.glob(os.path.join(directory, "*_seed*"))):
        m = RUN_DIR.fullmatch(os.path.basename(path))
        if not m or not os.path.isdir(path):
            continue
        log = os.path.join(path, "main.log")
        if not os.path.isfile(log):
            raise SummaryError(f"{path}: no main.log (the run did not start?)")
        val, steps = final_val_loss(log)
        runs[m.group(1)][int(m.group(2))] = {"val": val, "steps": steps,
                                              "tok_s": tokens_per_second(path)}
    if not any(runs.values()):
        raise SummaryError(f"{directory}: no <arm>_seed<S>/main.log runs (arm uniform or prism)")
    return runs


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


def summarize(runs):
    arms = {a: describe([r["val"] for _, r in sorted(runs[a].items())]) for a in ARMS}
    seeds = sorted(set(runs["uniform"]) & set(runs["prism"]))
    diffs = [runs["prism"][s]["val"] - runs["uniform"][s]["val"] for s in seeds]
    p = paired(diffs)
    mean, sd, se = p["mean"], p["sd"], p["se"]
    steps = {r["steps"] for a in ARMS for r in runs[a].values()}
    tps = {a: statistics.median([r["tok_s"] for r in runs[a].values() if r["tok_s"]])
           if any(r["tok_s"] for r in runs[a].values()) else None for a in ARMS}
    s = {"arms": arms, "seeds": seeds, "diffs": diffs, "mean_diff": mean, "sd_diff": sd,
         "se_diff": se, "ci95": p["ci95"], "steps": sorted(steps),
         "tok_s": tps, "tok_s_ratio": tps["prism"] / tps["uniform"]
         if tps["prism"] and tps["uniform"] else None}
    s["statement"] = statement(s)
    return s


def statement(s):
    n = len(s["diffs"])
    if n == 0:
        return "No seed has both arms: nothing to compare."
    if math.isnan(s["mean_diff"]):
        return ("No conclusion: a final val loss is NaN (a diverged run; see the table), so the paired "
                "difference is undefined.")
    if n == 1:
        return (f"Only one paired seed (Prism - uniform = {s['mean_diff']:+.4f} nats): there is no "
                f"estimate of the noise, so no conclusion; run more seeds.")
    lo, hi = s["ci95"]
    noise = (f"seed-to-seed std within arms: uniform {s['arms']['uniform']['std']:.4f}, "
             f"Prism {s['arms']['prism']['std']:.4f}")
    if lo <= 0.0 <= hi:
        return (f"The difference is within the noise: Prism - uniform = {s['mean_diff']:+.4f} "
                f"+- {s['se_diff']:.4f} (se) nats over {n} paired seeds; the 95% interval "
                f"[{lo:+.4f}, {hi:+.4f}] contains 0 ({noise}).")
    better = "lower (better)" if s["mean_diff"] < 0 else "higher (worse)"
    return (f"Prism's final val loss is {better} than uniform's by {abs(s['mean_diff']):.4f} nats "
            f"(paired over {n} seeds, se {s['se_diff']:.4f}; the 95% interval "
            f"[{lo:+.4f}, {hi:+.4f}] excludes 0; {noise}).")


def fmt(v, spec="+.4f"):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def text_report(runs, s):
    lines = [f"{'run':<16} {'final val loss':>14} {'steps':>6} {'tok/s':>8}"]
    for a in ARMS:
        for seed, r in sorted(runs[a].items()):
            lines.append(f"{a + '_seed' + str(seed):<16} {r['val']:>14.4f} {r['steps']:>6} "
                         f"{fmt(r['tok_s'], '.0f'):>8}")
    lines.append("")
    for a in ARMS:
        d = s["arms"][a]
        lines.append(f"{a:<8} n {d['n']}  mean {fmt(d['mean'], '.4f')}  std {fmt(d['std'], '.4f')}"
                     f"  min {fmt(d['min'], '.4f')}  max {fmt(d['max'], '.4f')}")
    lines.append("paired (prism - uniform) by seed: " + ", ".join(
        f"{seed}: {d:+.4f}" for seed, d in zip(s["seeds"], s["diffs"])))
    lines.append(f"mean difference {fmt(s['mean_diff'])}  se {fmt(s['se_diff'], '.4f')}  "
                 f"95% CI [{fmt(s['ci95'][0])}, {fmt(s['ci95'][1])}]")
    if s["tok_s_ratio"]:
        lines.append(f"tokens/s: uniform {s['tok_s']['uniform']:.0f}, prism {s['tok_s']['prism']:.0f}, "
                     f"prism/uniform {s['tok_s_ratio']:.3f}")
    lines.append(s["statement"])
    return "\n".join(lines)


def markdown(runs, s, directory):
    out = [f"Runs in `{directory}` (final val loss = the last `tel` of each main.log, at step "
           f"{', '.join(map(str, s['steps']))}).", "",
           "| seed | uniform | Prism | Prism - uniform |", "|---|---|---|---|"]
    for seed in sorted(set(runs["uniform"]) | set(runs["prism"])):
        u, p = runs["uniform"].get(seed), runs["prism"].get(seed)
        d = p["val"] - u["val"] if u and p else None
        out.append(f"| {seed} | {fmt(u and u['val'], '.4f')} | {fmt(p and p['val'], '.4f')} | "
                   f"{fmt(d)} |")
    au, ap = s["arms"]["uniform"], s["arms"]["prism"]
    out.append(f"| mean +- std | {fmt(au['mean'], '.4f')} +- {fmt(au['std'], '.4f')} | "
               f"{fmt(ap['mean'], '.4f')} +- {fmt(ap['std'], '.4f')} | {fmt(s['mean_diff'])} "
               f"(se {fmt(s['se_diff'], '.4f')}, 95% CI [{fmt(s['ci95'][0])}, {fmt(s['ci95'][1])}]) |")
    out.append("")
    if s["tok_s_ratio"]:
        out.append(f"Tokens/s (median per arm): uniform {s['tok_s']['uniform']:.0f}, Prism "
                   f"{s['tok_s']['prism']:.0f}, ratio {s['tok_s_ratio']:.3f}.")
        out.append("")
    out.append(s["statement"])
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description="Summarize a uniform vs Prism A/B over seeds.")
    p.add_argument("dir", help="directory with <arm>_seed<S>/main.log runs")
    p.add_argument("--markdown", default=None, help="write a markdown summary here")
    p.add_argument("--json", default=None, help="write the numbers here")
    a = p.parse_args(argv)
    try:
        runs = collect(a.dir)
        s = summarize(runs)
    except (SummaryError, LogError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(text_report(runs, s))
    if a.markdown:
        write_atomic(a.markdown, markdown(runs, s, a.dir))
        print(f"wrote {a.markdown}")
    if a.json:
        write_atomic(a.json, json.dumps(json_safe({"runs": runs, "summary": s}), indent=1) + "\n")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
