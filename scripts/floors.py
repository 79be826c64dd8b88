#!/usr/bin/env python3
"""scripts/floors.py: the loss a model reaches by knowing only token frequencies, on exactly the
val windows the trainer scores, so that a run's val loss can be read against it.

  /usr/bin/python3 scripts/floors.py --train 'dev/data/prose/prose_train_*.bin' \\
      --val 'dev/data/prose/prose_val_*.bin' -b 4 -t 128 -m 16 [--tokenizer gpt2_tokenizer.bin] [--json F]

Two floors, both estimated from the train split's counts (doc/reproducing.md, "Floors and the
gate"):
  unigram  p(w) = (c(w) + 1/2) / (N + V/2)            (add-1/2 smoothing over the V ids)
  bigram   p(w | v) = lam c(v, w) / c(v) + (1 - lam) p(w), the unigram alone where c(v) = 0;
           lam is the value of {0.05, 0.10, ..., 0.95, 0.97, 0.99} that scores best on these windows, so the
           floor is the best such interpolation can do (a stricter floor than any fixed lam)
The windows are the trainer's (llmc/dataloader.h): the val shards in sorted order, shard by shard,
sample i of a shard at tokens [i B T, (i + 1) B T], targets the last B T of each, -m batches
(-1: every window). The floors are mean negative log-likelihoods over those targets in nats, and
in bits per byte: nats x targets / (bytes x ln 2), where bytes counts each target token's bytes as
the tokenizer file decodes it (the end-of-text token as one byte); bits per byte compares across
tokenizers, nats do not. Without --tokenizer, the bytes are not counted and bits per byte is None.

A run is informative about attention only if its val loss is below the bigram floor: above it the
model has learned at most what pairs of adjacent tokens tell, and a difference between two such
runs says nothing about routing, head width or linearizability (sd_attention/sd_claims.py and
scripts/ab_report.py gate their verdicts on it).

Importable: floors(train, val, B, T, batches, tokenizer=None) -> dict; bits_per_byte(nats, f).
"""
import argparse
import glob
import json
import math
import os
import sys

try:
    import numpy as np
except ModuleNotFoundError as e:
    sys.exit(f"error: {__file__}: {e.name} is not installed for {sys.executable}; run it with "
             f"/usr/bin/python3 (Debian's python3-numpy) or pip install {e.name}")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from llmc_formats import FormatError, tokenizer  # noqa: E402
from llmc_formats.shards import read_shard  # noqa: E402

LAMBDAS = [round(0.05 * i, 2) for i in range(1, 20)] + [0.97, 0.99]


class FloorsError(Exception):
    """One line naming the file or argument and what was expected."""


def shards(pattern, what):
    files = sorted(glob.glob(pattern))
    if not files:
        raise FloorsError(f"{pattern}: no {what} shard matches")
    return files


def val_targets(pattern, B, T, batches):
    """(prev, target) token arrays of the trainer's val windows (llmc/dataloader.h, unshuffled)."""
    n = B * T
    prev, tgt = [], []
    left = None if batches == -1 else batches
    for path in shards(pattern, "val"):
        toks = read_shard(path).astype(np.int64)
        samples = (toks.size - 1) // n
        if samples < 1:
            raise FloorsError(f"{path}: {toks.size} tokens, fewer than one window of B*T + 1 = {n + 1}")
        take = samples if left is None else min(samples, left)
        w = toks[:take * n + 1]
        # window i: inputs w[i n : (i+1) n], targets w[i n + 1 : (i+1) n + 1]; consecutive
        # windows share one token, so the targets are w[1 : take n + 1], the inputs w[: take n]
        prev.append(w[:take * n])
        tgt.append(w[1:take * n + 1])
        if left is not None:
            left -= take
            if left == 0:
                break
    return np.concatenate(prev), np.concatenate(tgt)


def token_bytes(path, V):
    """Bytes of each token id as the tokenizer file decodes it (llm.c's format, version 1 or 2,
    read by llmc_formats/tokenizer.py); the end-of-text token counts one byte."""
    try:
        tokens, eot = tokenizer.read(path)
    except FormatError as e:
        raise FloorsError(str(e)) from None
    if len(tokens) < V:
        raise FloorsError(f"{path}: {len(tokens)} tokens, fewer than the data's vocabulary ({V} ids seen)")
    out = np.array([len(t) for t in tokens], dtype=np.int64)
    if 0 <= eot < len(tokens):
        out[eot] = 1
    return out


