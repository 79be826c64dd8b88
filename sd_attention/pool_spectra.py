"""sd_attention/pool_spectra.py: several ./sd_spectrum JSON files -> one table of the head analysis
(arXiv 2605.18826: 1,776 heads over GPT-2 small/medium/large, BERT-base and Pythia-410M;
doc/sd_tools.md "The 1,776-head analysis").

    python sd_attention/pool_spectra.py gpt2=gpt2.json gpt2-medium=gpt2m.json bert.json \
        [--csv pooled.csv] [--json pooled.json]

Each argument is NAME=FILE.json or FILE.json (the name is then the file's stem). Per model, over
every head of every layer of the file (layers[].heads[] of sd_spectrum's -json output):
  heads            the number of heads;
  filtering share  the mean of rho_F = ||F||_F^2 / ||M||_F^2 (F the symmetric part of the head
                   kernel; 1 - the routing share rho_R);
  routing erank    the mean effective rank (Roy-Vetterli) of the routing part (R = skew part of M
                   for standard heads, S for S-D heads);
  unstable         the fraction of heads sd_spectrum flagged unstable (alpha > eps * rho, at the
                   eps each file was written with), and their count.
The last row, "all", pools the heads of every model: each head counts once, so a model weighs by
its head count (not the mean of the model means).

Markdown goes to stdout; --csv and --json (each written to NAME.tmp, then renamed; their
directories are checked before any input is read) hold the same numbers at full precision.
A missing or unreadable file, a file that is not sd_spectrum JSON, or a head without one of the
fields is a one-line error naming the file.
"""
import argparse
import csv
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import json_safe, read_json  # noqa: E402  (scripts/common.py)
from llmc_formats.atomic import write_atomic  # noqa: E402


class InputError(ValueError):
    """A bad argument or input file; the message names it."""


FIELDS = ("rho_F", "erank", "unstable")
COLUMNS = ("model", "heads", "rho_F_mean", "erank_mean", "frac_unstable", "n_unstable", "eps", "file")


def read_heads(path):
    """[(rho_F, erank, unstable)] over every head of an sd_spectrum JSON file, and its eps."""
    data = read_json(path, "./sd_spectrum -json output", InputError)
    if not isinstance(data, dict) or not isinstance(data.get("layers"), list) or not data["layers"]:
        raise InputError(f"{path}: field 'layers': expected sd_spectrum -json output (a non-empty list)")
    heads = []
    for i, layer in enumerate(data["layers"]):
        if not isinstance(layer, dict) or not isinstance(layer.get("heads"), list):
            raise InputError(f"{path}: layers[{i}].heads: expected a list of heads")
        for k, h in enumerate(layer["heads"]):
            vals = []
            for field in FIELDS:
                v = h.get(field) if isinstance(h, dict) else None
                want = bool if field == "unstable" else (int, float)
                if not isinstance(v, want) or (field != "unstable" and isinstance(v, bool)):
                    raise InputError(f"{path}: layers[{i}].heads[{k}].{field}: {v!r}: expected "
                                     f"{'true/false' if field == 'unstable' else 'a number'}")
                vals.append(v)
            heads.append(tuple(vals))
    if not heads:
        raise InputError(f"{path}: no heads in any layer")
    return heads, data.get("eps")


def summarize(name, heads, eps=None, path=None):
    n = len(heads)
    unstable = sum(1 for _, _, u in heads if u)
    return {"model": name, "heads": n, "rho_F_mean": sum(h[0] for h in heads) / n,
            "erank_mean": sum(h[1] for h in heads) / n, "frac_unstable": unstable / n,
            "n_unstable": unstable, "eps": eps, "file": path}


def parse_inputs(specs):
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = os.path.splitext(os.path.basename(spec))[0], spec
        if not name or not path:
            raise InputError(f"{spec}: expected NAME=FILE.json or FILE.json")
        if name == "all" or name in (n for n, _ in out):
            raise InputError(f"{spec}: model name '{name}' is {'reserved' if name == 'all' else 'given twice'}")
        out.append((name, path))
    return out


def check_output(flag, path):
    if path is None:
        return
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise InputError(f"{flag} {path}: directory {d} does not exist")
    if not os.access(d, os.W_OK):
        raise InputError(f"{flag} {path}: directory {d} is not writable")


def markdown(rows):
    lines = ["| model | heads | filtering share (mean rho_F) | routing erank (mean) | unstable heads |",
             "|---|---:|---:|---:|---:|"]
    for i, r in enumerate(rows):
        name = "**all**" if i == len(rows) - 1 else r["model"]   # the pooled row is last
        lines.append(f"| {name} | {r['heads']} | {r['rho_F_mean']:.4f} | {r['erank_mean']:.2f} | "
                     f"{r['frac_unstable']:.4f} ({r['n_unstable']}) |")
    return "\n".join(lines) + "\n"


def to_csv(rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(["" if r[c] is None else repr(r[c]) if isinstance(r[c], float) else r[c] for c in COLUMNS])
    return buf.getvalue()


def main(argv=None):
    p = argparse.ArgumentParser(description="pool ./sd_spectrum -json files into one table per model "
                                "plus all heads pooled (doc/sd_tools.md)")
    p.add_argument("inputs", nargs="+", metavar="[NAME=]FILE.json")
    p.add_argument("--csv", default=None, help="also write the table as CSV")
    p.add_argument("--json", default=None, help="also write the table as JSON")
    args = p.parse_args(argv)
    try:
        check_output("--csv", args.csv)
        check_output("--json", args.json)
        models = parse_inputs(args.inputs)
        rows, pooled = [], []
        for name, path in models:
            heads, eps = read_heads(path)
            rows.append(summarize(name, heads, eps, path))
            pooled += heads
        eps_all = {r["eps"] for r in rows}
        rows.append(summarize("all", pooled, eps_all.pop() if len(eps_all) == 1 else None))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(markdown(rows))
    if args.csv:
        write_atomic(args.csv, to_csv(rows))
    if args.json:
        write_atomic(args.json, json.dumps(json_safe({"models": rows[:-1], "all": rows[-1]}), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
