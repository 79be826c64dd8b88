#!/usr/bin/env python3
"""scripts/ab_report.py: the summary of an A/B over any number of arms and seeds: paired val loss,
paired zero-shot accuracy, the attention distance per layer, steps to a target loss, tokens/s
and MFU, with plots. scripts/ab.py writes such a directory and calls this at its end.

  python scripts/ab_report.py DIR [--arms uniform,prism,...] [--target-loss X] [--smooth BETA]
                              [--plots 0|1] [--markdown FILE] [--json FILE]

DIR holds one run per arm and seed, DIR/<arm>_seed<S>/, with
  main.log          the trainer's log (doc/formats.md "main.log and stdout"): the final val loss is the last `tel`
                    record, which must be one past the last train step (an unfinished run is an
                    error; see ab_stats.final_val_loss);
  stdout.log, or DIR/<arm>_seed<S>.log
                    the trainer's stdout: tokens/s (tokens per step / "total average iteration
                    time") and, from the GPU trainer, the median MFU of its step lines;
  evals.json        optional: ./eval_gpt2 -json of the final checkpoint (doc/evals.md);
and optionally DIR/attn_<arm>_seed<S>.json: ./attn_distance -e <arm> -e2 <reference> -json of the
two final checkpoints of seed S (doc/attention_distance.md). The arms come from --arms, else from
DIR/ab.json (written by scripts/ab.py), else from the run folders in sorted order; the first arm
is the reference against which every other is paired.

For each other arm, paired over the seeds both arms have (same init weights, same data order):
  - the val loss difference arm - reference: per seed, and its mean, se and 95% interval
    mean +- t(0.975, n-1) se; "within the noise" when the interval contains 0 (ab_stats.paired,
    ab_stats.t975); no conclusion when a final val loss is NaN (a diverged run);
  - per zero-shot task the accuracy difference (acc_norm where the task has it, else acc: LAMBADA
    and WinoGrande score acc only), with the same interval;
  - per layer, Delta D_l = D_l(arm) - D_l(reference) (the mean attention distance, doc/attention_distance.md
    "Definitions") with its interval over seeds;
  - steps to the target loss: the first val record at or below it (the target defaults to the
    largest final val loss of all runs, the level every run reached); per run, and the ratio
    arm / reference paired by seed;
  - tokens/s: the ratio of the arms' medians; MFU: the median of each arm's runs.
A verdict on the val loss needs DIR/floors.json (scripts/floors.py --json) and every run of both
arms below its bigram floor (gate); otherwise the statement says why there is none.
Prints the summary (Markdown) and writes it to DIR/summary.md (or --markdown FILE), the numbers to
DIR/summary.json (or --json FILE) and, unless --plots 0, DIR/loss.png (train loss smoothed by an
exponential moving average, the raw values faint, val loss with markers; one colour per arm) and,
when attention distances are there, DIR/attn_delta.png (Delta D_l per layer with its 95% interval
and the zero line). Errors are one line naming the file.
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.ab_stats import (SummaryError, describe, final_val_loss, fmt, paired, stdout_path, t975,  # noqa: E402
                      tokens_per_second)
from scripts.common import json_safe, pyplot, read_json, save_png  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402
from scripts.floors import above_bigram, bits_per_byte  # noqa: E402
from scripts.floors import describe as describe_floors  # noqa: E402
from llmc_formats.main_log import LogError, parse_main_log  # noqa: E402

RUN_DIR = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*?)_seed(\d+)")
TASKS = ("hellaswag", "piqa", "arc_easy", "winogrande", "lambada")
MFU = re.compile(r"\| *(-?[0-9.]+)% bf16 MFU \|")


def median_mfu(run_dir):
    """The median MFU (percent) of the GPU trainer's step lines after the first 3 (warm-up), or
    None (the CPU trainer prints none; -100 means the GPU is not in the peak table)."""
    path = stdout_path(run_dir)
    if path is None:
        return None
    with open(path, errors="replace") as f:
        values = [float(m.group(1)) for m in map(MFU.search, f) if m]
    values = values[3:] if len(values) > 3 else values
    return statistics.median(values) if values and min(values) >= 0 else None


def task_accuracy(evals_path):
    """{task: accuracy}, {task: examples} from eval_gpt2's JSON: acc_norm where present, else acc."""
    try:
        with open(evals_path) as f:
            tasks = json.load(f)["tasks"]
        return ({t: float(v["acc_norm"] if "acc_norm" in v else v["acc"]) for t, v in tasks.items()},
                {t: int(v["examples"]) for t, v in tasks.items()})
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise SummaryError(f"{evals_path}: not eval_gpt2 -json output (expected tasks.<task>.acc): {e}")


