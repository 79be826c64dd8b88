#!/usr/bin/env python3
"""prism/plot_attn_distance.py: per-layer attention distance over depth, and its difference
between two models, from the CSVs written by ./attn_distance (doc/attention_distance.md).

  python prism/plot_attn_distance.py A.csv [B.csv ...] [-o attn_distance.png]
         [--stats D,D_norm,sink] [--labels a,b]

Top row: one panel per statistic, the layer value (the head mean, CSV rows with head "mean")
against the layer index, one line per model in every CSV. Bottom row, when there is a pair to
compare: Delta_l = first minus second, the paper's "flip" reading (doc/attention_distance.md "Definitions": Delta D_l < 0
in the early layers, > 0 later). The pairs are
  - each CSV holding two models (./attn_distance -e A -e2 B: the same tokens by construction);
  - otherwise, exactly two single-model CSVs, if they were measured on the same tokens (equal
    val, T and sequences columns); else no Delta row is drawn and the script says why.
Skipped layers (no attention matrix) are gaps. Errors (missing columns, a non-number) are one
line naming the file and line. The PNG is written to NAME.tmp and renamed.
"""
import argparse
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import save_png  # noqa: E402  (scripts/common.py)

STATS = ("D", "D_norm", "sink", "D_nosink", "median", "entropy", "entropy_norm")
REQUIRED = ("model", "layer", "head", "T", "sequences", "val") + STATS
TITLES = {"D": "D_l (tokens)", "D_norm": "position-normalized D_l", "sink": "sink mass",
          "D_nosink": "D_l without the sink (tokens)", "median": "median distance (tokens)",
          "entropy": "entropy (nats)", "entropy_norm": "entropy / ln(i+1)"}


class CsvError(ValueError):
    """A malformed CSV: the message is the whole one-line error."""


def read_series(path):
    """CSV -> list of (model, {'layers': [...], stat: [...], 'tokens': (val, T, sequences)}) in
    order of first appearance, from the per-layer 'mean' rows."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise CsvError(f"{path}: cannot open: {e.strerror}") from None
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise CsvError(f"{path}:1: missing column(s) {', '.join(missing)} (expected the "
                           f"header written by ./attn_distance -csv)")
        models = {}
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if row["head"] != "mean":
                continue
            if None in row or any(v is None for v in row.values()):
                raise CsvError(f"{where}: expected {len(reader.fieldnames)} fields")
            m = models.setdefault(row["model"], {"layers": [], "tokens": (row["val"], row["T"],
                                                                          row["sequences"])})
            try:
                m["layers"].append(int(row["layer"]))
            except ValueError:
                raise CsvError(f"{where}: layer: expected an integer, got '{row['layer']}'") from None
            for s in STATS:
                text = row[s]
                try:
                    m.setdefault(s, []).append(float(text) if text != "" else math.nan)
                except ValueError:
                    raise CsvError(f"{where}: {s}: expected a number or empty, got '{text}'") from None
    if not models:
        raise CsvError(f"{path}: no per-layer rows (head 'mean')")
    return list(models.items())


def delta(a, b, stat):
    la, lb = dict(zip(a["layers"], a[stat])), dict(zip(b["layers"], b[stat]))
    layers = [l for l in a["layers"] if l in lb]
    return layers, [la[l] - lb[l] for l in layers]


def pairs(per_csv, labels):
    """The (label_a, a, label_b, b) pairs for the Delta row, and a note when there are none."""
    out = []
    for series, labs in zip(per_csv, labels):
        if len(series) == 2:
            out.append((labs[0], series[0][1], labs[1], series[1][1]))
    if out:
        return out, None
    flat = [(lab, s[1]) for series, labs in zip(per_csv, labels) for lab, s in zip(labs, series)]
    if len(flat) != 2:
        return [], "no Delta row: give one CSV written with -e2, or exactly two single-model CSVs"
    if flat[0][1]["tokens"] != flat[1][1]["tokens"]:
        return [], ("no Delta row: the two CSVs were measured on different tokens "
                    f"(val, T, sequences = {flat[0][1]['tokens']} vs {flat[1][1]['tokens']})")
    return [(flat[0][0], flat[0][1], flat[1][0], flat[1][1])], None


def plot(per_csv, labels, stats, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    comparisons, note = pairs(per_csv, labels)
    nrows = 2 if comparisons else 1
    fig, axes = plt.subplots(nrows, len(stats), figsize=(5 * len(stats), 4 * nrows), squeeze=False)
    for c, stat in enumerate(stats):
        ax = axes[0][c]
        for series, labs in zip(per_csv, labels):
            for lab, (_, s) in zip(labs, series):
                ax.plot(s["layers"], s[stat], marker="o", markersize=4, label=lab)
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(TITLES[stat])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        if comparisons:
            ax = axes[1][c]
            for la, a, lb, b in comparisons:
                x, y = delta(a, b, stat)
                ax.plot(x, y, marker="o", markersize=4, label=f"{la} - {lb}")
            ax.axhline(0.0, color="gray", linewidth=1)
            ax.set_xlabel("layer")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title("Delta " + TITLES[stat])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, out)
    return comparisons, note


def default_labels(paths):
    """The model file names without .bin; their folder names instead when the names repeat
    (model_00000300 in every run directory), else the whole paths."""
    for label in (lambda p: os.path.splitext(os.path.basename(p))[0],
                  lambda p: os.path.basename(os.path.dirname(os.path.abspath(p)))):
        labels = [label(p) for p in paths]
        if len(set(labels)) == len(labels):
            return labels
    return list(paths)


def main(argv=None):
    p = argparse.ArgumentParser(description="Plot per-layer attention distance (and Delta) from "
                                            "./attn_distance CSVs.")
    p.add_argument("csvs", nargs="+", help="CSV files written by ./attn_distance -csv")
    p.add_argument("-o", "--out", default="attn_distance.png", help="output PNG")
    p.add_argument("--stats", default="D,D_norm,sink",
                   help=f"comma-separated statistics, one panel each (from {','.join(STATS)})")
    p.add_argument("--labels", default=None,
                   help="comma-separated labels, one per model in CSV order (default: the file "
                        "names, or their folders when the names repeat)")
    a = p.parse_args(argv)
    try:
        stats = a.stats.split(",")
        for s in stats:
            if s not in STATS:
                raise CsvError(f"--stats: '{s}' is not one of {', '.join(STATS)}")
        per_csv = [read_series(x) for x in a.csvs]
        n = sum(len(s) for s in per_csv)
        if a.labels:
            flat = a.labels.split(",")
            if len(flat) != n:
                raise CsvError(f"--labels: {len(flat)} labels for {n} models")
        else:
            flat = default_labels([m for s in per_csv for m, _ in s])
        labels, k = [], 0
        for s in per_csv:
            labels.append(flat[k:k + len(s)])
            k += len(s)
        comparisons, note = plot(per_csv, labels, stats, a.out)
    except CsvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for la, x, lb, y in comparisons:
        lay, d = delta(x, y, "D")
        print(f"Delta D_l ({la} - {lb}): " + " ".join(
            f"{l}:{v:+.3f}" if not math.isnan(v) else f"{l}:-" for l, v in zip(lay, d)))
    if note:
        print(note)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
