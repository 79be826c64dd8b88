#!/usr/bin/env python3
"""sd_attention/sd_init_sweep.py: does S-D training move S away from its initialization? A measured
sweep of the S-D init and optimizer options (-sd_init_s, -sd_decay_s, -sd_init_u, the learning
rate) on one small LayerNorm-free S-D model, so that what sd_spectrum reports as the routing
cascade can be told apart from the init (doc/records/sd_init_sweep.md).

    /usr/bin/python3 sd_attention/sd_init_sweep.py [--steps 200] [--out out/sd_init_sweep] [--bin PATH]
                                              [--data prose|tinyshakespeare] [--dry-run]

Every arm trains the same shape (L4C128H4T128 with table 4:sd*4, -ln 0: four heads of 32 per
layer) from the same init seed and data order for --steps steps of 4 x 128 tokens (lr warmup 20,
cosine to 0.1, weight decay 0.1 on the matrices, clipping 1.0), then compares the final checkpoint
with the initial one, which train_gpt2.py draws from the same seed exactly as the trainers do
(doc/formats.md "Random init and RNG order"). Per arm and layer, means over heads:
  |S|       the Frobenius norm of the skew S (per head), final
  dS/S0     |S - S0| / |S0| (NaN for a zero init)
  dU/U0     the same for the shared projection U
  erank     Roy-Vetterli erank of S, and erank0 of S0 (the init's value, the baseline)
  x-erank   erank of the token-space routing U S U^T
and the final val loss (the trainer's, 20 val windows). Arms (override none; edit ARMS below to
sweep others):
  default       -sd_init_s 0.1, no decay on S, lr 1e-3, -sd_init_u 1.0 (the sd_noln arm of the
                small-scale run of doc/sd_attention.md)
  decay         as default with -sd_decay_s 1
  small_init    -sd_init_s 0.01
  zero_init     -sd_init_s 0
  lr3e-3, zero_init_lr3e-3, small_init_lr3e-3   the same at lr 3e-3
  u0.02         -sd_init_u 0.02 (GPT-2's init for U: logits ~1e-4 at the start)
Outputs in --out: <arm>/ (the run), <arm>.init.bin, summary.md and summary.json. A finished arm
(its final checkpoint present) is not trained again. Needs numpy and torch (/usr/bin/python3).
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
except ModuleNotFoundError as e:  # one line naming the interpreter that has the dependencies
    sys.exit(f"error: {__file__}: {e.name} is not installed for {sys.executable}; run it with /usr/bin/python3 "
             f"(Debian's python3-numpy, -torch) or pip install {e.name}")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2 as tg  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402

MODEL, TABLE = "L4C128H4T128", "4:sd*4"
BASE = {"sd_init_s": 0.1, "sd_decay_s": 0, "sd_init_u": 1.0, "lr": 1e-3}
ARMS = [("default", {}), ("decay", {"sd_decay_s": 1}), ("small_init", {"sd_init_s": 0.01}),
        ("zero_init", {"sd_init_s": 0.0}), ("lr3e-3", {"lr": 3e-3}),
        ("small_init_lr3e-3", {"sd_init_s": 0.01, "lr": 3e-3}),
        ("zero_init_lr3e-3", {"sd_init_s": 0.0, "lr": 3e-3}), ("u0.02", {"sd_init_u": 0.02})]
DATA = {"prose": ("dev/data/prose/prose_train_*.bin", "dev/data/prose/prose_val_*.bin", "make prose"),
        "tinyshakespeare": ("dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
                            "dev/data/tinyshakespeare/tiny_shakespeare_val.bin", "make data")}


def erank(sv):
    sv = sv[sv > 1e-6 * sv[0]] if sv.size and sv[0] > 0 else sv[:0]
    if sv.size == 0:
        return 0.0
    p = sv / sv.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def heads(model):
    """Per layer, per head: (S (d x d), U (C x d)) as float64 arrays."""
    out = []
    for b in model.blocks:
        a = b.attn
        L = a.generator().detach().double().numpy()  # S + sign D: its skew part is S
        S = (L - L.transpose(0, 2, 1)) / 2
        W = a.qkv_w.detach().double().numpy()
        d = a.head_size
        out.append([(S[k], W[k * d:(k + 1) * d].T) for k in range(a.n_head)])
    return out


def compare(init, final):
    """Per-layer means over heads of the quantities of the module docstring."""
    rows = []
    for l, (hi, hf) in enumerate(zip(heads(init), heads(final))):
        vals = {k: [] for k in ("S", "dS", "dU", "erank", "erank0", "x_erank")}
        for (S0, U0), (S, U) in zip(hi, hf):
            n0 = np.linalg.norm(S0)
            vals["S"].append(np.linalg.norm(S))
            vals["dS"].append(np.linalg.norm(S - S0) / n0 if n0 > 0 else math.nan)
            vals["dU"].append(np.linalg.norm(U - U0) / np.linalg.norm(U0))
            vals["erank"].append(erank(np.linalg.svd(S, compute_uv=False)))
            vals["erank0"].append(erank(np.linalg.svd(S0, compute_uv=False)))
            X = U @ S @ U.T
            vals["x_erank"].append(erank(np.linalg.svd(X, compute_uv=False)))
        rows.append({"layer": l, **{k: float(np.mean(v)) for k, v in vals.items()}})
    return rows


def trainer_cmd(binary, arm, opts, steps, data, out):
    train, val, _ = DATA[data]
    return [binary, "-e", MODEL, "-layers", os.path.join(out, "table.txt"), "-ln", "0",
            "-sd_init_s", repr(opts["sd_init_s"]), "-sd_decay_s", str(opts["sd_decay_s"]),
            "-sd_init_u", repr(opts["sd_init_u"]), "-i", train, "-j", val, "-b", "4", "-t", "128",
            "-x", str(steps), "-l", repr(opts["lr"]), "-u", "20", "-q", "0.1", "-c", "0.1",
            "-v", str(steps), "-m", "20", "-s", "0", "-n", str(steps), "-o", os.path.join(out, arm), "-y", "1"]


def main(argv=None):
    ap = argparse.ArgumentParser(description="S-D init sweep: does S leave its initialization?")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "sd_init_sweep"))
    ap.add_argument("--bin", default="./train_gpt2", help="the CPU trainer (build/blas/train_gpt2 is faster)")
    ap.add_argument("--data", choices=tuple(DATA), default="prose")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    if args.steps < 1:
        sys.exit(f"error: --steps {args.steps}: expected a positive integer")
    os.chdir(ROOT)
    train, val, how = DATA[args.data]
    missing = [p for p in (train, val) if not glob.glob(p)]
    if not args.dry_run and missing:
        sys.exit(f"error: {missing[0]}: no shard matches ({how})")
    if not args.dry_run and not os.access(args.bin, os.X_OK):
        sys.exit(f"error: {args.bin}: not built (make train_gpt2, or make build/blas/train_gpt2)")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(TABLE + "\n")
    results = []
    for arm, delta in ARMS:
        opts = {**BASE, **delta}
        cmd = trainer_cmd(args.bin, arm, opts, args.steps, args.data, args.out)
        final = os.path.join(args.out, arm, f"model_{args.steps:08d}.bin")
        if args.dry_run:
            print(" ".join(cmd))
            continue
        t0 = time.time()
        if not os.path.isfile(final):
            log = os.path.join(args.out, arm + ".log")
            with open(log, "w") as f:
                if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode != 0:
                    sys.exit(f"error: {log}: the trainer failed")
        init = tg.build_model(MODEL, prism=os.path.join(args.out, "table.txt"), flags=tg.FLAG_NO_LN,
                              sd_init_s=opts["sd_init_s"], sd_init_u=opts["sd_init_u"])
        trained = tg.load_model(final)
        val_loss = None
        with open(os.path.join(args.out, arm + ".log")) as f:
            for line in f:
                if line.startswith("val loss "):
                    val_loss = float(line.split()[2])
        rows = compare(init, trained)
        results.append({"arm": arm, "options": opts, "val_loss": val_loss, "layers": rows})
        print(f"{arm}: val {val_loss}, dS/S0 {[round(r['dS'], 3) for r in rows]}, "
              f"erank {[round(r['erank'], 2) for r in rows]} (init {[round(r['erank0'], 2) for r in rows]}), "
              f"{time.time() - t0:.0f} s")
    if args.dry_run:
        return 0
    md = [f"S-D init sweep: {MODEL} table {TABLE}, -ln 0, {args.steps} steps of 4 x 128 tokens ({args.data})", "",
          "| arm | init_s | decay_s | init_u | lr | val loss | layer | |S| | dS/S0 | dU/U0 | erank(S) | erank(S0) | x-erank |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        o = r["options"]
        for row in r["layers"]:
            md.append(f"| {r['arm']} | {o['sd_init_s']} | {o['sd_decay_s']} | {o['sd_init_u']} | {o['lr']} | "
                      f"{r['val_loss']:.4f} | {row['layer']} | {row['S']:.3f} | {row['dS']:.3f} | {row['dU']:.3f} | "
                      f"{row['erank']:.2f} | {row['erank0']:.2f} | {row['x_erank']:.2f} |")
    write_atomic(os.path.join(args.out, "summary.md"), "\n".join(md) + "\n")
    write_atomic(os.path.join(args.out, "summary.json"),
                 json.dumps(results, indent=1, default=lambda v: None).replace("NaN", "null") + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
