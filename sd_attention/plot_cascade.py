"""sd_attention/plot_cascade.py: the spectral cascade (arXiv 2605.18826; doc/methods.md "The spectral cascade") as a PNG: effective rank
of the routing part over depth, from the output of ./sd_spectrum.

    python3 sd_attention/plot_cascade.py spectrum.json cascade.png
    python3 sd_attention/plot_cascade.py spectrum.csv  cascade.png    (per-head rows)

Per layer, over its heads, one quantity per line, each named in words in the legend: the mean and
the median Roy-Vetterli effective rank (the primary curve), the mean participation ratio, the mean
stable rank and the mean rank90 = 2 n90 (doc/methods.md "Effective rank"); with S-D layers also the mean
effective rank of the token-space routing U S U^T. All share one rank axis; the routing capacity
(min(2d, C) for standard heads, d for S-D heads) is dotted and minimal rank (one rotation plane,
erank 2) a thin line. Markers tell the matrix: circles for S (S-D layers), squares for R (standard
layers).
Matplotlib's Agg backend (no display); the PNG is written to NAME.tmp, then renamed.
"""
import csv
import json
import statistics
import sys

import os
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import pyplot, save_png  # noqa: E402  (scripts/common.py)

plt = pyplot()


class InputError(ValueError):
    """A file that is not sd_spectrum output; the message names the file and the field."""


# per-head values read (x_erank is absent from files of older versions: NaN, not drawn)
QUANTITIES = ("erank", "pr", "sr", "rank90", "x_erank")


def _float(v):
    return float("nan") if v in (None, "", "nan") else float(v)


def layers_from_json(path):
    """[{layer, kind, family, capacity, heads: [{erank, pr, sr, rank90}]}] from -json output, and
    the checkpoint's name."""
    with open(path) as f:
        data = json.load(f)
    if "layers" not in data:
        raise InputError(f"{path}: no 'layers' key (expected ./sd_spectrum -json output)")
    out = []
    for lay in data["layers"]:
        heads = [{k: _float(h.get(k)) for k in QUANTITIES} for h in lay["heads"]]
        out.append({"layer": lay["layer"], "kind": lay["kind"], "family": lay["family"],
                    "capacity": lay["capacity"], "heads": heads})
    return out, data.get("model", path)


def layers_from_csv(path):
    """The same from -csv output (one row per head)."""
    by_layer = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        need = {"layer", "kind", "family", "capacity", "erank", "pr", "sr", "rank90"}
        if reader.fieldnames is None or not need <= set(reader.fieldnames):
            raise InputError(f"{path}: header line: expected the columns {sorted(need)} "
                             f"(./sd_spectrum -csv output)")
        for row in reader:
            l = int(row["layer"])
            lay = by_layer.setdefault(l, {"layer": l, "kind": row["kind"],
                                          "family": row["family"],
                                          "capacity": int(row["capacity"]), "heads": []})
            lay["heads"].append({k: _float(row.get(k)) for k in QUANTITIES})
    return [by_layer[l] for l in sorted(by_layer)], path


def cascade(layers):
    """Per-layer curves: depth, mean/median erank, mean PR, SR, rank90, capacity, family."""
    rows = []
    for lay in layers:
        hs = lay["heads"]
        mean = lambda k: statistics.fmean(h[k] for h in hs)
        rows.append({"layer": lay["layer"], "family": lay["family"], "capacity": lay["capacity"],
                     "erank_mean": mean("erank"),
                     "erank_median": statistics.median(h["erank"] for h in hs),
                     "pr": mean("pr"), "sr": mean("sr"), "rank90": mean("rank90"),
                     # only S-D layers have a token-space routing distinct from R
                     "x_erank": mean("x_erank") if lay["family"] == "S" else float("nan")})
    return rows


def plot(rows, title, out_path):
    x = [r["layer"] for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    curves = [("erank_mean", "effective rank, mean over heads", "-", 2.2),
              ("erank_median", "effective rank, median over heads", "--", 1.6),
              ("pr", "participation ratio, mean", "-", 1.0), ("sr", "stable rank, mean", "-", 1.0),
              ("rank90", "twice the planes holding 90% of the energy, mean", "-", 1.0)]
    if any(r["family"] == "S" and r["x_erank"] == r["x_erank"] for r in rows):
        curves.append(("x_erank", "effective rank of the token-space routing U S U^T, mean", "-.", 1.2))
    for key, label, style, width in curves:
        line, = ax.plot(x, [r[key] for r in rows], style, lw=width, label=label)
        for fam, marker in (("S", "o"), ("R", "s")):
            pts = [(r["layer"], r[key]) for r in rows if r["family"] == fam]
            if pts:
                ax.plot(*zip(*pts), marker, color=line.get_color(), ms=4)
    ax.plot(x, [r["capacity"] for r in rows], ":", color="gray", label="capacity (most the routing can have)")
    ax.axhline(2.0, color="gray", lw=0.5, label="one rotation plane (minimal rank)")
    for fam, marker, words in (("S", "o", "circles: S-D layers, ranks of the skew S"),
                               ("R", "s", "squares: standard layers, ranks of R, the skew part of W_Q W_K^T")):
        if any(r["family"] == fam for r in rows):
            ax.plot([], [], marker, color="black", ms=4, label=words)
    ax.set_xlabel("layer")
    ax.set_ylabel("rank of the routing part")
    ax.set_title(title, fontsize=9)
    ax.set_xticks(x)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, out_path)


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    src, out = argv[1], argv[2]
    try:
        layers, name = layers_from_csv(src) if src.endswith(".csv") else layers_from_json(src)
        if not layers:
            raise InputError(f"{src}: no layers")
        plot(cascade(layers), f"spectral cascade: {name}", out)
    except (OSError, InputError, KeyError, ValueError) as e:
        print(f"error: {src}: {e}" if not isinstance(e, InputError) else f"error: {e}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
