"""test/test_spectrum_numpy.py: ./sd_spectrum against numpy on explicit matrices.

Writes a small mixed model with train_gpt2.py (layers sd, sdlin with an explicit head size, lin,
mha with wide heads; no per-block LayerNorm; random S and theta so that no metric is trivial),
runs ./sd_spectrum -json -csv on it, and recomputes every head's metrics with np.linalg on the
explicit matrices: M = W_Q W_K^T (C x C) and its parts R, F for standard heads; S, L = S - D,
and U L U^T for S-D heads (doc/methods.md "Routing/filtering split of a standard head", "Dynamically unstable heads", "Stability", "Formulation B", "Effective rank"). The C tool never forms C x C
(QR core, small-matrix trick), so this checks those shortcuts too.

Tolerances: relative 1e-6 on every metric (both sides work in double from the same fp32 weights;
LAPACK and numpy differ by round-off only). Negative control: the same comparison with W_K taken
from the V block must fail. Also: each head's unstable flag equals numpy's alpha > 1e-6 rho and
the layer's unstable fraction is the mean of those flags (head 0 of the mha layer has W_K close
to -W_Q, a stable standard head, so that layer's flags are mixed); the CSV rows equal the JSON
heads; a bf16 checkpoint (v105) gives, head by head, numpy's metrics of the bf16-rounded weights
as train_gpt2.load_model reads them (same rtol 1e-6: both sides widen the same bf16 values).
"""
import csv
import json
import math
import os
import subprocess
import shutil

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2 as tg  # noqa: E402
from harness import check, finish  # noqa: E402

RTOL = 1e-6
SV_REL_TOL = 1e-6       # doc/methods.md "Effective rank", as sd_attention/spectrum.h
EIG_ZERO_REL = 1e-10
UNSTABLE_EPS = 1e-6     # unstable head: alpha > eps * rho (doc/methods.md "Dynamically unstable heads"; sd_spectrum's default -eps)


