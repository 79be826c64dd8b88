#!/usr/bin/env python3
"""test/test_floors.py: scripts/floors.py, the unigram and bigram floors of the trainer's val
windows, on shards small enough to count by hand:
  - the windows are the trainer's (llmc/dataloader.h): shards in sorted order, (n - 1) // (B T)
    windows per shard, -m batches or all of them (-1);
  - the unigram floor is the add-1/2 estimate's mean negative log-likelihood; the bigram floor the
    best interpolation of the grid, both recomputed here in plain Python;
  - bits per byte from a tokenizer file (the end-of-text token one byte);
  - bad input is one line.
"""
import json
import math
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import harness  # noqa: E402
from scripts import floors as fl  # noqa: E402
from dev.data.data_common import write_datafile  # noqa: E402

d = os.path.join(ROOT, "build", "tmp_floors")
os.makedirs(d, exist_ok=True)
for f in os.listdir(d):
    os.remove(os.path.join(d, f))

# train: a repeating pattern over ids 0..4 (V seen = 5); val: two shards
train = [0, 1, 2, 3, 0, 1, 2, 4, 0, 1] * 20
write_datafile(os.path.join(d, "t_train_000.bin"), train)
val_a = [0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 3, 2, 1, 0]      # 14 tokens: (14 - 1) // 4 = 3 windows of B 2 x T 2
val_b = [2, 2, 1, 0, 4, 4, 3, 1, 0]                      # 9 tokens: 2 windows
write_datafile(os.path.join(d, "t_val_000.bin"), val_a)
write_datafile(os.path.join(d, "t_val_001.bin"), val_b)


def by_hand(pairs, lam_grid):
    V = 5
    N = len(train)
    uni = [train.count(v) for v in range(V)]
    pu = [(c + 0.5) / (N + 0.5 * V) for c in uni]
    big = {}
    for a, b in zip(train[:-1], train[1:]):
        big[(a, b)] = big.get((a, b), 0) + 1
    cprev = {}
    for (a, _), c in big.items():
        cprev[a] = cprev.get(a, 0) + c
    u = sum(-math.log(pu[t]) for _, t in pairs) / len(pairs)
    best = min(sum(-math.log(lam * big.get((p, t), 0) / cprev[p] + (1 - lam) * pu[t] if p in cprev else pu[t])
                   for p, t in pairs) / len(pairs) for lam in lam_grid)
    return u, best


def windows(shard, n, count):
    return [(shard[i], shard[i + 1]) for i in range(count * n)]


pat = os.path.join(d, "t_val_*.bin")
f = fl.floors(os.path.join(d, "t_train_*.bin"), pat, 2, 2, -1)
pairs = windows(val_a, 4, 3) + windows(val_b, 4, 2)
u, b = by_hand(pairs, fl.LAMBDAS)
harness.check(f["targets"] == 20, f"-m -1: every window of both shards, 3 + 2 windows of 4 targets ({f['targets']})")
harness.check(abs(f["unigram"] - u) < 1e-9, f"unigram floor = add-1/2 by hand ({f['unigram']:.6f} vs {u:.6f})")
harness.check(abs(f["bigram"] - b) < 1e-9, f"bigram floor = the best interpolation by hand ({f['bigram']:.6f} vs {b:.6f})")
harness.check(f["bigram"] < f["unigram"], "the bigram floor is below the unigram floor on this patterned data")
f2 = fl.floors(os.path.join(d, "t_train_*.bin"), pat, 2, 2, 4)
u2, b2 = by_hand(windows(val_a, 4, 3) + windows(val_b, 4, 1), fl.LAMBDAS)
harness.check(f2["targets"] == 16 and abs(f2["unigram"] - u2) < 1e-9 and abs(f2["bigram"] - b2) < 1e-9, f"-m 4: the 3 windows of the first shard, then 1 of the second ({f2['targets']} targets)")
f3 = fl.floors(os.path.join(d, "t_train_*.bin"), pat, 2, 2, 2)
harness.check(f3["targets"] == 8, "-m 2: the first two windows only")
harness.check(f["unigram_bpb"] is None and fl.bits_per_byte(3.0, f) is None, "no tokenizer: bits per byte is None")

# a tokenizer file (llm.c's format, version 2): ids 0..4 with 1, 2, 3, 1 bytes and the EOT (4)
tok = os.path.join(d, "tok.bin")
hdr = struct.pack("<4i", 20240328, 2, 5, 4) + b"\0" * (1024 - 16)
body = b"".join(bytes([len(s)]) + s for s in (b"a", b"bc", b"def", b" ", b"<|endoftext|>"))
open(tok, "wb").write(hdr + body)
ft = fl.floors(os.path.join(d, "t_train_*.bin"), pat, 2, 2, -1, tok)
nbytes = sum({0: 1, 1: 2, 2: 3, 3: 1, 4: 1}[t] for _, t in pairs)
harness.check(ft["bytes"] == nbytes, f"bytes of the targets from the tokenizer, the EOT as one byte ({ft['bytes']} vs {nbytes})")
harness.check(abs(ft["unigram_bpb"] - ft["unigram"] * 20 / (nbytes * math.log(2))) < 1e-12
        and abs(fl.bits_per_byte(2.0, ft) - 2.0 * 20 / (nbytes * math.log(2))) < 1e-12, "bits per byte = nats x targets / (bytes ln 2)")

# the CLI and its errors
py = sys.executable
out = subprocess.run([py, "scripts/floors.py", "--train", os.path.join(d, "t_train_*.bin"), "--val", pat, "-b", "2",
                      "-t", "2", "-m", "-1", "--json", os.path.join(d, "f.json")], cwd=ROOT, capture_output=True, text=True)
j = json.load(open(os.path.join(d, "f.json"))) if out.returncode == 0 else {}
harness.check(out.returncode == 0 and out.stdout.startswith("unigram ") and abs(j.get("bigram", 0) - f["bigram"]) < 1e-12, f"CLI: one line and the same numbers in --json (exit {out.returncode})")

# the gate's rule: an arm with any run not below the bigram floor (NaN included) is above it
g = {"bigram": 2.5, "unigram": 3.1}
harness.check(fl.above_bigram({"a": [2.4, 2.49], "b": [2.3]}, g) == [], "the gate: every run below the bigram floor -> no arm above")
harness.check(fl.above_bigram({"a": [2.4, 2.5], "b": [2.3], "c": [float("nan")]}, g) == ["a", "c"],
              "the gate: a run at the floor and a NaN run put their arms above it")


def one_error(args, pattern):
    r = subprocess.run([py, "scripts/floors.py"] + args, cwd=ROOT, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: ") and pattern in lines[0]
    harness.check(ok, f"error: {' '.join(args[-2:])}: {lines[:1]}")


one_error(["--train", os.path.join(d, "none_*.bin"), "--val", pat, "-b", "2", "-t", "2", "-m", "1"], "no train shard matches")
one_error(["--train", os.path.join(d, "t_train_*.bin"), "--val", pat, "-b", "8", "-t", "8", "-m", "1"],
          "fewer than one window of B*T + 1 = 65")
one_error(["--train", os.path.join(d, "t_train_*.bin"), "--val", pat, "-b", "2", "-t", "2", "-m", "0"], "expected positive B and T")
open(os.path.join(d, "bad_tok.bin"), "wb").write(b"\0" * 2000)
one_error(["--train", os.path.join(d, "t_train_*.bin"), "--val", pat, "-b", "2", "-t", "2", "-m", "1",
           "--tokenizer", os.path.join(d, "bad_tok.bin")], "expected 20240328 and 1 or 2")
harness.finish()
