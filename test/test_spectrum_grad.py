"""test/test_spectrum_grad.py: ./sd_spectrum -grad_batches, the mean gradient of S (doc/methods.md
"Effective rank"; doc/sd_tools.md), against PyTorch autograd through train_gpt2.py.

Fixture: a 3-layer model written by train_gpt2.py (layers 2:sd, 2x16:sdlin, 2 = mha; no per-block
LayerNorm; S ~ N(0, 0.3^2), U of std 0.2 and random theta, so that S's gradient is far above fp32
round-off), and a shard of random tokens. The tool runs the C model's forward and backward over
N = 3 consecutive batches of 2 x 32; the reference is the autograd gradient of the mean of the 3
batch losses with respect to each layer's packed skew parameters (train_gpt2.py's sd_skew),
unpacked into the skew matrix G as the tool unpacks S and ranked with numpy.

Tolerances: both sides compute the gradient in fp32 (different summation orders), ranked in
double: rtol 1e-3 on erank, PR, SR, ||G||_F and the mean loss (observed ~1e-5), 1e-3 absolute on
cos(S, -G); n90 and the numerical rank exactly. Negative control: the gradient over 2 batches
instead of 3 must fail the same comparison. Also: the layer summaries are the per-head means and
medians, the standard layer's gradient fields are null, the run's settings are in the JSON's
`grad` object, the table gains the g- columns; without -grad_batches every grad field is null and
the table is unchanged; errors are one line.
"""
import json
import math
import os
import shutil
import subprocess

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2 as tg  # noqa: E402
from dev.data.data_common import write_datafile  # noqa: E402
from harness import check, finish  # noqa: E402

