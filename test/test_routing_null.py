"""test/test_routing_null.py: sd_attention/routing_null.py, the nulls of the routing rank of an
Adam-trained S-D head (doc/methods.md "Effective rank"; doc/sd_tools.md).

Checks:
- the quoted numbers: under a constant one-plane gradient, Adam's S ends at -c sign(A), whose erank
  is 12.904 at d = 32 and 20.524 at d = 64 (exactly, for any orientation: checked to 1e-5) with n90 = 2;
  the simulated S reaches it within 0.02 (entries of A within a few thousand eps of zero are not
  fully normalized by Adam, and S is fp32), while
  the mean gradient has erank 2 and n90 1 (one plane);
- the optimizer is the trainer's: routing_null.adamw against torch.optim.AdamW (betas 0.9, 0.95,
  eps 1e-8, no decay; the same formula as llmc/cpu/gpt2_update) with the per-step lr set by hand,
  on random gradients, rtol 1e-5 (both fp32); with weight decay against the written-out update
  p -= lr (mhat / (sqrt(vhat) + eps) + wd p) in float64, rtol 1e-4;
- the schedule: lr_at at hand-computed points of warmup and cosine (llmc/schedulers.h);
- clipping: a constant clip factor 0.1 or 10 leaves the final S unchanged (rtol 1e-4: Adam is
  scale-invariant up to eps), a fluctuating one (--clip-jitter 1) does not (negative control);
- the signal has unit norm and exactly k planes; the noise has E ||Z||_F^2 = 1 (2 %) and is
  isotropic (the mean of Q Z Q^T's energy on a fixed plane equals Z's, 5 %);
- nulls(): its rows and fields; the CLI writes the same JSON; errors are one line.
"""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from harness import check, finish  # noqa: E402
from sd_attention import routing_null as rn  # noqa: E402

TOOL = os.path.join(ROOT, "sd_attention", "routing_null.py")
FIELDS = ("s_erank", "s_erank_sd", "s_n90", "s_n90_sd", "g_erank", "g_erank_sd", "g_n90", "g_n90_sd", "s_cos", "s_cos_sd")


def sign_checks():
    for d, want in ((32, 12.904449), (64, 20.523538)):
        res = rn.nulls(d, 200, 1e-3, 20, 0.1, [0.0], draws=3, seed=2)
        row = res["rows"][0]
        check(row["k"] == 1 and row["noise_ratio"] == 0.0 and abs(row["s_erank"] - want) < 0.02
              and row["s_erank_sd"] < 0.02 and row["s_n90"] == 2 and row["g_erank"] == 2.0 and row["g_n90"] == 1
              and abs(res["sign_erank_k1"] - want) < 1e-5 and res["sign_n90_k1"] == 2,
              f"d {d}, constant one-plane gradient: erank(S) {row['s_erank']:.4f} ± {row['s_erank_sd']:.1e} "
              f"= erank(sign(A)) {want}, n90(S) {row['s_n90']} = 2; mean gradient erank {row['g_erank']}, n90 {row['g_n90']}")


