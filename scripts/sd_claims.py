#!/usr/bin/env python3
"""scripts/sd_claims.py: the S-D paper's small-scale claims (arXiv 2605.18826; doc/methods.md 3,
claims S2-S11 of doc/methods.md 4) from one command, at two or more model sizes on the CPU.

  python3 scripts/sd_claims.py                         # tiny and small on the prose corpus
  python3 scripts/sd_claims.py --sizes tiny --steps 150 --dry-run
  python3 scripts/sd_claims.py --help

For every size, four models of the same shape are trained from the same init seed and data
order (make train's recipe: lr 1e-3, cosine to 0.1 of it, weight decay 0.1):
  mha        standard softmax attention with per-block LayerNorm (the baseline)
  mha_noln   standard attention without LayerNorm (-ln 0)                       S11
  sd_noln    S-D attention L = S - D without LayerNorm (-ln 0 -sd_init_u 1)     S2, S3, S9
  sd_scalar  the same with one filtering scalar per head (-sd_scalar_d 1)       S8
(S-D without LayerNorm needs U at std 1 so that the initial logits are O(1): doc/sd_attention.md.)
Then, per model:
  - ./sd_spectrum -json: the routing effective rank per layer (S for S-D heads, the skew part of
    W_Q W_K^T for standard heads; doc/methods.md 3.9, 3.10) and the minimal-rank layers;
  - ./sd_surgery -op linearize -k K for K = 1 .. L-1: the val perplexity after replacing the first
    K layers by linear attention without retraining (doc/methods.md 3.13 (a));    S4
  - S-D models: ./sd_surgery -op shrink -rank90 1 -round8 1: every head cut to the rank that holds
    90 % of its routing energy, with the attention parameters before and after (3.13, 3.14).  S6
The summary (--out/claims.md and claims.json) is one table per size and the claim rows: what the
paper states, the number measured here, and whether the small-scale run agrees. One seed: the
numbers carry no noise estimate (scripts/ab.py runs seeds for a paired comparison).
Finished steps are skipped when started again (--out/settings.json records the data, seed and
step counts; a directory holding a run with other settings is refused); --dry-run prints every
command.
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from common import read_json, write_atomic  # noqa: E402

SIZES = {  # descriptor, heads, batch, steps, surgery val batches
    "tiny": dict(model="L4C128H4T128", L=4, H=4, B=4, T=64, steps=200, val_batches=16),
    "small": dict(model="L8C256H4T256", L=8, H=4, B=4, T=128, steps=300, val_batches=16),
}
ARMS = {  # table entry kind, extra trainer flags
    "mha": ("", []),
    "mha_noln": ("", ["-ln", "0"]),
    "sd_noln": (":sd", ["-ln", "0", "-sd_init_u", "1"]),
    "sd_scalar": (":sd", ["-ln", "0", "-sd_init_u", "1", "-sd_scalar_d", "1"]),
}
DATA = {"prose": ("dev/data/prose/prose_train_*.bin", "dev/data/prose/prose_val_*.bin", "make prose"),
        "shakespeare": ("dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
                        "dev/data/tinyshakespeare/tiny_shakespeare_val.bin", "make data")}


class ClaimsError(Exception):
    """The whole one-line error."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (ClaimsError), not usage + message."""

    def error(self, message):
        raise ClaimsError(message)


def quoted(cmd):
    return " ".join(shlex.quote(str(c)) for c in cmd)