RTOL = 1e-3
ATOL_COS = 1e-3
B, T, N = 2, 32, 3
EXE = os.path.join(ROOT, "sd_spectrum")
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def rank_stats(sv):
    """erank, PR, SR, n90, rank of singular values (descending), as spec_rank_stats."""
    sv = sv[sv > 1e-6 * sv[0]] if sv[0] > 0 else sv[:0]
    if len(sv) == 0:
        return dict(rank=0, erank=0.0, pr=0.0, sr=0.0, n90=0)
    p = sv / sv.sum()
    e2 = np.cumsum(sv ** 2)
    j90 = int(np.argmax(e2 >= 0.9 * e2[-1] * (1 - 1e-12))) + 1
    return dict(rank=len(sv), erank=float(np.exp(-(p * np.log(p)).sum())), pr=float(sv.sum() ** 2 / (sv ** 2).sum()),
                sr=float((sv ** 2).sum() / sv[0] ** 2), n90=(j90 + 1) // 2)


def unpack(packed, d):
    S = np.zeros((d, d))
    iu, ju = np.triu_indices(d, 1)   # row-major strict upper triangle (llmc/param_layout.h)
    S[iu, ju] = packed
    S[ju, iu] = -packed
    return S


def reference(model, tokens, batches):
    """Per S-D layer, per head: the numpy metrics of the autograd mean gradient over `batches`."""
    model.zero_grad()
    loss_sum = 0.0
    for k in range(batches):
        x, y = tg._window(tokens, k * B * T, B, T)
        loss = model(x, y)[1]
        (loss / batches).backward()
        loss_sum += loss.item()
    out = {}
    for l, blk in enumerate(model.blocks):
        if not blk.attn.sd:
            continue
        d = blk.attn.sd_skew.shape[1]
        d = int(round((1 + math.sqrt(1 + 8 * d)) / 2))
        heads = []
        for h in range(blk.attn.sd_skew.shape[0]):
            G = unpack(blk.attn.sd_skew.grad[h].double().numpy(), d)
            S = unpack(blk.attn.sd_skew[h].detach().double().numpy(), d)
            r = rank_stats(np.linalg.svd(G, compute_uv=False))
            r["norm"] = float(np.linalg.norm(G))
            r["align"] = float(-(S * G).sum() / (np.linalg.norm(S) * np.linalg.norm(G)))
            heads.append(r)
        out[l] = heads
    return out, loss_sum / batches


def close(a, b, rtol=RTOL):
    return a is not None and abs(a - b) <= rtol * max(abs(b), 1e-30)


def compare(ref, data):
    bad = []
    for l, heads in ref.items():
        for k, r in enumerate(heads):
            h = data["layers"][l]["heads"][k]
            for key, got in (("erank", "grad_erank"), ("pr", "grad_pr"), ("sr", "grad_sr"), ("norm", "grad_norm")):
                if not close(h[got], r[key]):
                    bad.append(f"layer {l} head {k} {got}: tool {h[got]} vs torch {r[key]:.9g}")
            if h["grad_align"] is None or abs(h["grad_align"] - r["align"]) > ATOL_COS:
                bad.append(f"layer {l} head {k} grad_align: tool {h['grad_align']} vs torch {r['align']:.6f}")
            for key in ("n90", "rank"):
                if h["grad_" + key] != r[key]:
                    bad.append(f"layer {l} head {k} grad_{key}: tool {h['grad_' + key]} vs torch {r[key]}")
    return bad


def run(*args):
    return subprocess.run([EXE, *args], capture_output=True, text=True, env=ENV)


def main():
    tmp = os.path.join(ROOT, "build", "tmp_spectrum_grad")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    table = tg.parse_schedule("grad", 64, 3, unchecked=True, text="2:sd 2x16:sdlin 2")
    cfg = tg.GPTConfig(n_layer=3, n_embd=64, n_head=2, block_size=64, layers=table, flags=tg.FLAG_NO_LN,
                       sd_init_s=0.3, sd_init_u=0.2)
    model = tg.GPT(cfg, seed=11)
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for b in model.blocks:
            if b.attn.sd:
                b.attn.sd_theta.copy_(0.5 * torch.randn(b.attn.sd_theta.shape, generator=g))
    path = os.path.join(tmp, "model.bin")
    tg.write_model(model, path)
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 2000, size=(N + 1) * B * T + 1).astype(np.uint16)
    shard = os.path.join(tmp, "val_000000.bin")
    write_datafile(shard, tokens)
    tokens = tg.read_shard(shard)

    js, cs = os.path.join(tmp, "g.json"), os.path.join(tmp, "g.csv")
    r = run(path, "-heads", "1", "-grad_batches", str(N), "-j", os.path.join(tmp, "val_*.bin"), "-b", str(B),
            "-t", str(T), "-json", js, "-csv", cs)
    if not check(r.returncode == 0 and r.stderr == "", f"sd_spectrum -grad_batches {N} -b {B} -t {T}: exit 0 "
                 f"(got {r.returncode}) {r.stderr.strip()}"):
        finish()
    data = json.load(open(js))
    ref, ref_loss = reference(model, tokens, N)
    bad = compare(ref, data)
    check(not bad and len(ref) == 2, f"the mean gradient of S of the 4 S-D heads (sd, sdlin) equals autograd's: "
                                     f"erank, PR, SR, ||G||_F (rtol {RTOL}), cos(S, -G) ({ATOL_COS}), n90, rank {bad[:4]}")
    gr = data["grad"]
    check(gr is not None and gr["batches"] == N and gr["B"] == B and gr["T"] == T and close(gr["loss"], ref_loss, 1e-5),
          f"the JSON's grad object: batches {N}, B {B}, T {T}, mean loss {gr and gr['loss']} = torch's {ref_loss:.6f}")
    # the comparison is not vacuous: every head has a gradient of several planes, and the observed error
    worst = max(abs(data["layers"][l]["heads"][k][f"grad_{key}"] / h[key] - 1)
                for l, hs in ref.items() for k, h in enumerate(hs) for key in ("erank", "pr", "sr", "norm"))
    check(all(h["norm"] > 0 and h["erank"] > 2.5 for hs in ref.values() for h in hs),
          f"the fixture's gradients are not trivial (every head: ||G||_F > 0, erank > 2.5); worst relative "
          f"difference tool vs torch {worst:.2g}")
    ref2, _ = reference(model, tokens, N - 1)
    check(len(compare(ref2, data)) > 0, f"negative control: the gradient over {N - 1} batches does not pass as the "
                                        f"one over {N}")
    summ = True
    for l, lay in enumerate(data["layers"]):
        hs = lay["heads"]
        if lay["kind"] in ("sd", "sdlin"):
            er = [h["grad_erank"] for h in hs]
            n9 = [h["grad_n90"] for h in hs]
            summ &= close(lay["grad_erank_mean"], float(np.mean(er)), 1e-9) and \
                close(lay["grad_erank_median"], float(np.median(er)), 1e-9) and \
                close(lay["grad_n90_mean"], float(np.mean(n9)), 1e-12) and \
                close(lay["n90_median"], float(np.median([h["n90"] for h in hs])), 1e-12)
        else:
            summ &= all(lay[k] is None for k in ("grad_erank_mean", "grad_erank_median", "grad_n90_mean",
                                                 "grad_n90_median", "grad_align_mean")) and \
                all(h[k] is None for h in hs for k in ("grad_rank", "grad_erank", "grad_pr", "grad_sr", "grad_n90",
                                                      "grad_norm", "grad_align"))
    check(summ, "layer summaries: grad_erank_mean/median, grad_n90_mean, n90_median from the heads; "
                "the mha layer's gradient fields are null")
    rows = [ln.split(",") for ln in open(cs).read().splitlines()]
    hdr = rows[0]
    check(hdr[-7:] == ["grad_rank", "grad_erank", "grad_pr", "grad_sr", "grad_n90", "grad_norm", "grad_align"]
          and all(len(rw) == len(hdr) for rw in rows)
          and all(rw[hdr.index("grad_erank")] == "nan" for rw in rows[1:] if rw[2] == "mha"),
          "the CSV: the 7 gradient columns appended, nan for the mha heads")
    lines = r.stdout.splitlines()
    hrow = [ln for ln in lines if ln.lstrip().startswith("layer ")]
    lrows = [ln.split() for ln in lines if ln[:5].strip().isdigit()]
    check(len(hrow) == 1 and hrow[0].split()[-3:] == ["g-erank", "g-n90", "g-cos"] and len(lrows) == 3
          and lrows[2][-3:] == ["-", "-", "-"] and abs(float(lrows[0][-3]) - data["layers"][0]["grad_erank_mean"]) < 1e-3,
          "the table: g-erank, g-n90, g-cos columns; '-' for the mha layer")

    # without -grad_batches: the same JSON keys, null; the table as before
    js0 = os.path.join(tmp, "s.json")
    r0 = run(path, "-json", js0)
    d0 = json.load(open(js0)) if r0.returncode == 0 else None
    check(d0 is not None and d0["grad"] is None
          and all(h["grad_erank"] is None and h["grad_n90"] is None for lay in d0["layers"] for h in lay["heads"])
          and all(lay["grad_erank_mean"] is None for lay in d0["layers"])
          and "g-erank" not in r0.stdout
          and all(abs(a["erank"] - b["erank"]) < 1e-12 for la, lb in zip(d0["layers"], data["layers"])
                  for a, b in zip(la["heads"], lb["heads"])),
          "without -grad_batches: grad null, every grad field null, no g- columns, S's metrics unchanged")

    errs = [
        (["-grad_batches", "2"], "-grad_batches 2: expected -j"),
        (["-j", shard], "-j: expected -grad_batches"),
        (["-grad_batches", "99", "-j", shard, "-b", str(B), "-t", str(T)], "-grad_batches 99: expected at most the 4 batches"),
        (["-grad_batches", "1", "-j", shard, "-t", "65"], "-t 65: expected at most the model's maxT = 64"),
        (["-grad_batches", "1", "-j", os.path.join(tmp, "nothing_*.bin")], "no file matches"),
    ]
    for args, needle in errs:
        re_ = run(path, *args)
        el = re_.stderr.strip().splitlines()
        check(re_.returncode != 0 and len(el) == 1 and el[0].startswith("error: ") and needle in el[0],
              f"error, {' '.join(args)}: {el[0] if el else '(nothing)'}")
    finish()


if __name__ == "__main__":
    main()