def adam_checks():
    rng = np.random.default_rng(5)
    steps, n, lr, u, q = 40, 50, 1e-2, 5, 0.1
    gs = rng.standard_normal((steps, 2, n)).astype(np.float32)
    p = rn.adamw(lambda t: gs[t], steps, lr, u, q)
    w = torch.zeros(2, n, requires_grad=True)
    opt = torch.optim.AdamW([w], lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    for t in range(steps):
        w.grad = torch.from_numpy(gs[t].copy())
        opt.param_groups[0]["lr"] = float(rn.lr_at(t, lr, u, steps, q))
        opt.step()
    err = float(np.max(np.abs(p - w.detach().numpy())) / np.max(np.abs(p)))
    check(err < 1e-5, f"adamw = torch.optim.AdamW (0.9, 0.95, 1e-8, no decay) over {steps} steps of warmup + cosine: "
                      f"relative error {err:.1e}")
    init = rng.standard_normal((2, n)).astype(np.float32)
    p = rn.adamw(lambda t: gs[t], steps, lr, u, q, init=init, weight_decay=0.1)
    x, m, v = init.astype(np.float64), np.zeros((2, n)), np.zeros((2, n))
    for t in range(steps):
        g = gs[t].astype(np.float64)
        m = 0.9 * m + 0.1 * g
        v = 0.95 * v + 0.05 * g * g
        x = x - float(rn.lr_at(t, lr, u, steps, q)) * ((m / (1 - 0.9 ** (t + 1))) / (np.sqrt(v / (1 - 0.95 ** (t + 1))) + 1e-8) + 0.1 * x)
    err = float(np.max(np.abs(p - x)) / np.max(np.abs(x)))
    check(err < 1e-4, f"with weight decay 0.1 and an initial S: the written-out update in float64, relative error {err:.1e}")
    lrs = [float(rn.lr_at(t, 1e-3, 20, 600, 0.1)) for t in (0, 9, 19, 20, 310, 599)]
    want = [5e-5, 5e-4, 1e-3, 1e-3, 0.55e-3, 1e-4 + 0.45e-3 * (1 + math.cos(math.pi * 579 / 580))]
    check(all(abs(a - b) < 1e-9 for a, b in zip(lrs, want)),
          f"lr schedule (llmc/schedulers.h): warmup lr (t+1)/u, cosine to q lr: {lrs}")


def clip_checks():
    rng = np.random.default_rng(6)
    d, steps = 16, 100
    a = rn.pack(rn.planes(d, 1, rng))[None]
    Z = rn.noise((steps, 1), d, rng)
    base = rn.adamw(lambda t: a + 3 * Z[t], steps, 1e-3, 10, 0.1)
    errs = []
    for c in (0.1, 10.0):
        p = rn.adamw(lambda t: a + 3 * Z[t], steps, 1e-3, 10, 0.1, scale=np.full(steps, c))
        errs.append(float(np.max(np.abs(p - base)) / np.max(np.abs(base))))
    jit = rn.adamw(lambda t: a + 3 * Z[t], steps, 1e-3, 10, 0.1, scale=np.exp(-rng.random(steps)))
    ej = float(np.max(np.abs(jit - base)) / np.max(np.abs(base)))
    check(max(errs) < 1e-4 and ej > 1e-2,
          f"a constant clip factor 0.1 or 10 leaves S unchanged (relative {max(errs):.1e}: Adam is invariant up to eps); "
          f"a fluctuating one (exp(-u), u ~ U(0,1)) moves it ({ej:.2g}, negative control)")


def signal_noise_checks():
    rng = np.random.default_rng(7)
    ok = True
    for k in (1, 2, 3):
        A = rn.planes(20, k, rng)
        sv = np.linalg.svd(A, compute_uv=False)
        er, n90 = rn.rank_stats(A)
        ok &= abs(np.linalg.norm(A) - 1) < 1e-12 and np.allclose(A, -A.T) and int((sv > 1e-9).sum()) == 2 * k \
            and abs(er - 2 * k) < 1e-9 and n90 == k
    check(ok, "the signal: unit Frobenius norm, skew, exactly k planes of equal weight (erank 2k, n90 k) for k = 1, 2, 3")
    d = 12
    Z = rn.unpack(rn.noise((4000,), d, rng), d)
    e = float((Z ** 2).sum(axis=(1, 2)).mean())
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    e01 = float((Z[:, 0, 1] ** 2).mean())
    ZQ = np.einsum("ij,njk,lk->nil", Q, Z, Q)
    eq = float((ZQ[:, 0, 1] ** 2).mean())
    check(abs(e - 1) < 0.02 and abs(eq / e01 - 1) < 0.05,
          f"the noise: E ||Z||_F^2 = {e:.4f} (1), rotated by a random Q the energy of entry (0, 1) stays "
          f"{eq:.5f} vs {e01:.5f} (isotropic)")


def nulls_checks(tmp):
    res = rn.nulls(16, 50, 1e-3, 5, 0.1, [0.0, 2.0], draws=3, seed=4)
    keys = [(r["k"], r["noise_ratio"]) for r in res["rows"]]
    check(keys == [(1, 0.0), (1, 2.0), (2, 0.0), (2, 2.0), (0, None)]
          and all(all(f in r for f in FIELDS) for r in res["rows"]) and res["rows"][-1]["s_cos"] is None
          and all(res[f] is not None for f in ("d", "steps", "lr", "warmup", "final_frac", "draws", "seed",
                                                "sign_erank_k1", "grad_batches")),
          f"nulls(): rows for k = 1, 2 at each ratio, then k = 0; every field ({', '.join(FIELDS)}); s_cos null for k = 0")
    again = rn.nulls(16, 50, 1e-3, 5, 0.1, [0.0, 2.0], draws=3, seed=4)
    check(again == res, "nulls() is deterministic for a seed")
    out = os.path.join(tmp, "n.json")
    r = subprocess.run([sys.executable, TOOL, "--d", "16", "--steps", "50", "--lr", "1e-3", "--warmup", "5",
                        "--final-frac", "0.1", "--draws", "3", "--noise", "0,2", "--seed", "4", "--json", out],
                       capture_output=True, text=True)
    data = json.load(open(out)) if r.returncode == 0 and os.path.isfile(out) else None
    check(data is not None and data["rows"] == json.loads(json.dumps(res["rows"])) and "erank(S)" in r.stdout,
          f"the CLI prints the table and writes nulls()'s dict as JSON (exit {r.returncode}) {r.stderr.strip()}")
    for args, needle in ((["--d", "3"], "--d: 3: expected an integer >= 4"),
                         (["--steps", "0"], "--steps: 0"), (["--lr", "-1"], "--lr: -1.0"),
                         (["--warmup", "700"], "--warmup: 700"), (["--final-frac", "2"], "--final-frac: 2.0"),
                         (["--noise", "1,x"], "--noise: 1,x"), (["--noise", "-1"], "--noise"),
                         (["--json", os.path.join(tmp, "no", "x.json")], "--json:"), (["--bogus", "1"], "unrecognized")):
        r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and r.stdout == "" and len(lines) == 1 and lines[0].startswith("error: ")
              and needle in lines[0], f"error, {' '.join(args)}: {lines[0] if lines else '(nothing)'}")


def main():
    tmp = os.path.join(ROOT, "build", "tmp_routing_null")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    sign_checks()
    adam_checks()
    clip_checks()
    signal_noise_checks()
    nulls_checks(tmp)
    finish()


if __name__ == "__main__":
    main()
