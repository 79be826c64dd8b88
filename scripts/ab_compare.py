#!/usr/bin/env python3
"""scripts/ab_compare.py: compare two trainers' stdout step by step (scripts/ab_upstream.sh uses
it for upstream llm.c vs our train_gpt2cu on the same data, flags and init).

  python scripts/ab_compare.py REF.log NEW.log [--labels upstream,ours] [--tol 0.01]
         [--warmup 3] [--tokens-per-step D] [--every K] [--json out.json]

Both logs are llm.c-style stdout (doc/formats.md "main.log and stdout"). The step line
  step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | ... | %.0f tok/s ...
is read for the step, loss, norm, lr and ms (llm.c's MFU field and our CPU trainer's eta field
are ignored), or the CPU demo's (upstream train_gpt2.c, dev/cpu/upstream_cpu_loop.c)
  step %d: train loss %f (took %f ms)
for the step, loss and ms; `val loss %f` lines are read in order. Compared:
  - the train loss at every step both logs have: |new - ref|, the largest, and the first step
    above --tol (nats; default 0.01: bf16 kernels that differ only in summation order stay well
    below it over a short run, a wrong head split or LR does not);
  - the val losses, in order;
  - throughput: tokens/s = D / median(ms) over the steps after --warmup, per log, and new/ref.
    D (--tokens-per-step) defaults to the tok/s column x ms of the last step.
Exit status: 0 when every common step agrees within --tol, 2 when they diverge, 1 on an error (one
line naming the file and line).
"""
import argparse
import json
import math
import re
import statistics
import sys

import os
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import json_safe  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402

STEP = re.compile(r"step\s+(\d+)/(\d+)\s*\|(.*)")
LOSS = re.compile(r"loss\s+(\S+)")
NORM = re.compile(r"norm\s+(\S+)")
LR = re.compile(r"lr\s+(\S+)")
MS = re.compile(r"(\S+)\s+ms$")
TOKS = re.compile(r"(\S+)\s+tok/s$")
VAL = re.compile(r"val loss\s+(\S+)")
CPU_STEP = re.compile(r"step\s+(\d+): train loss\s+(\S+)\s+\(took\s+(\S+)\s+ms\)")


class LogError(ValueError):
    """A malformed log: the message is the whole one-line error."""


def _float(text, where, what):
    try:
        return float(text)
    except ValueError:
        raise LogError(f"{where}: {what}: expected a number, got '{text}'") from None


def parse_stdout(path):
    """-> {'steps': {step: {'loss', 'norm', 'lr', 'ms', 'toks'}}, 'val': [...], 'total': N}."""
    steps, val, total = {}, [], None
    try:
        f = open(path, errors="replace")
    except OSError as e:
        raise LogError(f"{path}: cannot open: {e.strerror}") from None
    with f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            where = f"{path}:{lineno}"
            m = VAL.fullmatch(line)
            if m:
                val.append(_float(m.group(1), where, "val loss"))
                continue
            if not line.startswith("step "):
                continue
            m = CPU_STEP.fullmatch(line)
            if m:
                steps[int(m.group(1))] = {"loss": _float(m.group(2), where, "train loss"),
                                          "ms": _float(m.group(3), where, "ms")}
                continue
            m = STEP.fullmatch(line)
            if not m:
                raise LogError(f"{where}: expected 'step N/M | loss L (...)| norm ... | lr ... | "
                               f"T ms | ...' or 'step N: train loss L (took T ms)', got '{line[:60]}'")
            rec = {}
            fields = [x.strip() for x in m.group(3).split("|")]
            for x in fields:
                for key, rx in (("loss", LOSS), ("norm", NORM), ("lr", LR)):
                    mm = rx.match(x)
                    if mm and key not in rec:
                        rec[key] = _float(mm.group(1), where, key)
                mm = MS.search(x)
                if mm:
                    rec["ms"] = _float(mm.group(1), where, "ms")
                mm = TOKS.search(x)
                if mm:
                    rec["toks"] = _float(mm.group(1), where, "tok/s")
            if "loss" not in rec or "ms" not in rec:
                raise LogError(f"{where}: step line without a 'loss' or an 'ms' field")
            steps[int(m.group(1))] = rec
            total = int(m.group(2))
    if not steps:
        raise LogError(f"{path}: no 'step N/M | loss ...' or 'step N: train loss ...' lines (is this a "
                       f"trainer's stdout?)")
    return {"steps": steps, "val": val, "total": total}