def attention_delta(path):
    """[(layer, Delta D)] from attn_distance's -json with -e2; Delta D is None for a layer it
    skipped (no attention matrix in one of the two models: linear attention)."""
    try:
        with open(path) as f:
            d = json.load(f)
        return [(int(e["layer"]), None if "skipped" in e else float(e["delta"]["D"])) for e in d["delta"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise SummaryError(f"{path}: not attn_distance -json output with -e2 (expected delta[].delta.D): {e}")


def steps_to(series, target):
    """The step of the first val record at or below target, or None."""
    return next((s for s, v in series.get("val", []) if v <= target), None)


def collect(directory, arms):
    """{arm: {seed: run}}; a run: val, steps, series, tok_s, mfu, evals (or None)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*_seed*"))):
        m = RUN_DIR.fullmatch(os.path.basename(path))
        if not m or not os.path.isdir(path) or (arms and m.group(1) not in arms):
            continue
        log = os.path.join(path, "main.log")
        if not os.path.isfile(log):
            raise SummaryError(f"{path}: no main.log (the run did not start?)")
        val, steps = final_val_loss(log)
        ev = os.path.join(path, "evals.json")
        acc, n = task_accuracy(ev) if os.path.isfile(ev) else (None, None)
        runs.setdefault(m.group(1), {})[int(m.group(2))] = {
            "val": val, "steps": steps, "series": parse_main_log(log, allow_nan=True),
            "tok_s": tokens_per_second(path), "mfu": median_mfu(path), "evals": acc, "eval_n": n}
    if not runs:
        raise SummaryError(f"{directory}: no <arm>_seed<S>/main.log runs"
                           + (f" of the arms {', '.join(arms)}" if arms else ""))
    return runs


def optional_json(path, what):
    """The parsed JSON at path (common.read_json's errors), or None when there is no such file."""
    return read_json(path, what, SummaryError) if os.path.isfile(path) else None


def arm_order(directory, runs, arms):
    if not arms:
        settings = os.path.join(directory, "ab.json")
        if os.path.isfile(settings):
            with open(settings) as f:
                arms = [a["name"] for a in json.load(f)["arms"]]
        else:
            arms = sorted(runs)
    missing = [a for a in arms if a not in runs]
    if missing:
        raise SummaryError(f"{directory}: no finished runs of the arm(s) {', '.join(missing)} "
                           f"(expected {missing[0]}_seed<S>/main.log)")
    return arms


def summarize(directory, runs, arms, target, floors=None):
    ref = arms[0]
    finals = [r["val"] for a in arms for r in runs[a].values() if not math.isnan(r["val"])]
    if target is None:
        target = max(finals) if finals else math.nan
    out = {"reference": ref, "arms": arms, "target_loss": target, "per_arm": {}, "vs_reference": {},
           "floors": floors}
    for a in arms:
        rs = runs[a]
        tps = [r["tok_s"] for r in rs.values() if r["tok_s"]]
        mfu = [r["mfu"] for r in rs.values() if r["mfu"] is not None]
        reach = {s: steps_to(r["series"], target) for s, r in rs.items()}
        accs = {t: [r["evals"][t] for r in rs.values() if r["evals"] and t in r["evals"]] for t in TASKS}
        out["per_arm"][a] = {
            "seeds": sorted(rs), "val": describe([rs[s]["val"] for s in sorted(rs)]),
            "bpb": describe([bits_per_byte(rs[s]["val"], floors) for s in sorted(rs)])
            if floors and floors.get("bytes") else None,
            "tok_s": statistics.median(tps) if tps else None,
            "mfu": statistics.median(mfu) if mfu else None,
            "steps_to_target": reach,
            "acc": {t: statistics.fmean(v) for t, v in accs.items() if v}}
    for a in arms[1:]:
        seeds = sorted(set(runs[a]) & set(runs[ref]))
        va = out["per_arm"][a]
        vr = out["per_arm"][ref]
        d = {"seeds": seeds,
             "val": paired([runs[a][s]["val"] - runs[ref][s]["val"] for s in seeds]),
             "val_by_seed": {s: runs[a][s]["val"] - runs[ref][s]["val"] for s in seeds}}
        d["tok_s_ratio"] = va["tok_s"] / vr["tok_s"] if va["tok_s"] and vr["tok_s"] else None
        ratios = [va["steps_to_target"][s] / vr["steps_to_target"][s] for s in seeds
                  if va["steps_to_target"][s] and vr["steps_to_target"][s]]
        d["steps_ratio"] = paired(ratios) if ratios else None
        d["acc"] = {}
        for t in TASKS:
            both = [s for s in seeds if runs[a][s]["evals"] and runs[ref][s]["evals"]
                    and t in runs[a][s]["evals"] and t in runs[ref][s]["evals"]]
            if both:
                d["acc"][t] = paired_accuracy([(runs[a][s]["evals"][t], runs[ref][s]["evals"][t],
                                                min(runs[a][s]["eval_n"][t], runs[ref][s]["eval_n"][t]))
                                               for s in both])
        per_layer = {}
        for s in seeds:
            p = os.path.join(directory, f"attn_{a}_seed{s}.json")
            if os.path.isfile(p):
                for layer, v in attention_delta(p):
                    per_layer.setdefault(layer, [])
                    if v is not None:
                        per_layer[layer].append(v)
        d["delta_D"] = {layer: paired(v) for layer, v in sorted(per_layer.items()) if v}
        d["delta_D_skipped"] = sorted(layer for layer, v in per_layer.items() if not v)
        d["testable"], why = gate(runs, [ref, a], floors)
        # a diverged run has no verdict for its own reason, before the gate's (a NaN is above any floor)
        diverged = d["val"]["n"] > 0 and math.isnan(d["val"]["mean"])
        d["statement"] = statement(a, ref, d["val"]) if d["testable"] or diverged else f"{a} vs {ref}: {why}."
        out["vs_reference"][a] = d
    return out


def paired_accuracy(pairs):
    """The paired accuracy difference over seeds, [(acc arm, acc reference, examples)], with an
    interval that counts the examples as well as the seeds: every seed scores the same examples,
    so their sampling error is shared by all seeds and the seeds' spread does not contain it. Its
    variance per seed is bounded by (p1 (1 - p1) + p2 (1 - p2)) / n (the two models' errors
    taken as independent; correlated errors make it smaller, so the interval is conservative),
    and is added to the seeds' se^2: half-width t(0.975, seeds - 1) (1.96 for one seed) x
    sqrt(se_seeds^2 + mean binomial variance / seeds)."""
    p = paired([x - y for x, y, _ in pairs])
    k = len(pairs)
    ex = statistics.fmean([(x * (1 - x) + y * (1 - y)) / max(1, n) for x, y, n in pairs]) / k
    seed_var = p["se"] ** 2 if k > 1 else 0.0
    se = math.sqrt(seed_var + ex)
    half = (t975(k - 1) if k > 1 else 1.96) * se
    p.update(se=se, se_examples=math.sqrt(ex), examples=[n for _, _, n in pairs],
             ci95=[p["mean"] - half, p["mean"] + half])
    return p


def gate(runs, arms, floors):
    """(testable, why): a verdict on these arms needs every seed of each to end below the bigram
    floor of the val windows (scripts/floors.py; doc/reproducing.md "Floors and the gate")."""
    if floors is None:
        return False, "no floors.json (scripts/floors.py): whether the runs learned is unknown, so no verdict"
    vals = {a: [r["val"] for r in runs[a].values()] for a in arms}
    if not above_bigram(vals, floors):
        return True, ""
    got = ", ".join(f"{a} {statistics.fmean(v):.4f}" for a, v in vals.items())
    return False, (f"not testable at this budget: mean val {got} vs bigram floor {floors['bigram']:.4f} "
                   f"(unigram {floors['unigram']:.4f}) nats; a run above the bigram floor has learned at most "
                   f"what adjacent token pairs tell")


def statement(arm, ref, p):
    n = p["n"]
    if n == 0:
        return f"{arm}: no seed has both {arm} and {ref}: nothing to compare."
    if math.isnan(p["mean"]):
        return f"{arm}: no conclusion: a final val loss is NaN (a diverged run)."
    if n == 1:
        return (f"{arm} - {ref} = {p['mean']:+.4f} nats on one seed: no estimate of the noise, so "
                f"no conclusion; run more seeds.")
    lo, hi = p["ci95"]
    if lo <= 0.0 <= hi:
        return (f"{arm} - {ref} = {p['mean']:+.4f} +- {p['se']:.4f} (se) nats over {n} paired "
                f"seeds: within the noise (95% interval [{lo:+.4f}, {hi:+.4f}] contains 0).")
    better = "lower (better)" if p["mean"] < 0 else "higher (worse)"
    return (f"{arm}'s final val loss is {better} than {ref}'s by {abs(p['mean']):.4f} nats over "
            f"{n} paired seeds (se {p['se']:.4f}; 95% interval [{lo:+.4f}, {hi:+.4f}] excludes 0).")


def interval(p, spec="+.4f"):
    if p is None:
        return "n/a"
    if p["n"] < 2 or math.isnan(p["se"]):
        return f"{fmt(p['mean'], spec)} (n {p['n']})"
    return f"{fmt(p['mean'], spec)} [{fmt(p['ci95'][0], spec)}, {fmt(p['ci95'][1], spec)}] (n {p['n']})"


def header(directory, runs, s, settings):
    """What the summary summarizes: the model, each arm's layer table, the data, tokens and steps,
    the val windows and their floors, the examples per task."""
    arms, ref = s["arms"], s["reference"]
    st = (settings or {}).get("settings", {})
    tables = {x["name"]: x.get("table") for x in (settings or {}).get("arms", [])}
    L = [f"A/B in `{directory}`: arms {', '.join(f'`{a}`' for a in arms)}; reference `{ref}`. "
         f"Intervals are 95% (Student t over paired seeds).", ""]
    if st:
        B, T, steps = st.get("B"), st.get("T"), st.get("steps")
        tok = f"{B * T * steps * st.get('gpus', 1):,} tokens per run ({steps} steps of B {B} x T {T})" \
            if B and T and steps else f"{steps} steps"
        L.append(f"- model `{st.get('model')}` ({st.get('size')}); data {st.get('data')} "
                 f"(order: {st.get('data_order')}); {tok}")
    L.append("- layer table per arm: " + "; ".join(
        f"`{a}` {('`' + tables[a] + '`') if tables.get(a) else 'the descriptor uniform heads'}" for a in arms))
    f = s.get("floors")
    if f:
        L.append(f"- val windows: {f['batches']} batches of B {f['B']} x T {f['T']} ({f['targets']:,} targets); "
                 f"floors {describe_floors(f)}")
    else:
        L.append("- floors: none (no floors.json in the directory; scripts/floors.py writes it), so no verdict")
    n = sorted({(t, r["eval_n"][t]) for a in arms for r in runs[a].values() if r.get("eval_n") for t in r["eval_n"]})
    if n:
        L.append("- zero-shot examples per task: " + ", ".join(f"{t} {k}" for t, k in n))
    return L + [""]


def markdown(directory, runs, s, settings=None):
    arms, ref = s["arms"], s["reference"]
    L = header(directory, runs, s, settings) + [
         "## Runs", "", "| run | final val loss | steps | tokens/s | MFU | " +
         " | ".join(TASKS) + " |", "|---" * (5 + len(TASKS)) + "|"]
    for a in arms:
        for seed, r in sorted(runs[a].items()):
            ev = r["evals"] or {}
            L.append(f"| {a}_seed{seed} | {fmt(r['val'], '.4f')} | {r['steps']} | "
                     f"{fmt(r['tok_s'], '.0f')} | {fmt(r['mfu'], '.1f')} | " +
                     " | ".join(fmt(ev.get(t), '.4f') for t in TASKS) + " |")
    L += ["", "## Val loss", "", "| arm | n | mean | std | bits per byte | below bigram floor | tokens/s | MFU % |",
          "|---|---|---|---|---|---|---|---|"]
    for a in arms:
        p = s["per_arm"][a]
        below = (f"{sum(1 for r in runs[a].values() if r['val'] < s['floors']['bigram'])} of {len(runs[a])}"
                 if s.get("floors") else "n/a")
        L.append(f"| {a} | {p['val']['n']} | {fmt(p['val']['mean'], '.4f')} | "
                 f"{fmt(p['val']['std'], '.4f')} | {fmt(p['bpb']['mean'], '.4f') if p.get('bpb') else 'n/a'} | "
                 f"{below} | {fmt(p['tok_s'], '.0f')} | {fmt(p['mfu'], '.1f')} |")
    L += ["", f"| arm - {ref} | paired Δ val loss | tokens/s ratio | steps to {fmt(s['target_loss'], '.4f')} (ratio) |",
          "|---|---|---|---|"]
    for a in arms[1:]:
        d = s["vs_reference"][a]
        L.append(f"| {a} | {interval(d['val'])} | {fmt(d['tok_s_ratio'], '.3f')} | "
                 f"{interval(d['steps_ratio'], '.3f')} |")
    L.append("")
    L += [f"- {a} - {ref} by seed: " + ", ".join(f"{seed}: {fmt(v)}" for seed, v in
                                                 sorted(s["vs_reference"][a]["val_by_seed"].items()))
          for a in arms[1:]]
    L.append("")
    L += [s["vs_reference"][a]["statement"] for a in arms[1:]]
    L += ["", f"Steps to the target val loss {fmt(s['target_loss'], '.4f')} (the first val record "
          f"at or below it; '-': not reached):", ""]
    for a in arms:
        st = s["per_arm"][a]["steps_to_target"]
        L.append(f"- {a}: " + ", ".join(f"seed {k}: {v if v is not None else '-'}" for k, v in sorted(st.items())))
    if any(s["vs_reference"][a]["acc"] for a in arms[1:]):
        L += ["", "## Zero-shot accuracy (acc_norm where the task has it, else acc)", "",
              "The intervals count the examples as well as the seeds (paired_accuracy).", "",
              "| task | " + " | ".join(f"{a} mean" for a in arms) + " | " +
              " | ".join(f"{a} - {ref}" for a in arms[1:]) + " |",
              "|---" * (1 + 2 * len(arms) - 1) + "|"]
        for t in TASKS:
            L.append(f"| {t} | " + " | ".join(fmt(s["per_arm"][a]["acc"].get(t), '.4f') for a in arms)
                     + " | " + " | ".join(interval(s["vs_reference"][a]["acc"].get(t)) for a in arms[1:]) + " |")
    if any(s["vs_reference"][a]["delta_D"] for a in arms[1:]):
        layers = sorted({layer for a in arms[1:] for layer in
                         list(s["vs_reference"][a]["delta_D"]) + s["vs_reference"][a]["delta_D_skipped"]})
        L += ["", f"## Attention distance: Δ D_l = D_l(arm) - D_l({ref}), in positions", "",
              "| layer | " + " | ".join(arms[1:]) + " |", "|---" * len(arms) + "|"]
        for layer in layers:
            L.append(f"| {layer} | " + " | ".join(interval(s["vs_reference"][a]["delta_D"].get(layer), '+.3f')
                                                 for a in arms[1:]) + " |")
        if any(s["vs_reference"][a]["delta_D_skipped"] for a in arms[1:]):
            L += ["", "n/a: a layer that attn_distance skips (linear attention forms no attention matrix)."]
    return "\n".join(L) + "\n"


def ema(values, beta):
    out, m = [], None
    for v in values:
        m = v if m is None else beta * m + (1 - beta) * v
        out.append(m)
    return out


def plot_loss(runs, arms, out, beta):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # Arms whose curves coincide must stay visible: each arm has its own dash pattern and the
    # later arms are drawn thinner on top, so an arm under another shows at its edges and gaps
    dashes = ["-", (0, (5, 2)), (0, (1, 1.5)), (0, (5, 2, 1, 2)), (0, (8, 3)), (0, (2, 3))]
    for i, a in enumerate(arms):
        c = colours[i % len(colours)]
        ls, lw = dashes[i % len(dashes)], max(0.8, 2.6 - 0.6 * i)
        for j, (seed, r) in enumerate(sorted(runs[a].items())):
            tr = [(st, v) for st, v, *_ in r["series"].get("train", []) if math.isfinite(v)]
            if tr:
                xs, ys = zip(*tr)
                ax.plot(xs, ys, color=c, alpha=0.15, linewidth=0.7)
                ax.plot(xs, ema(ys, beta), color=c, linewidth=lw, linestyle=ls, zorder=2 + i,
                        label=f"{a} (train, EMA {beta})" if j == 0 else None)
            va = [(st, v) for st, v in r["series"].get("val", []) if math.isfinite(v)]
            if va:
                xs, ys = zip(*va)
                ax.plot(xs, ys, color=c, marker="osD^v*"[i % 6], markersize=max(3, 7 - 1.5 * i),
                        fillstyle="none" if i % 2 else "full", linestyle="none", zorder=2 + i,
                        label=f"{a} (val)" if j == 0 else None)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats)")
    ax.set_title("loss per arm: one line per seed; raw train loss faint")
    ax.legend(fontsize=8)
    save_png(fig, out)


def plot_delta(s, out):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    arms = [a for a in s["arms"][1:] if s["vs_reference"][a]["delta_D"]]
    width = 0.8 / max(1, len(arms))
    for i, a in enumerate(arms):
        dd = s["vs_reference"][a]["delta_D"]
        layers = sorted(dd)
        xs = [layer + (i - (len(arms) - 1) / 2) * width for layer in layers]
        ys = [dd[layer]["mean"] for layer in layers]
        err = [[(dd[layer]["mean"] - dd[layer]["ci95"][0]) if dd[layer]["n"] > 1 else 0 for layer in layers],
               [(dd[layer]["ci95"][1] - dd[layer]["mean"]) if dd[layer]["n"] > 1 else 0 for layer in layers]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=3, label=f"{a} - {s['reference']}")
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("layer")
    ax.set_ylabel("Δ D_l (positions)")
    ax.set_title("attention distance difference per layer, 95% interval over seeds")
    ax.legend(fontsize=8)
    save_png(fig, out)


def main(argv=None):
    p = argparse.ArgumentParser(description="Summarize an A/B over arms and seeds (see the docstring).")
    p.add_argument("dir")
    p.add_argument("--arms", default=None, help="comma list; the first is the reference")
    p.add_argument("--target-loss", type=float, default=None, help="default: the largest final val loss")
    p.add_argument("--smooth", type=float, default=None,
                   help="EMA factor of the plotted train loss (default 1 - 20 / steps, within [0, 0.9])")
    p.add_argument("--plots", type=int, choices=(0, 1), default=1)
    p.add_argument("--markdown", default=None, help="write the Markdown summary here (default DIR/summary.md)")
    p.add_argument("--json", default=None, help="write the numbers here (default DIR/summary.json)")
    a = p.parse_args(argv)
    if a.smooth is not None and not 0.0 <= a.smooth < 1.0:
        print(f"error: --smooth {a.smooth}: expected a factor in [0, 1)", file=sys.stderr)
        return 1
    try:
        wanted = [x for x in a.arms.split(",") if x] if a.arms else None
        runs = collect(a.dir, wanted)
        arms = arm_order(a.dir, runs, wanted)
        floors = optional_json(os.path.join(a.dir, "floors.json"), "scripts/floors.py --json output")
        settings = optional_json(os.path.join(a.dir, "ab.json"), "the settings scripts/ab.py writes")
        s = summarize(a.dir, runs, arms, a.target_loss, floors)
    except (SummaryError, LogError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    md = markdown(a.dir, runs, s, settings)
    print(md, end="")
    md_path = a.markdown or os.path.join(a.dir, "summary.md")
    json_path = a.json or os.path.join(a.dir, "summary.json")
    slim = {arm: {seed: {k: v for k, v in r.items() if k != "series"} for seed, r in rs.items()}
            for arm, rs in runs.items()}
    try:
        write_atomic(md_path, md)
        write_atomic(json_path, json.dumps(json_safe({"runs": slim, "summary": s}), indent=1) + "\n")
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.plots:
        steps = max(r["steps"] for rs in runs.values() for r in rs.values())
        beta = a.smooth if a.smooth is not None else min(0.9, max(0.0, 1.0 - 20.0 / steps))
        plot_loss(runs, arms, os.path.join(a.dir, "loss.png"), round(beta, 3))
        if any(s["vs_reference"][x]["delta_D"] for x in arms[1:]):
            plot_delta(s, os.path.join(a.dir, "attn_delta.png"))
    print(f"wrote {md_path}, {json_path}" + (" and the plots" if a.plots else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
