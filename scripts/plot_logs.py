#!/usr/bin/env python3
"""scripts/plot_logs.py: train/val loss (and eval) curves of several runs in one PNG.

  python scripts/plot_logs.py RUN [RUN ...] [-o loss.png] [--labels a,b] [--baseline 3.28:llm.c]

RUN is a run's output directory (the trainer's -o, holding main.log) or a main.log path. The
format is llm.c's main.log (doc/formats.md "main.log and stdout"; read by llmc_formats/main_log.py), one record per
line, `s` the 0-based step:

  s:%d trl:%.4f lr:%.6f norm:%.2f      train loss, learning rate, grad norm (older llm.c
                                       logs: trl alone)
  s:%d tel:%.4f                        val loss
  s:%d eval:%.4f                       HellaSwag acc_norm (llm.c's -h 1)
  s:%d eval_<task>:%.4f                other zero-shot evals (accepted and plotted alike)

A resumed run (-y 1) appends to main.log and logs again from its checkpoint's step: a step that
does not increase within a series replaces everything from that step on, so the curve is the
run that actually continued. Any other line is an error, reported in one line with its file and
line number. The figure has a loss panel (train loss thin, val loss with markers, one colour per
run) and, when any eval records exist, an eval panel. The PNG is written to NAME.tmp and renamed.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from llmc_formats.main_log import LogError, log_path, parse_main_log  # noqa: E402,F401
from scripts.common import pyplot, save_png  # noqa: E402


def parse_baseline(text):
    value, _, label = text.partition(":")
    try:
        return float(value), label or value
    except ValueError:
        raise LogError(f"--baseline {text}: expected VALUE or VALUE:LABEL, e.g. 3.2722:llm.c") from None


def plot(runs, labels, baselines, out, title):
    plt = pyplot()

    eval_names = sorted({k for s in runs for k in s if k == "eval" or k.startswith("eval_")})
    ncols = 2 if eval_names else 1
    fig, axes = plt.subplots(1, ncols, figsize=(7 * ncols, 5), squeeze=False)
    ax = axes[0][0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (series, label) in enumerate(zip(runs, labels)):
        c = colors[i % len(colors)]
        if "train" in series:
            x, y = zip(*series["train"])
            ax.plot(x, y, color=c, alpha=0.35, linewidth=0.8, label=f"{label} train")
        if "val" in series:
            x, y = zip(*series["val"])
            ax.plot(x, y, color=c, marker="o", markersize=3, linewidth=1.5, label=f"{label} val")
    for value, label in baselines:
        ax.axhline(value, color="gray", linestyle="--", linewidth=1)
        ax.annotate(label, (0, value), xycoords=("axes fraction", "data"), fontsize=8,
                    color="gray", va="bottom")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats)")
    ax.set_title(title or "train / val loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if eval_names:
        ax = axes[0][1]
        styles = ["-", "--", ":", "-."]
        for i, (series, label) in enumerate(zip(runs, labels)):
            for j, name in enumerate(eval_names):
                if name in series:
                    x, y = zip(*series[name])
                    ax.plot(x, y, color=colors[i % len(colors)], linestyle=styles[j % len(styles)],
                            marker=".", label=f"{label} {name}")
        ax.set_xlabel("step")
        ax.set_ylabel("accuracy")
        ax.set_title("evals ('eval' = HellaSwag acc_norm)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, out)


def main(argv=None):
    p = argparse.ArgumentParser(description="Plot train/val loss and evals of llm.c-style runs "
                                            "(main.log) in one PNG.")
    p.add_argument("runs", nargs="+", help="run directories (with main.log) or main.log files")
    p.add_argument("-o", "--out", default="loss.png", help="output PNG (default loss.png)")
    p.add_argument("--labels", default=None, help="comma-separated legend labels, one per run")
    p.add_argument("--baseline", action="append", default=[],
                   help="horizontal reference line VALUE[:LABEL]; repeatable")
    p.add_argument("--title", default=None)
    a = p.parse_args(argv)
    try:
        paths = [log_path(r) for r in a.runs]
        labels = a.labels.split(",") if a.labels else [os.path.basename(os.path.dirname(
            os.path.abspath(x))) for x in paths]
        if len(labels) != len(paths):
            raise LogError(f"--labels: {len(labels)} labels for {len(paths)} runs")
        runs = [parse_main_log(x) for x in paths]
        baselines = [parse_baseline(b) for b in a.baseline]
        plot(runs, labels, baselines, a.out, a.title)
    except (LogError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path, series, label in zip(paths, runs, labels):
        last_val = series.get("val", [(None, None)])[-1]
        extra = f", last val loss {last_val[1]:.4f} at step {last_val[0]}" if last_val[0] is not None else ""
        print(f"{label}: {len(series.get('train', []))} train steps{extra} ({path})")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