def throughput(log, warmup, tokens_per_step):
    """tokens/s from the median step time after the warm-up steps."""
    steps = sorted(log["steps"])
    times = [log["steps"][s]["ms"] for s in steps if s > warmup] or \
            [log["steps"][s]["ms"] for s in steps]
    med = statistics.median(times)
    if tokens_per_step is None:
        last = log["steps"][steps[-1]]
        if "toks" not in last:
            return med, None
        tokens_per_step = last["toks"] * last["ms"] / 1000.0
    return med, tokens_per_step / (med / 1000.0)


def compare(ref, new, tol, warmup=3, tokens_per_step=None):
    common = sorted(set(ref["steps"]) & set(new["steps"]))
    rows = [(s, ref["steps"][s]["loss"], new["steps"][s]["loss"]) for s in common]
    diffs = [abs(b - a) if not (math.isnan(a) or math.isnan(b)) else math.inf for _, a, b in rows]
    first_bad = next((s for (s, _, _), d in zip(rows, diffs) if d > tol), None)
    nval = min(len(ref["val"]), len(new["val"]))
    val_diffs = [new["val"][i] - ref["val"][i] for i in range(nval)]
    ref_ms, ref_tps = throughput(ref, warmup, tokens_per_step)
    new_ms, new_tps = throughput(new, warmup, tokens_per_step)
    return {
        "common_steps": len(common),
        "only_ref": len(ref["steps"]) - len(common),
        "only_new": len(new["steps"]) - len(common),
        "rows": rows,
        "max_abs_diff": max(diffs) if diffs else math.nan,
        "first_step_above_tol": first_bad,
        "tol": tol,
        "val_diffs": val_diffs,
        "ref_ms": ref_ms, "new_ms": new_ms,
        "ref_tok_s": ref_tps, "new_tok_s": new_tps,
        "tok_s_ratio": (new_tps / ref_tps) if ref_tps and new_tps else None,
        "agree": bool(common) and first_bad is None,
    }


def report(c, labels, every):
    a, b = labels
    out = [f"{'step':>6} {a:>12} {b:>12} {'diff':>10}"]
    rows = c["rows"]
    for i, (s, x, y) in enumerate(rows):
        if every and i % every and i != len(rows) - 1 and s != c["first_step_above_tol"]:
            continue
        out.append(f"{s:>6} {x:>12.6f} {y:>12.6f} {y - x:>+10.6f}")
    out.append(f"steps compared: {c['common_steps']} (only in {a}: {c['only_ref']}, only in {b}: "
               f"{c['only_new']}); max |loss difference| {c['max_abs_diff']:.3g} nats")
    if c["val_diffs"]:
        out.append("val loss differences (" + b + " - " + a + "): " +
                   " ".join(f"{d:+.4f}" for d in c["val_diffs"]))
    tps = lambda v: "n/a" if v is None else f"{v:,.0f}"
    out.append(f"throughput (median step after warm-up): {a} {c['ref_ms']:.2f} ms = {tps(c['ref_tok_s'])} "
               f"tok/s, {b} {c['new_ms']:.2f} ms = {tps(c['new_tok_s'])} tok/s" +
               (f", {b}/{a} = {c['tok_s_ratio']:.3f}" if c["tok_s_ratio"] else ""))
    if c["agree"]:
        out.append(f"AGREE: the train losses match within {c['tol']} nats at all "
                   f"{c['common_steps']} common steps")
    elif not c["common_steps"]:
        out.append("DIFFER: the two logs have no step in common")
    else:
        out.append(f"DIFFER: the train losses first differ by more than {c['tol']} nats at step "
                   f"{c['first_step_above_tol']}")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description="Compare two trainers' stdout logs step by step.")
    p.add_argument("ref", help="reference stdout log (e.g. upstream llm.c)")
    p.add_argument("new", help="stdout log to check (e.g. ours)")
    p.add_argument("--labels", default="upstream,ours")
    p.add_argument("--tol", type=float, default=0.01, help="nats per step (default 0.01)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    p.add_argument("--tokens-per-step", type=int, default=None)
    p.add_argument("--every", type=int, default=0, help="print every K-th step row (0: all)")
    p.add_argument("--json", default=None, help="also write the comparison here")
    a = p.parse_args(argv)
    try:
        labels = a.labels.split(",")
        if len(labels) != 2:
            raise LogError(f"--labels {a.labels}: expected two comma-separated labels")
        c = compare(parse_stdout(a.ref), parse_stdout(a.new), a.tol, a.warmup, a.tokens_per_step)
    except LogError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(report(c, labels, a.every))
    if a.json:
        doc = {k: v for k, v in c.items() if k != "rows"}
        doc.update(steps=[list(r) for r in c["rows"]], labels=labels)
        write_atomic(a.json, json.dumps(json_safe(doc), indent=1))
        print(f"wrote {a.json}")
    return 0 if c["agree"] else 2


if __name__ == "__main__":
    sys.exit(main())
