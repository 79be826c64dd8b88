"""test/attn_reference.py: an independent Python computation of the attention-distance statistics
(doc/attention_distance.md "Definitions"), for test/test_attn_distance.sh to compare ./attn_distance against.

  attn_reference.py model OUT.bin [--prism FILE] [--sharpen S] [--seed N]
      the tiny model (4 layers, C 64) from train_gpt2.py with its Q and K weights multiplied by S
      (default 16), so that attention is sharp (entropy / ln(i+1) ~ 0.2) and differs between
      layers and heads
  attn_reference.py compare CSV MODEL VAL T SEQUENCES [--control]
      recompute every statistic of MODEL on the first SEQUENCES sequences of T tokens of VAL and
      compare with the CSV written by ./attn_distance (PASS/FAIL lines, "N passed, N failed")

train_gpt2.py's model does not expose its attention probabilities, so this file recomputes them:
a forward pre-hook on each block's attention module captures its input (ln_1 of the residual),
and softmax(q k^T / sqrt(d) + causal mask) is evaluated from that input and the layer's qkv
weights, for the layer's own head split (h_l, d_l). The statistics are then evaluated in float64
with numpy, vectorized over rows (the C code loops over rows; the two share no code).

Tolerance: 1e-5 x max(1, |value|). The C and PyTorch forwards agree to ~4e-7 on logits
(doc/verification.md); on the sharpened tiny models every statistic agrees to <= 1e-7 relative
(measured; the worst difference is printed). The median is a count: a row whose cumulative mass
landed within ~1e-7 of 1/2 could move it by 1/(rows) = 2e-3; the test models have no such row.
--control also recomputes layer 0 with the uniform head split (4 x 16 instead of the model's own)
and requires that comparison to FAIL: the tolerance can tell head splits apart.
"""
import argparse
import csv
import math

import numpy as np
import torch

import os
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2 as tg  # noqa: E402
from harness import check, finish  # noqa: E402

STATS = ("D", "D_norm", "sink", "D_nosink", "median", "entropy", "entropy_norm")
TOL = 1e-5
MEDIAN_SLACK = 1e-6   # the same "mass >= 1/2 - 1e-6" rule as prism/attn_stats.h


def write_model(out, prism, sharpen, seed):
    base = tg.parse_descriptor("tiny")
    layers = tg.parse_schedule(prism, base.n_embd, base.n_layer) if prism else None
    cfg = tg.GPTConfig(n_layer=base.n_layer, n_embd=base.n_embd, n_head=base.n_head,
                       block_size=base.block_size, layers=layers)
    model = tg.GPT(cfg, seed=seed)
    with torch.no_grad():
        for block in model.blocks:
            width = block.attn.n_head * block.attn.head_size
            block.attn.qkv_w[:2 * width] *= sharpen   # the Q and K blocks
    tg.write_model(model, out)
    print(f"wrote {out}")


def attention_inputs(model, idx):
    """The input of every block's attention (ln_1 output), captured by forward pre-hooks."""
    captured = []
    hooks = [b.attn.register_forward_pre_hook(lambda mod, args: captured.append(args[0].detach()))
             for b in model.blocks]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    return captured


def probabilities(attn, x, heads=None):
    """softmax(q k^T / sqrt(d) + causal mask) of one layer, (S, h, T, T), with the layer's own
    head split or `heads` heads of size width/heads (the negative control)."""
    S, T, _ = x.shape
    width = attn.n_head * attn.head_size
    h = heads or attn.n_head
    d = width // h
    with torch.no_grad():
        qkv = x @ attn.qkv_w.t() + attn.qkv_b
        q, k = qkv[..., :width], qkv[..., width:2 * width]
        q = q.reshape(S, T, h, d).transpose(1, 2)
        k = k.reshape(S, T, h, d).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        return scores.masked_fill(future, float("-inf")).softmax(dim=-1).double().numpy()