def rank_metrics(sv):
    """erank, PR, SR, n90 of singular values (descending), dropping sigma <= 1e-6 sigma_1."""
    sv = sv[sv > SV_REL_TOL * sv[0]] if sv[0] > 0 else sv[:0]
    if len(sv) == 0:
        return dict(rank=0, erank=0.0, pr=0.0, sr=0.0, n90=0)
    p = sv / sv.sum()
    e2 = sv ** 2
    j90 = int(np.argmax(np.cumsum(e2) >= 0.9 * e2.sum() * (1 - 1e-12))) + 1
    return dict(rank=len(sv), erank=float(np.exp(-(p * np.log(p)).sum())),
                pr=float(sv.sum() ** 2 / e2.sum()), sr=float(e2.sum() / sv[0] ** 2),
                n90=(j90 + 1) // 2)


def abscissa(A):
    ev = np.linalg.eigvals(A)
    rho = np.abs(ev).max()
    nz = ev[np.abs(ev) > EIG_ZERO_REL * rho]
    alpha = float(nz.real.max()) if len(nz) else 0.0
    return alpha, float(rho)


def split(M):
    R, F = (M - M.T) / 2, (M + M.T) / 2
    r2, f2 = (R ** 2).sum(), (F ** 2).sum()
    svR = np.linalg.svd(R, compute_uv=False)
    evF = np.linalg.eigvalsh(F)
    out = dict(rho_R=r2 / (r2 + f2), rho_F=f2 / (r2 + f2), norm_R=svR[0],
               norm_F=np.abs(evF).max(), lam_max_F=evF.max())
    return out, svR


def softplus(x):
    return np.log1p(np.exp(x))


def numpy_head(model, l, k, k_block=1):
    """Every metric of head k of layer l from the explicit matrices. k_block: which block of a
    standard layer plays W_K (1 = K; 2 = V, the negative control)."""
    cfg = model.config
    h, d, kind = cfg.layers[l]
    att = model.blocks[l].attn
    W = att.qkv_w.detach().double().numpy()
    C, A = cfg.n_embd, h * d
    if kind in tg.SD_KINDS:
        U = W[k * d:(k + 1) * d].T
        iu = np.triu_indices(d, 1)
        S = np.zeros((d, d))
        S[iu] = att.sd_skew.detach().double().numpy()[k]
        S = S - S.T
        th = att.sd_theta.detach().double().numpy()
        D = softplus(th[k]) * np.ones(d) if th.ndim == 1 else softplus(th[k])
        L = S + cfg.sd_sign * np.diag(D)
        sp, svX = split(U @ L @ U.T)
        alpha, rho = abscissa(L)
        out = dict(rank_metrics(np.linalg.svd(S, compute_uv=False)), capacity=d,
                   norm_S=np.linalg.svd(S, compute_uv=False)[0], d_mean=D.mean(),
                   d_spread=D.std() / D.mean(), **sp)
    else:
        WQ = W[k * d:(k + 1) * d].T
        WK = W[k_block * A + k * d:k_block * A + (k + 1) * d].T
        M = WQ @ WK.T
        sp, svR = split(M)
        svX = svR
        alpha, rho = abscissa(M)
        out = dict(rank_metrics(svR), capacity=min(2 * d, C), **sp)
    out.update(alpha=alpha, radius=rho, alpha_rel=alpha / rho, unstable=alpha > UNSTABLE_EPS * rho)
    out["rank90"] = 2 * out["n90"]
    # the x-space routing (U S U^T for S-D heads, R itself for standard ones) and minimal rank
    # (one rotation plane: erank below 2.5, doc/methods.md "The spectral cascade")
    xm = rank_metrics(svX)
    out.update(x_rank=xm["rank"], x_erank=xm["erank"], x_n90=xm["n90"],
               minimal=out["rank"] > 0 and out["erank"] < 2.5)
    return out


def close(a, b, scale=1.0):
    return abs(a - b) <= RTOL * max(abs(a), abs(b), scale)


# Values that may be an exact zero (lambda_max(F) of a negative filtering part on the zero
# eigenvalues, alpha of a marginal head) are compared relative to their matrix's norm.
SCALE = {"alpha": "radius", "lam_max_F": "norm_F"}


def compare(ref, got, keys):
    bad = [f"{k}: numpy {ref[k]:.9g} vs tool {got[k]}" for k in keys
           if got[k] is None or not close(float(ref[k]), float(got[k]),
                                          ref[SCALE[k]] if k in SCALE else 1e-12)]
    return bad


def build_model(path, dtype="fp32"):
    table = tg.parse_schedule("mixed", 64, 4, unchecked=True, text="4:sd 2x16:sdlin 4:lin 2:mha")
    cfg = tg.GPTConfig(n_layer=4, n_embd=64, n_head=4, block_size=32, layers=table,
                       flags=tg.FLAG_NO_LN, sd_init_s=0.3)
    model = tg.GPT(cfg, seed=7)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for b in model.blocks:
            if b.attn.sd:
                b.attn.sd_theta.copy_(torch.randn(b.attn.sd_theta.shape, generator=g))
        # mha head 0: W_K = -W_Q + small noise, so M = W_Q W_K^T is close to -W_Q W_Q^T and its
        # nonzero eigenvalues have negative real parts: a stable standard head next to an
        # unstable random one (a layer with mixed unstable flags)
        qkv = model.blocks[3].attn.qkv_w
        h, d, _ = table[3]
        A = h * d
        noise = torch.randn(qkv[A:A + d].shape, generator=g) * 0.1 * qkv[:d].std()
        qkv[A:A + d] = -qkv[:d] + noise
    tg.write_model(model, path, dtype)
    return model


def run_tool(model_path, *args):
    exe = os.path.join(ROOT, "sd_spectrum")
    r = subprocess.run([exe, model_path, *args], capture_output=True, text=True)
    return r


def main():
    tmp = os.path.join(ROOT, "build", "tmp_spectrum_numpy")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    path = os.path.join(tmp, "mixed.bin")
    model = build_model(path)
    js, cs = os.path.join(tmp, "s.json"), os.path.join(tmp, "s.csv")
    r = run_tool(path, "-json", js, "-csv", cs)
    check(r.returncode == 0, f"sd_spectrum ran on a mixed sd/sdlin/lin/mha -ln 0 model "
                             f"(exit {r.returncode}) {r.stderr.strip()}")
    data = json.load(open(js))
    keys_std = ["erank", "pr", "sr", "rho_R", "rho_F", "norm_R", "norm_F", "lam_max_F",
                "alpha", "radius", "alpha_rel", "x_erank"]
    keys_sd = keys_std + ["norm_S", "d_mean", "d_spread"]
    mixed_layers = []
    for l, lay in enumerate(data["layers"]):
        kind = lay["kind"]
        flags = []
        for k, head in enumerate(lay["heads"]):
            ref = numpy_head(model, l, k)
            bad = compare(ref, head, keys_sd if kind in ("sd", "sdlin") else keys_std)
            ints = [f"{key}: {ref[key]} vs {head[key]}"
                    for key in ("rank", "n90", "rank90", "capacity", "unstable", "x_rank", "x_n90", "minimal")
                    if ref[key] != head[key]]
            check(not bad and not ints, f"layer {l} ({kind}) head {k}: every metric and the unstable flag "
                                        f"equal numpy on the explicit matrices (rtol {RTOL}) {bad + ints}")
            flags.append(ref["unstable"])
        refs = [numpy_head(model, l, k) for k in range(len(lay["heads"]))]
        x_mean = sum(r["x_erank"] for r in refs) / len(refs)
        minimal = sum(r["minimal"] for r in refs) / len(refs)
        n90s = [r["n90"] for r in refs]
        check(close(lay["n90_mean"], float(np.mean(n90s))) and close(lay["n90_median"], float(np.median(n90s))),
              f"layer {l}: n90_mean {lay['n90_mean']}, n90_median {lay['n90_median']} = numpy's over heads {n90s}")
        check(close(lay["x_erank_mean"], x_mean) and abs(lay["frac_minimal"] - minimal) < 1e-12,
              f"layer {l}: x-space routing erank mean {lay['x_erank_mean']} = numpy's {x_mean:.9g}, "
              f"minimal-rank fraction {lay['frac_minimal']} = {minimal}")
        frac = sum(flags) / len(flags)
        check(abs(lay["frac_unstable"] - frac) < 1e-12,
              f"layer {l}: unstable fraction {lay['frac_unstable']} = mean of numpy's head flags {flags}")
        if 0 < frac < 1:
            mixed_layers.append(l)
    check(mixed_layers == [3], f"the fixture has a layer with mixed unstable flags (layers {mixed_layers}: "
                               f"the mha layer's W_K = -W_Q head is stable, its other head not)")
    # negative control: W_K from the V block gives different metrics, and the comparison sees it
    ref_bad = numpy_head(model, 2, 0, k_block=2)
    check(len(compare(ref_bad, data["layers"][2]["heads"][0], keys_std)) > 0,
          "negative control: metrics of W_Q W_V^T do not pass as those of W_Q W_K^T")
    rows = list(csv.DictReader(open(cs)))
    same = len(rows) == sum(len(lay["heads"]) for lay in data["layers"])
    for row in rows:
        head = data["layers"][int(row["layer"])]["heads"][int(row["head"])]
        for key in ("erank", "rho_R", "alpha", "n90"):
            same &= close(float(row[key]), float(head[key]))
    check(same, f"the CSV's {len(rows)} rows equal the JSON's heads")
    # bf16 (v105): every head's metrics equal numpy's on the bf16-rounded weights (load_model
    # widens them to fp32 exactly, as the tool does), so a misread file cannot pass; the file
    # must really hold other weights than the fp32 one (its metrics differ beyond the rtol)
    path16 = os.path.join(tmp, "mixed_bf16.bin")
    build_model(path16, "bf16")
    model16 = tg.load_model(path16)
    js16 = os.path.join(tmp, "s16.json")
    r = run_tool(path16, "-json", js16)
    check(r.returncode == 0, f"sd_spectrum reads a bf16 checkpoint (v105) (exit {r.returncode}) {r.stderr.strip()}")
    d16 = json.load(open(js16)) if r.returncode == 0 else {"layers": []}
    bad16, moved = [], 0
    for l, lay in enumerate(d16["layers"]):
        keys = keys_sd if lay["kind"] in ("sd", "sdlin") else keys_std
        for k, head in enumerate(lay["heads"]):
            bad16 += [f"layer {l} head {k}: {b}" for b in compare(numpy_head(model16, l, k), head, keys)]
            moved += len(compare(numpy_head(model, l, k), head, keys)) > 0
    n16 = sum(len(lay["heads"]) for lay in d16["layers"])
    check(n16 == len(rows) and not bad16 and moved == n16,
          f"bf16: each of the {n16} heads equals numpy on the bf16 weights read by train_gpt2.load_model "
          f"(rtol {RTOL}), and {moved} of them differ from the fp32 file's {bad16[:3]}")
    finish()


if __name__ == "__main__":
    main()