def floors(train, val, B, T, batches, tokenizer=None):
    """The unigram and bigram floors of the val windows (nats and bits per byte); see the module."""
    if B < 1 or T < 1 or not (batches == -1 or batches >= 1):
        raise FloorsError(f"-b {B} -t {T} -m {batches}: expected positive B and T and -m >= 1 or -1")
    prev, tgt = val_targets(val, B, T, batches)
    # the vocabulary: every id seen, rounded to what the counts index
    tr = [read_shard(p) for p in shards(train, "train")]
    V = int(max(max(int(t.max()) for t in tr if t.size), int(prev.max()), int(tgt.max()))) + 1
    uni = np.zeros(V, dtype=np.float64)
    big_keys = []
    for t in tr:
        t = t.astype(np.int64)
        uni += np.bincount(t, minlength=V)
        big_keys.append(t[:-1] * V + t[1:])  # pairs inside a shard (the trainer never crosses one)
    N = uni.sum()
    p_uni = (uni + 0.5) / (N + 0.5 * V)
    keys, counts = np.unique(np.concatenate(big_keys), return_counts=True)
    prev_count = np.bincount(keys // V, weights=counts, minlength=V)  # c(v) over the pairs
    q = prev * V + tgt
    idx = np.searchsorted(keys, q)
    idx_c = np.minimum(idx, keys.size - 1)
    c_vw = np.where(keys[idx_c] == q, counts[idx_c], 0).astype(np.float64)
    c_v = prev_count[prev]
    pu = p_uni[tgt]
    p_big = np.divide(c_vw, c_v, out=np.zeros_like(c_vw), where=c_v > 0)
    uni_nats = float(-np.log(pu).mean())
    best = None
    for lam in LAMBDAS:
        p = np.where(c_v > 0, lam * p_big + (1.0 - lam) * pu, pu)
        nats = float(-np.log(p).mean())
        if best is None or nats < best[1]:
            best = (lam, nats)
    out = {"unigram": uni_nats, "bigram": best[1], "bigram_lambda": best[0], "targets": int(tgt.size),
           "train_tokens": int(N), "vocab_seen": V, "B": B, "T": T, "batches": batches,
           "val": val, "train": train, "bytes": None, "bytes_per_token": None,
           "unigram_bpb": None, "bigram_bpb": None}
    if tokenizer:
        nb = int(token_bytes(tokenizer, V)[tgt].sum())
        out["bytes"] = nb
        out["bytes_per_token"] = nb / tgt.size
        out["unigram_bpb"] = bits_per_byte(uni_nats, out)
        out["bigram_bpb"] = bits_per_byte(best[1], out)
    return out


def bits_per_byte(nats, f):
    """A mean loss in nats per target token on f's windows, as bits per byte (None without a
    tokenizer's byte count or for a missing loss)."""
    if nats is None or not f.get("bytes") or not math.isfinite(nats):
        return None
    return nats * f["targets"] / (f["bytes"] * math.log(2))


def above_bigram(vals_by_arm, f):
    """The rule behind every verdict (doc/reproducing.md "Floors and the gate"): the arms with a run
    whose final val loss is not below the bigram floor of f's windows (a NaN counts as above). A
    verdict needs this list empty: a run above the floor has learned at most what adjacent token
    pairs tell, and says nothing about attention."""
    return [arm for arm, vals in vals_by_arm.items() if any(not v < f["bigram"] for v in vals)]


def describe(f):
    """One line: the floors in nats (and bits per byte)."""
    bpb = (lambda k: f" ({f[k + '_bpb']:.3f} bpb)" if f.get(k + "_bpb") is not None else "")
    return (f"unigram {f['unigram']:.4f}{bpb('unigram')}, bigram {f['bigram']:.4f}{bpb('bigram')} nats "
            f"(lambda {f['bigram_lambda']}) on {f['targets']:,} val targets from {f['train_tokens']:,} train tokens")


def main(argv=None):
    p = argparse.ArgumentParser(prog="scripts/floors.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="glob of the train shards (the counts)")
    p.add_argument("--val", required=True, help="glob of the val shards (the scored windows)")
    p.add_argument("-b", type=int, required=True, help="batch size B of the trainer's val windows")
    p.add_argument("-t", type=int, required=True, help="sequence length T")
    p.add_argument("-m", type=int, required=True, help="val batches (-1: every window)")
    p.add_argument("--tokenizer", default=None, help="llm.c tokenizer file, for bits per byte")
    p.add_argument("--json", default=None, help="write the floors here too")
    a = p.parse_args(argv)
    try:
        f = floors(a.train, a.val, a.b, a.t, a.m, a.tokenizer)
    except (FloorsError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(describe(f))
    if a.json:
        from llmc_formats.atomic import write_atomic
        write_atomic(a.json, json.dumps(f, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
