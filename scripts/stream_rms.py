#!/usr/bin/env python3
"""scripts/stream_rms.py: the size of the residual stream per layer, from a checkpoint or over a
run's training. Without LayerNorm in the blocks (-ln 0) nothing bounds the stream; an S-D
layer's logits u (S - D) u^T grow with the square of its input, so a stream that grows with
depth and with training drives them, and the gradient, to blow up (doc/sd_attention.md, "The
residual stream").

  /usr/bin/python3 scripts/stream_rms.py CKPT -j 'VAL_GLOB' [-b 4] [-t 64] [-m 4] [--json F]
  /usr/bin/python3 scripts/stream_rms.py --log RUN_DIR            # main.log's rms records

With a checkpoint: the model of train_gpt2.py (the PyTorch reference) runs the first -m windows of
B x T tokens of the first val shard, the trainer's val windows (llmc/dataloader.h), and prints
the root mean square of the stream entering each block (block 0: F (wte[x] + wpe[t]), with the
checkpoint's emb_scale F, doc/formats.md "Per-layer heads") and entering ln_f, over the same
positions as the trainer's "s:<step> rms0:... rmsL:..." record of main.log (sqrt of the mean over batches of
each batch's mean square). With --log: that record at every val step of a run, one row a step.
"""
import argparse
import glob
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401


def from_checkpoint(ckpt, val, B, T, batches):
    """[rms entering block 0, ..., block L-1, ln_f] of the checkpoint on the val windows."""
    try:
        import torch
        import train_gpt2 as tg
    except ModuleNotFoundError as e:
        sys.exit(f"error: {__file__}: {e.name} is not installed for {sys.executable}; run it with "
                 f"/usr/bin/python3 (Debian's python3-torch) or pip install {e.name}")
    files = sorted(glob.glob(val))
    if not files:
        raise ValueError(f"{val}: no val shard matches")
    model = tg.load_model(ckpt)
    model.eval()
    tokens = tg.read_shard(files[0])
    if len(tokens) < batches * B * T + 1:
        raise ValueError(f"{files[0]}: {len(tokens)} tokens, {batches} batches of B*T = {B * T} need "
                         f"{batches * B * T + 1}")
    if T > model.config.block_size:
        raise ValueError(f"-t {T}: longer than the model's maxT {model.config.block_size}")
    L = len(model.blocks)
    sq = [0.0] * (L + 1)
    with torch.no_grad():
        for k in range(batches):
            x, _ = tg._window(tokens, k * B * T, B, T)
            h = model.embed(x)      # F (wte[x] + wpe[t]) with the model's emb_scale F
            for i, block in enumerate(model.blocks):
                sq[i] += float((h.double() ** 2).mean())
                h = block(h)
            sq[L] += float((h.double() ** 2).mean())
    return [math.sqrt(s / batches) for s in sq]


def from_log(run):
    from llmc_formats.main_log import log_path, parse_main_log
    series = parse_main_log(log_path(run), allow_nan=True).get("rms", [])
    if not series:
        raise ValueError(f"{run}: main.log has no rms records (written at val steps by ./train_gpt2)")
    return series


def table(rows):
    n = len(rows[0][1])
    out = ["| step | " + " | ".join([f"block {i}" for i in range(n - 1)] + ["ln_f"]) + " |",
           "|---" * (n + 1) + "|"]
    for step, v in rows:
        out.append(f"| {step} | " + " | ".join(f"{x:.4g}" for x in v) + " |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="scripts/stream_rms.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", nargs="?", help="a model checkpoint (.bin)")
    p.add_argument("-j", dest="val", help="glob of the val shards (the first is read)")
    p.add_argument("-b", type=int, default=4, help="batch size of a window (default 4)")
    p.add_argument("-t", type=int, default=64, help="sequence length (default 64)")
    p.add_argument("-m", type=int, default=4, help="windows (val batches) to average (default 4)")
    p.add_argument("--log", help="a run directory: print its main.log's rms records instead")
    p.add_argument("--json", help="also write the numbers as JSON here")
    a = p.parse_args(argv)
    try:
        if a.log:
            if a.checkpoint:
                raise ValueError("give a checkpoint or --log RUN_DIR, not both")
            rows = from_log(a.log)
            result = {"run": a.log, "rms": [{"step": s, "rms": v} for s, v in rows]}
        else:
            if not a.checkpoint or not a.val:
                raise ValueError("expected CKPT -j VAL_GLOB (or --log RUN_DIR)")
            if a.b < 1 or a.t < 1 or a.m < 1:
                raise ValueError(f"-b {a.b} -t {a.t} -m {a.m}: expected positive integers")
            v = from_checkpoint(a.checkpoint, a.val, a.b, a.t, a.m)
            rows = [("ckpt", v)]
            result = {"checkpoint": a.checkpoint, "val": a.val, "B": a.b, "T": a.t, "batches": a.m, "rms": v}
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(table(rows))
    if a.json:
        from llmc_formats.atomic import write_atomic
        write_atomic(a.json, json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