def statistics(P):
    """Per-head means of the seven quantities over all rows of all sequences: dict stat -> (h,)."""
    S, h, T, _ = P.shape
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    dist = np.where(j <= i, i - j, 0).astype(np.float64)
    rows = {}
    rows["D"] = (P * dist).sum(-1)                                    # (S, h, T)
    rows["D_norm"] = rows["D"] / np.maximum(np.arange(T), 1)
    rows["sink"] = P[..., 0]
    mass = P[..., 1:].sum(-1)
    nd = (P[..., 1:] * dist[:, 1:]).sum(-1)
    ok_ns = (np.arange(T) >= 1) & (mass > 0)
    rows["D_nosink"] = np.where(ok_ns, nd / np.where(mass > 0, mass, 1.0), np.nan)
    # median: mass within delta of the diagonal, R[..., i, delta] = P[..., i, i - delta]
    delta = np.arange(T)[None, :]
    src = np.clip(i - delta, 0, None)
    R = np.where(delta <= i, np.take_along_axis(P, np.broadcast_to(src, P.shape), axis=-1), 0.0)
    reached = np.cumsum(R, axis=-1) >= 0.5 - MEDIAN_SLACK
    rows["median"] = np.where(reached.any(-1), reached.argmax(-1), np.arange(T)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0)
    rows["entropy"] = -plogp.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rows["entropy_norm"] = np.where(np.arange(T) >= 1,
                                        rows["entropy"] / np.log(np.arange(T) + 1.0), np.nan)
    # mean over the rows where a quantity is defined, per head
    return {s: np.nanmean(rows[s].transpose(1, 0, 2).reshape(h, -1), axis=1) for s in STATS}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def value(text):
    return float("nan") if text == "" else float(text)


def close(got, want):
    if math.isnan(want):
        return math.isnan(got)
    return abs(got - want) <= TOL * max(1.0, abs(want))


def compare(csv_path, model_path, val, T, sequences, control):
    model = tg.load_model(model_path)
    tokens = tg.read_shard(val)[:sequences * T].astype(np.int64)
    idx = torch.from_numpy(tokens).view(sequences, T)
    inputs = attention_inputs(model, idx)
    rows = [r for r in read_csv(csv_path) if r["model"] == model_path]
    check(len(rows) > 0, f"{csv_path} has rows for {model_path}")
    worst = {s: 0.0 for s in STATS}
    for l, block in enumerate(model.blocks):
        ref = statistics(probabilities(block.attn, inputs[l]))
        layer_rows = {r["head"]: r for r in rows if int(r["layer"]) == l}
        bad = []
        for head in range(block.attn.n_head):
            r = layer_rows.get(str(head))
            if r is None:
                bad.append(f"head {head} missing")
                continue
            for s in STATS:
                got, want = value(r[s]), float(ref[s][head])
                if not close(got, want):
                    bad.append(f"head {head} {s}: {got} vs {want}")
                elif not math.isnan(want):
                    worst[s] = max(worst[s], abs(got - want) / max(1.0, abs(want)))
        mean = layer_rows.get("mean")
        want_mean = float(np.nanmean(ref["D"]))
        if mean is None or not close(value(mean["D"]), want_mean):
            bad.append(f"layer mean D {mean and mean['D']} vs {want_mean}")
        check(not bad, f"layer {l} ({block.attn.n_head} x {block.attn.head_size}): every head's "
                       f"7 statistics and D_l = {want_mean:.6f} match the Python computation"
                       + (": " + "; ".join(bad[:3]) if bad else ""))
    print("worst relative differences: " + ", ".join(f"{s} {worst[s]:.1e}" for s in STATS))
    if control:
        block = model.blocks[0]
        alt = 4 if block.attn.n_head != 4 else 2
        ref = statistics(probabilities(block.attn, inputs[0], heads=alt))
        want = float(np.mean(ref["D"]))
        got = value(next(r for r in rows if r["layer"] == "0" and r["head"] == "mean")["D"])
        check(not close(got, want), f"negative control: layer 0 computed with {alt} heads gives "
                                    f"D {want:.6f}, outside the tolerance of the tool's {got:.6f}")
    finish()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model")
    m.add_argument("out")
    m.add_argument("--prism", default=None)
    m.add_argument("--sharpen", type=float, default=16.0)
    m.add_argument("--seed", type=int, default=42)
    c = sub.add_parser("compare")
    c.add_argument("csv")
    c.add_argument("model")
    c.add_argument("val")
    c.add_argument("T", type=int)
    c.add_argument("sequences", type=int)
    c.add_argument("--control", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "model":
        write_model(a.out, a.prism, a.sharpen, a.seed)
    else:
        compare(a.csv, a.model, a.val, a.T, a.sequences, a.control)


if __name__ == "__main__":
    main()