class Steps:
    """Every command, per size and arm; run() executes what is not finished."""

    def __init__(self, a):
        self.a = a
        self.train, self.val, self.prepare = DATA[a.data]

    def base(self, size, arm):
        return os.path.join(self.a.out, size, arm)

    def steps(self, size):
        return self.a.steps or SIZES[size]["steps"]

    def ckpt(self, size, arm):
        return os.path.join(self.base(size, arm), "model_%08d.bin" % self.steps(size))

    def commands(self, size, arm):
        """[(command, log, output that marks it finished)]."""
        p, n = SIZES[size], self.steps(size)
        kind, extra = ARMS[arm]
        b = self.base(size, arm)
        table = b + ".table.txt"
        ck = self.ckpt(size, arm)
        out = [(["./train_gpt2", "-e", p["model"], "-prism", table] + extra +
                ["-seed", str(self.a.seed), "-i", self.train, "-j", self.val, "-b", str(p["B"]),
                 "-t", str(p["T"]), "-x", str(n), "-l", "1e-3", "-u", str(min(20, max(1, n // 5))),
                 "-q", "0.1", "-c", "0.1", "-v", str(n), "-m", str(p["val_batches"]), "-s", "0",
                 "-n", str(n), "-o", b], b + ".train.log", ck),
               (["./sd_spectrum", ck, "-json", b + ".spectrum.json"], b + ".spectrum.txt", b + ".spectrum.json")]
        ev = ["-j", self.val, "-m", str(p["val_batches"]), "-b", str(p["B"]), "-t", str(p["T"])]
        for k in range(1, p["L"]):
            out.append((["./sd_surgery", "-e", ck, "-o", f"{b}.lin{k}.bin", "-op", "linearize", "-k", str(k)]
                        + ev + ["-eval_before", "1" if k == 1 else "0"], f"{b}.lin{k}.log", f"{b}.lin{k}.report.json"))
        if kind == ":sd":
            out.append((["./sd_surgery", "-e", ck, "-o", f"{b}.shrink.bin", "-op", "shrink", "-rank90", "1",
                         "-round8", "1"] + ev, f"{b}.shrink.log", f"{b}.shrink.report.json"))
        return out

    def table(self, size, arm):
        return f"{SIZES[size]['H']}{ARMS[arm][0]}*{SIZES[size]['L']}\n"


def missing(a, st):
    out = []
    for f in ("./train_gpt2", "./sd_spectrum", "./sd_surgery"):
        if not os.access(f, os.X_OK):
            out.append(f"{f}: not built (make train_gpt2 sd_spectrum sd_surgery)")
    import glob
    for g in (st.train, st.val):
        if not glob.glob(g):
            out.append(f"{g}: no shard matches (prepare it: {st.prepare})")
    return out


def stamp(a, st, sizes):
    """Write or check OUT/settings.json: finished steps are reused only under the same settings."""
    path = os.path.join(a.out, "settings.json")
    settings = {"data": a.data, "seed": a.seed, "steps": {s: st.steps(s) for s in SIZES}}
    if os.path.exists(path):
        old = load(path)
        if old != settings:
            diff = sorted(k for k in settings if settings[k] != old.get(k))
            raise ClaimsError(f"{path}: this directory holds a run with other settings ({', '.join(diff) or 'format'} "
                              f"differ: {json.dumps(old, sort_keys=True)}); use another --out or the same settings")
    else:
        write_atomic(path, json.dumps(settings, sort_keys=True) + "\n")


def run_all(a, st, sizes):
    stamp(a, st, sizes)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    for size in sizes:
        for arm in ARMS:
            b = st.base(size, arm)
            os.makedirs(os.path.dirname(b), exist_ok=True)
            write_atomic(b + ".table.txt", st.table(size, arm))
            for cmd, log, done in st.commands(size, arm):
                if os.path.exists(done):
                    continue
                t0 = time.time()
                with open(log, "w") as f:
                    rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
                if rc != 0:
                    raise ClaimsError(f"{log}: {cmd[0]} failed (exit {rc})")
                for tmp in (cmd[cmd.index("-o") + 1],) if cmd[0] == "./sd_surgery" else ():
                    if os.path.exists(tmp):
                        os.remove(tmp)  # the surgered checkpoint: only its report is kept
                print(f"{size} {arm}: {os.path.basename(log)} {time.time() - t0:.0f} s", flush=True)


def final_val(run_dir):
    with open(os.path.join(run_dir, "main.log")) as f:
        vals = [float(line.split("tel:")[1]) for line in f if " tel:" in line]
    return vals[-1]


def load(path):
    return read_json(path, "the output of an earlier step; remove it to run that step again", ClaimsError)


def measure(a, st, size):
    p = SIZES[size]
    m = {"model": p["model"], "steps": st.steps(size), "arms": {}}
    for arm in ARMS:
        b = st.base(size, arm)
        spec = load(b + ".spectrum.json")
        lin1 = load(f"{b}.lin1.report.json")["val"]
        lin = {k: load(f"{b}.lin{k}.report.json")["val"]["ppl_after"] / lin1["ppl_before"] - 1.0
               for k in range(1, p["L"])}
        r = {"val": final_val(b), "erank": [x["erank_mean"] for x in spec["layers"]],
             "minimal_fraction": spec["minimal_rank"]["layers_frac"],
             "frac_unstable": max(x["frac_unstable"] for x in spec["layers"]),
             "ppl": lin1["ppl_before"], "linearize_ppl_change": lin,
             "linearizable": max([k for k, v in lin.items() if v < 0.05], default=0)}
        if os.path.exists(b + ".shrink.report.json"):
            sh = load(b + ".shrink.report.json")
            before, after = sh["attention_params"]
            r["shrink"] = {"attention_params": [before, after], "cut": 1.0 - after / before,
                           "ppl_change": sh["val"]["ppl_change"], "layers_after": sh["layers_after"]}
        m["arms"][arm] = r
    return m


def claim_rows(ms):
    """[(claim, paper, measured per size, {size: agrees?} or None)]."""
    def per(fn):
        return "; ".join(f"{s}: {fn(m)}" for s, m in ms.items())

    def each(fn):
        return {s: bool(fn(m)) for s, m in ms.items()}
    rows = []
    rows.append(("S2", "S-D attention trains stably without LayerNorm; Re(λ) <= 0 by construction",
                 per(lambda m: f"val {m['arms']['sd_noln']['val']:.3f} without LN vs {m['arms']['mha']['val']:.3f} "
                               f"(mha with LN); unstable heads {m['arms']['sd_noln']['frac_unstable']:.0%}"),
                 each(lambda m: math.isfinite(m["arms"]["sd_noln"]["val"])
                      and m["arms"]["sd_noln"]["frac_unstable"] == 0)))
    rows.append(("S3/S9", "the routing erank is lowest in the first layer (erank 2) and grows with depth",
                 per(lambda m: "S erank by layer " + " ".join(f"{v:.1f}" for v in m["arms"]["sd_noln"]["erank"])),
                 # agrees: the first layer near one rotation plane (erank < 3) and the last at
                 # least 1.5 times the first (a rise larger than layer-to-layer noise)
                 each(lambda m: m["arms"]["sd_noln"]["erank"][0] < 3.0
                      and m["arms"]["sd_noln"]["erank"][-1] > 1.5 * m["arms"]["sd_noln"]["erank"][0])))
    rows.append(("S4", "the first layers of an S-D model can be linearized after training at < 5 % perplexity; "
                       "standard attention collapses",
                 per(lambda m: f"layers linearizable at < 5 %: S-D {m['arms']['sd_noln']['linearizable']}, "
                               f"mha {m['arms']['mha']['linearizable']} (K = 1: S-D "
                               f"{m['arms']['sd_noln']['linearize_ppl_change'][1]:+.1%}, mha "
                               f"{m['arms']['mha']['linearize_ppl_change'][1]:+.1%})"),
                 each(lambda m: m["arms"]["sd_noln"]["linearizable"] > m["arms"]["mha"]["linearizable"])))
    rows.append(("S6", "heads shrunk to the measured routing rank: 47-65 % fewer attention parameters at "
                       "+3.9 to +8.4 % perplexity",
                 per(lambda m: f"-{m['arms']['sd_noln']['shrink']['cut']:.0%} attention parameters at "
                               f"{m['arms']['sd_noln']['shrink']['ppl_change']:+.1%} perplexity (no retraining)"),
                 None))
    rows.append(("S8", "scalar filtering (one D value per head) costs about +0.3 perplexity",
                 per(lambda m: f"val loss {m['arms']['sd_scalar']['val'] - m['arms']['sd_noln']['val']:+.4f} nats "
                               f"(ppl {m['arms']['sd_scalar']['ppl'] - m['arms']['sd_noln']['ppl']:+.2f}, "
                               f"{m['arms']['sd_scalar']['ppl'] / m['arms']['sd_noln']['ppl'] - 1:+.1%}) vs full D"),
                 None))
    rows.append(("S11", "standard models train without LayerNorm too (the comparison of the abstract)",
                 per(lambda m: f"mha without LN {m['arms']['mha_noln']['val']:.3f} vs with {m['arms']['mha']['val']:.3f}"),
                 each(lambda m: math.isfinite(m["arms"]["mha_noln"]["val"]))))
    return rows


def agrees_text(ok):
    """'n/a', 'yes', 'no', or per size ('tiny: no, small: yes') when the sizes differ."""
    if ok is None:
        return "n/a"
    if len(set(ok.values())) == 1:
        return "yes" if next(iter(ok.values())) else "no"
    return ", ".join(f"{s}: {'yes' if v else 'no'}" for s, v in ok.items())


def report(a, st, sizes):
    ms = {s: measure(a, st, s) for s in sizes}
    L = [f"# S-D claims at small scale ({a.data}, seed {a.seed})", ""]
    for s, m in ms.items():
        L += [f"## {s}: {m['model']}, {m['steps']} steps", "",
              "| arm | final val loss | ppl | routing erank by layer | minimal-rank layers | linearizable (< 5 %) |",
              "|---|---|---|---|---|---|"]
        for arm, r in m["arms"].items():
            mf = r["minimal_fraction"]
            L.append(f"| {arm} | {r['val']:.4f} | {r['ppl']:.2f} | {' '.join(f'{v:.1f}' for v in r['erank'])} | "
                     f"{'n/a' if mf is None else f'{mf:.0%}'} | {r['linearizable']} |")
        L.append("")
    L += ["## Claims", "", "| # | the paper | measured | agrees |", "|---|---|---|---|"]
    rows = claim_rows(ms)
    for c, paper, got, ok in rows:
        L.append(f"| {c} | {paper} | {got} | {agrees_text(ok)} |")
    text = "\n".join(L) + "\n"
    write_atomic(os.path.join(a.out, "claims.md"), text)
    write_atomic(os.path.join(a.out, "claims.json"), json.dumps(
        {"sizes": ms, "claims": [{"claim": c, "measured": g, "agrees": ok} for c, _, g, ok in rows]},
        indent=1, default=str) + "\n")
    print(text, end="")
    print(f"wrote {os.path.join(a.out, 'claims.md')} and claims.json")


def main(argv=None):
    p = Parser(prog="scripts/sd_claims.py", description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="tiny,small", help="comma list of tiny, small (default both)")
    p.add_argument("--data", choices=list(DATA), default="prose")
    p.add_argument("--steps", type=int, default=None, help="steps per model (default: 200 tiny, 300 small)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="out/sd_claims")
    p.add_argument("--dry-run", action="store_true")
    try:
        a = p.parse_args(argv)
        os.chdir(ROOT)
        sizes = [s for s in a.sizes.split(",") if s]
        bad = [s for s in sizes if s not in SIZES]
        if bad or not sizes:
            raise ClaimsError(f"--sizes {a.sizes}: expected a comma list of {', '.join(SIZES)}")
        if a.steps is not None and a.steps < 1 or a.seed < 0 or a.threads < 1:
            raise ClaimsError("--steps, --threads: expected positive integers; --seed: non-negative")
        st = Steps(a)
        miss = missing(a, st)
        if a.dry_run:
            for s in sizes:
                for arm in ARMS:
                    print(f"printf '{st.table(s, arm).strip()}\\n' > {st.base(s, arm)}.table.txt")
                    for cmd, log, _ in st.commands(s, arm):
                        print(f"OMP_NUM_THREADS={a.threads} {quoted(cmd)} > {log}")
            for m in miss:
                print(f"warning: missing input (a real run stops here): {m}", file=sys.stderr)
            return 0
        if miss:
            for m in miss:
                print(f"error: {m}", file=sys.stderr)
            return 1
        run_all(a, st, sizes)
        report(a, st, sizes)
    except (ClaimsError, OSError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
