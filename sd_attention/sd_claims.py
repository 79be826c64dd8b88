#!/usr/bin/env python3
"""sd_attention/sd_claims.py: the S-D paper's small-scale claims (arXiv 2605.18826; doc/methods.md "S–D attention",
claims S2-S11 of doc/methods.md "Headline numbers and their provenance") from one command, at one or more model sizes on the CPU.

  python3 sd_attention/sd_claims.py                         # tiny and small on the prose corpus, seed 1
  python3 sd_attention/sd_claims.py --sizes bytes --bin build/blas/train_gpt2   # the byte preset
  python3 sd_attention/sd_claims.py --sizes tiny --seeds 1,2,3 --steps 600
  python3 sd_attention/sd_claims.py --sizes tiny,small --seeds 1,2,3 --report-only
  python3 sd_attention/sd_claims.py --sizes tiny --steps 150 --dry-run
  python3 sd_attention/sd_claims.py --help

For every size and seed S, the models of one shape are trained from the same init (-seed S) and
data order (-data_seed S), all with one recipe (LR, Steps.warmup: U at GPT-2's 0.02, peak lr
1e-3 after a warmup of min(100, steps / 5), cosine to 0.1 of it, weight decay 0.1), in this order
(--arms runs a subset):
  sd_noln    S-D attention L = S - D without LayerNorm (-ln 0)                  S2, S3, S9
  mha_noln   standard attention without LayerNorm (-ln 0)                       S4, S11
  mha        standard softmax attention with per-block LayerNorm (shown beside)
  sd_scalar  sd_noln with one filtering scalar per head (-sd_scalar_d 1)        S8
Each writes ten checkpoints over training (Steps.checkpoints). Then, per model:
  - main.log: the largest gradient norm and the blow-up steps (a norm above NORM_BLOWUP or not
    finite); a run is stable with blow-ups on at most 1 % of its steps     S2, S11
  - ./sd_spectrum -json: the routing n90 and effective rank per layer (S for S-D heads, the skew
    part of W_Q W_K^T for standard heads; doc/methods.md "Effective rank", "The spectral cascade") and the minimal-rank layers,
    for S-D models at every checkpoint;
  - ./sd_surgery -op linearize -k K for K = 1 .. L-1: the val perplexity after replacing the first
    K layers by linear attention without retraining (doc/sd_tools.md "Surgery" (a));    S4
  - S-D models: ./sd_surgery -op shrink -rank90 1 -round8 1: every head cut to the rank that holds
    90 % of its routing energy, with the attention parameters before and after (doc/sd_tools.md "Surgery", "Cascade-allocated d_head").  S6
Files: --out/<size>/seed<S>/<arm>/ (the run), <arm>.{train.log, spectrum.json, lin<K>.report.json,
shrink.report.json} beside it. The summary (--out/claims.md and claims.json) is one table per size
(mean over the seeds, +- the sample standard deviation where there are several) and the claim
rows: what the paper states, the number measured here, and whether the small-scale run agrees,
per seed ("yes", "no" or "2 of 3 seeds") -- only where every seed of every arm the claim reads
ends below the bigram floor of its val windows (scripts/floors.py), else "not testable at this
budget"; the cascade is read from n90 against the one- and two-plane nulls of the same optimizer
run (sd_attention/routing_null.py), which the summary prints. --report-only writes the summary from the seeds that
are finished, running nothing, so that sizes with different seed counts can be reported together.
Finished steps are skipped when started again (--out/settings.json records the data, the step
counts and the trainer; seeds may be added; a directory holding a run with other settings is
refused); --dry-run prints every command. Missing programs and shards are built first with one
`make` (--build 0: an error line each instead). --bin takes another build of the CPU trainer, such as
the BLAS build (make build/blas/train_gpt2: its losses agree with ./train_gpt2's to about 1e-6
nats, doc/verification.md); sd_spectrum and sd_surgery are always the default builds.
"""
import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import build_missing, make_target, read_json  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402
from scripts.ab_stats import SummaryError, final_val_loss  # noqa: E402  (the main.log reader of the summaries)
from llmc_formats.main_log import LogError, parse_main_log  # noqa: E402
from scripts.floors import FloorsError, above_bigram, bits_per_byte, describe, floors  # noqa: E402
from sd_attention import routing_null  # noqa: E402  (the optimizer's one- and two-plane nulls of the routing measures)

# A gradient norm above this, or one that is not finite, is a blow-up step. The healthy runs of
# doc/sd_attention.md stay at 0.5-5 with an isolated spike up to 10^5; a training that blows up
# has hundreds of such steps in a row. The trainer clips to 1 (-c) and skips a non-finite norm,
# so a run can keep a finite loss through them: the count says what the loss does not.
NORM_BLOWUP = 100.0
BLOWUP_STABLE = 0.01  # a run with blow-ups on at most 1 % of its steps counts as stable

SIZES = {  # descriptor, layers, width, heads, batch, steps, surgery val batches
    "tiny": dict(model="L4C128H4T128", L=4, C=128, H=4, B=4, T=64, steps=200, val_batches=16),
    "small": dict(model="L8C256H4T256", L=8, C=256, H=4, B=4, T=128, steps=300, val_batches=16),
    # the CPU research preset: bytes of the prose corpus (V = 256), 0.79M parameters outside the
    # embeddings trained on 7.9M bytes, 10 tokens per parameter (doc/sd_attention.md)
    "bytes": dict(model="L4C128H4T256V256", L=4, C=128, H=4, B=16, T=256, steps=1920, val_batches=16,
                  vocab="bytes"),
}
# The recipe of every arm (doc/sd_attention.md "The recipe"; doc/records/noln_lr_warmup.md): peak
# learning rate 1e-3 after a warmup of min(100, steps / 5), cosine to 0.1 of it, weight decay 0.1;
# U of the S-D layers at GPT-2's std 0.02 (the trainer's default). With a 20-step warmup instead
# the 8-layer S-D model without LayerNorm blows up (gradient norms to 1e7).
LR = 1e-3
# Every arm draws its batches as independent rows (-rows 1: each of the B rows its own window; llm.c's
# batch is one contiguous passage, whose rows' gradients are correlated), and the LayerNorm-free
# arms read their input at EMB_SCALE (-emb_scale: F (wte[x] + wpe[t]) into the blocks). With GPT-2's
# init the stream enters LayerNorm-free blocks at an RMS of about 0.03, so their attention logits
# stay near zero and attention is hardly used; 35.36 puts it at unit RMS (doc/sd_attention.md, "The
# recipe").
ROWS = 1
EMB_SCALE = 35.36
# A routing claim is read only from runs whose attention is used: replacing some layer's attention
# by the uniform causal average (./sd_surgery -op uniform) must cost at least this many nats.
ATTN_USED = 0.1
# the claims whose verdict reads the routing of trained attention
ROUTING_CLAIMS = ("S3/S9", "S4", "S6", "S8")
NULL_NOISE = (0.0, 1.0, 3.0)  # gradient noise / signal of the routing nulls
NULL_DRAWS = 8
ARMS = {  # table entry kind, extra trainer flags (run in this order: the LayerNorm-free pair first)
    "sd_noln": (":sd", ["-ln", "0"]),
    "mha_noln": ("", ["-ln", "0"]),
    "mha": ("", []),
    "sd_scalar": (":sd", ["-ln", "0", "-sd_scalar_d", "1"]),
}
# (--data, the size's vocabulary) -> train glob, val glob, how to prepare them, tokenizer file
# (the floors' bits per byte count its bytes per token)
DATA = {("prose", "gpt2"): ("dev/data/prose/prose_train_*.bin", "dev/data/prose/prose_val_*.bin", "make prose",
                            "gpt2_tokenizer.bin"),
        ("shakespeare", "gpt2"): ("dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
                                  "dev/data/tinyshakespeare/tiny_shakespeare_val.bin", "make data",
                                  "gpt2_tokenizer.bin"),
        ("prose", "bytes"): ("dev/data/prose_bytes/prose_bytes_train_*.bin",
                             "dev/data/prose_bytes/prose_bytes_val_*.bin", "make prose_bytes", "bytes_tokenizer.bin")}
DATA_NAMES = ("prose", "shakespeare")


class ClaimsError(Exception):
    """The whole one-line error."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (ClaimsError), not usage + message."""

    def error(self, message):
        raise ClaimsError(message)


def quoted(cmd):
    return " ".join(shlex.quote(str(c)) for c in cmd)


class Steps:
    """Every command, per size, seed and arm; run_all() executes what is not finished."""

    def __init__(self, a, arms):
        self.a = a
        self.arms = arms  # the arms to run, in ARMS's order

    def data(self, size):
        """(train glob, val glob, make command, tokenizer file) of a size on --data."""
        vocab = SIZES[size].get("vocab", "gpt2")
        if (self.a.data, vocab) not in DATA:
            raise ClaimsError(f"--sizes {size} with --data {self.a.data}: the {size} size reads "
                              f"{' or '.join(d for d, v in DATA if v == vocab)} as {vocab}")
        return DATA[(self.a.data, vocab)]

    def checkpoint_every(self, size):
        """-n and -v of the trainings: about ten checkpoints and val losses over training."""
        return max(1, self.steps(size) // 10)

    def checkpoints(self, size):
        """The steps the trainer writes a checkpoint at (llmc/train_setup.h: every -n, and the last)."""
        n, e = self.steps(size), self.checkpoint_every(size)
        return sorted(set(range(e, n + 1, e)) | {n})

    def base(self, size, seed, arm):
        return os.path.join(self.a.out, size, f"seed{seed}", arm)

    def steps(self, size):
        return self.a.steps or SIZES[size]["steps"]

    def warmup(self, size):
        return min(100, max(1, self.steps(size) // 5))

    def ckpt(self, size, seed, arm):
        return os.path.join(self.base(size, seed, arm), "model_%08d.bin" % self.steps(size))

    def commands(self, size, seed, arm):
        """[(command, log, output that marks it finished)]."""
        p, n = SIZES[size], self.steps(size)
        kind, extra = ARMS[arm]
        b = self.base(size, seed, arm)
        table = b + ".table.txt"
        ck = self.ckpt(size, seed, arm)
        train, val, _, tok = self.data(size)
        every = self.checkpoint_every(size)
        scale = ["-emb_scale", str(self.a.emb_scale)] if "-ln" in extra and self.a.emb_scale != 1 else []
        out = [([self.a.bin, "-e", p["model"], "-layers", table] + extra + scale +
                ["-rows", str(ROWS), "-seed", str(seed), "-data_seed", str(seed), "-i", train, "-j", val, "-tok", tok,
                 "-b", str(p["B"]), "-t", str(p["T"]), "-x", str(n), "-l", str(LR),
                 "-u", str(self.warmup(size)), "-q", "0.1", "-c", "0.1", "-v", str(every),
                 "-m", str(p["val_batches"]), "-s", "0", "-n", str(every), "-o", b, "-y", "1"], b + ".train.log", ck),
               (["./sd_spectrum", ck, "-json", b + ".spectrum.json"], b + ".spectrum.txt", b + ".spectrum.json")]
        if kind == ":sd":  # the routing over training: a spectrum of every checkpoint
            for c in self.checkpoints(size)[:-1]:
                ckc = os.path.join(b, "model_%08d.bin" % c)
                out.append((["./sd_spectrum", ckc, "-json", f"{b}.spectrum_{c}.json"], f"{b}.spectrum_{c}.txt",
                             f"{b}.spectrum_{c}.json"))
        ev = ["-j", val, "-m", str(p["val_batches"]), "-b", str(p["B"]), "-t", str(p["T"])]
        for k in range(1, p["L"]):
            out.append((["./sd_surgery", "-e", ck, "-o", f"{b}.lin{k}.bin", "-op", "linearize", "-k", str(k)]
                        + ev + ["-eval_before", "1" if k == 1 else "0"], f"{b}.lin{k}.log", f"{b}.lin{k}.report.json"))
        for l in range(p["L"]):  # the cost of each layer's attention made uniform
            out.append((["./sd_surgery", "-e", ck, "-o", f"{b}.uniform{l}.bin", "-op", "uniform", "-layer", str(l)]
                        + ev + ["-eval_before", "0"], f"{b}.uniform{l}.log", f"{b}.uniform{l}.report.json"))
        if kind == ":sd":
            out.append((["./sd_surgery", "-e", ck, "-o", f"{b}.shrink.bin", "-op", "shrink", "-rank90", "1",
                         "-round8", "1"] + ev, f"{b}.shrink.log", f"{b}.shrink.report.json"))
        return out

    def table(self, size, arm):
        return f"{SIZES[size]['H']}{ARMS[arm][0]}*{SIZES[size]['L']}\n"

    def finished(self, size, seed):
        return all(os.path.exists(done) for arm in self.arms for _, _, done in self.commands(size, seed, arm))


def missing(a, st, sizes):
    """[(one line naming a missing input, the make target that builds it or None)]."""
    out = []
    for f in (a.bin, "./sd_spectrum", "./sd_surgery"):
        if not os.access(f, os.X_OK):
            t = make_target(f)
            out.append((f"{f}: not built (make {t})" if t else f"{f}: no such program (--bin names a built trainer)", t))
    import glob
    for train, val, prepare, tok in dict.fromkeys(st.data(s) for s in sizes):
        if not os.path.exists(tok):
            out.append((f"{tok}: not written (make {tok})", tok))
        for g in (train, val):
            if not glob.glob(g):
                out.append((f"{g}: no shard matches (prepare it: {prepare})", prepare[len("make "):]))
    return out


def stamp(a, st):
    """Write or check OUT/settings.json: finished steps are reused only under the same settings
    (seeds may be added)."""
    path = os.path.join(a.out, "settings.json")
    settings = {"data": a.data, "steps": {s: st.steps(s) for s in SIZES}, "trainer": os.path.normpath(a.bin),
                "rows": ROWS, "emb_scale": a.emb_scale}
    if os.path.exists(path):
        old = load(path)
        if old != settings:
            diff = sorted(k for k in settings if settings[k] != old.get(k))
            raise ClaimsError(f"{path}: this directory holds a run with other settings ({', '.join(diff) or 'format'} "
                              f"differ: {json.dumps(old, sort_keys=True)}); use another --out or the same settings")
    else:
        write_atomic(path, json.dumps(settings, sort_keys=True) + "\n")


def run_all(a, st, sizes, seeds):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    for size in sizes:
        for seed in seeds:
            for arm in st.arms:
                b = st.base(size, seed, arm)
                os.makedirs(os.path.dirname(b), exist_ok=True)
                write_atomic(b + ".table.txt", st.table(size, arm))
                for cmd, log, done in st.commands(size, seed, arm):
                    if os.path.exists(done):
                        continue
                    t0 = time.time()
                    with open(log, "w") as f:
                        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
                    if rc != 0:
                        raise ClaimsError(f"{log}: {cmd[0]} failed (exit {rc})")
                    if cmd[0] == "./sd_surgery":
                        tmp = cmd[cmd.index("-o") + 1]
                        if os.path.exists(tmp):
                            os.remove(tmp)  # the surgered checkpoint: only its report is kept
                    print(f"{size} seed {seed} {arm}: {os.path.basename(log)} {time.time() - t0:.0f} s", flush=True)


def final_val(run_dir):
    try:
        return final_val_loss(os.path.join(run_dir, "main.log"))[0]
    except (SummaryError, LogError) as e:
        raise ClaimsError(str(e)) from None


def grad_norms(run_dir):
    """(the largest finite grad norm, the blow-up steps, the steps) of a run, from its main.log."""
    path = os.path.join(run_dir, "main.log")
    try:
        norms = [v for _, v in parse_main_log(path, allow_nan=True).get("norm", [])]
    except LogError as e:
        raise ClaimsError(str(e)) from None
    finite = [v for v in norms if math.isfinite(v)]
    return (max(finite, default=float("nan")),
            sum(1 for v in norms if not math.isfinite(v) or v > NORM_BLOWUP), len(norms))


def stable(r):
    """A finite final val loss and blow-ups on at most BLOWUP_STABLE of the steps."""
    return math.isfinite(r["val"]) and r["blowup_steps"] <= BLOWUP_STABLE * r["steps"]


def load(path):
    return read_json(path, "the output of an earlier step; remove it to run that step again", ClaimsError)


def measure(st, size, seed):
    """{arm: the numbers of one seed's model}, read from its files."""
    L = SIZES[size]["L"]
    out = {}
    for arm in st.arms:
        b = st.base(size, seed, arm)
        spec = load(b + ".spectrum.json")
        lin1 = load(f"{b}.lin1.report.json")["val"]
        lin = {k: load(f"{b}.lin{k}.report.json")["val"]["ppl_after"] / lin1["ppl_before"] - 1.0
               for k in range(1, L)}
        norm_max, blowups, steps = grad_norms(b)
        r = {"val": final_val(b), "erank": [x["erank_mean"] for x in spec["layers"]],
             "n90": [x.get("n90_mean") for x in spec["layers"]],
             "norm_max": norm_max, "blowup_steps": blowups, "steps": steps,
             "minimal_fraction": spec["minimal_rank"]["layers_frac"],
             "frac_unstable": max(x["frac_unstable"] for x in spec["layers"]),
             "ppl": lin1["ppl_before"], "linearize_ppl_change": lin,
             "uniform_cost": [load(f"{b}.uniform{l}.report.json")["val"]["loss_after"] - lin1["loss_before"]
                              for l in range(L)],
             "linearizable": max([k for k, v in lin.items() if v < 0.05], default=0)}
        if ARMS[arm][0] == ":sd":  # n90 and erank per layer at each checkpoint over training
            r["over_training"] = {}
            for c in st.checkpoints(size):
                f = b + (".spectrum.json" if c == st.steps(size) else f".spectrum_{c}.json")
                if os.path.exists(f):
                    sp = spec if c == st.steps(size) else load(f)
                    r["over_training"][c] = {"n90": [x.get("n90_mean") for x in sp["layers"]],
                                             "erank": [x["erank_mean"] for x in sp["layers"]]}
        if os.path.exists(b + ".shrink.report.json"):
            sh = load(b + ".shrink.report.json")
            before, after = sh["attention_params"]
            r["shrink"] = {"attention_params": [before, after], "cut": 1.0 - after / before,
                           "ppl_change": sh["val"]["ppl_change"], "layers_after": sh["layers_after"]}
        out[arm] = r
    return out


def ms(values, spec):
    """'mean' (one value) or 'mean ± sd' over seeds, formatted with spec."""
    m = statistics.fmean(values)
    if len(values) == 1:
        return format(m, spec)
    return f"{format(m, spec)} ± {format(statistics.stdev(values), spec.lstrip('+'))}"


def claim_rows(ms_by_size, nulls):
    """[(claim, paper, measured per size, {size: {seed: agrees?}} or None, the arms it reads)];
    ms_by_size is {size: {seed: {arm: numbers}}}, nulls {size: size_nulls()}. report() gates each
    verdict on the arms' floors."""
    def per(fn):
        return "; ".join(f"{s}: {fn(runs)}" for s, runs in ms_by_size.items())

    def each(fn):
        return {s: {seed: bool(fn(arms)) for seed, arms in runs.items()} for s, runs in ms_by_size.items()}

    def vals(runs, fn):
        return [fn(arms) for arms in runs.values()]

    def blowups(runs, arm):  # per seed, of the steps
        return " ".join(f"{x[arm]['blowup_steps']}/{x[arm]['steps']}" for x in runs.values())

    rows = []

    def add(claim, row):
        """A claim's row; a claim that reads an arm --arms left out is listed as not run."""
        try:
            rows.append(row())
        except KeyError as e:
            rows.append((claim, "", f"not run: it reads the arm {e.args[0]}, which --arms left out", None, ()))
    add("S2", lambda: ("S2", "S-D attention trains stably without LayerNorm; Re(λ) <= 0 by construction",
                 per(lambda r: f"val {ms(vals(r, lambda x: x['sd_noln']['val']), '.3f')} without LN vs "
                               f"{ms(vals(r, lambda x: x['mha']['val']), '.3f')} (mha with LN); unstable heads "
                               f"{max(vals(r, lambda x: x['sd_noln']['frac_unstable'])):.0%}; grad-norm blow-up "
                               f"steps {blowups(r, 'sd_noln')} (mha_noln: {blowups(r, 'mha_noln')})"),
                 each(lambda x: stable(x["sd_noln"]) and x["sd_noln"]["frac_unstable"] == 0), ("sd_noln",)))
    # The cascade is read from n90 (rotation planes holding 90 % of |S|^2), not from the erank:
    # AdamW turns a constant k-plane gradient into S ~ sign(.), whose erank is 13 of 32 for one
    # plane, while its n90 stays 1-2 (doc/sd_tools.md, "Routing measures and their nulls"). The
    # thresholds are the nulls of the same optimizer run (routing_null.nulls): layer 0 agrees
    # when its n90 is at most what two planes of routing signal give, and the last layer when
    # its n90 is above that.
    def cascade_ok(x, size):
        n90, hi = x["sd_noln"]["n90"], nulls[size]["k2"][1]
        return n90[0] is not None and n90[-1] is not None and n90[0] <= hi < n90[-1]
    add("S3/S9", lambda: ("S3/S9", "the routing rank is lowest in the first layer (one rotation plane: erank 2) and grows "
                          "with depth",
                 per(lambda r: "S n90 by layer " + " ".join(
                     f"{statistics.fmean(v):.1f}" for v in zip(*vals(r, lambda x: x["sd_noln"]["n90"])))
                     + " (erank " + " ".join(
                     f"{statistics.fmean(v):.1f}" for v in zip(*vals(r, lambda x: x["sd_noln"]["erank"]))) + ")"),
                 {s: {seed: cascade_ok(arms, s) for seed, arms in runs.items()} for s, runs in ms_by_size.items()},
                 ("sd_noln",)))
    # S4 sets S-D against standard attention without LayerNorm, the same block: against mha
    # with LayerNorm it would measure LayerNorm (doc/sd_attention.md, S4); mha is shown beside
    add("S4", lambda: ("S4", "the first layers of an S-D model can be linearized after training at < 5 % perplexity; "
                       "standard attention collapses",
                 per(lambda r: f"layers linearizable at < 5 % (per seed): S-D "
                               f"{' '.join(str(v) for v in vals(r, lambda x: x['sd_noln']['linearizable']))}, mha_noln "
                               f"{' '.join(str(v) for v in vals(r, lambda x: x['mha_noln']['linearizable']))} (K = 1: S-D "
                               f"{ms([100 * v for v in vals(r, lambda x: x['sd_noln']['linearize_ppl_change'][1])], '+.1f')}%, mha_noln "
                               f"{ms([100 * v for v in vals(r, lambda x: x['mha_noln']['linearize_ppl_change'][1])], '+.1f')}%; "
                               f"mha with LayerNorm: {' '.join(str(v) for v in vals(r, lambda x: x['mha']['linearizable']))}, "
                               f"{ms([100 * v for v in vals(r, lambda x: x['mha']['linearize_ppl_change'][1])], '+.1f')}%)"),
                 each(lambda x: x["sd_noln"]["linearizable"] > x["mha_noln"]["linearizable"]),
                 ("sd_noln", "mha_noln")))
    add("S6", lambda: ("S6", "heads shrunk to the measured routing rank: 47-65 % fewer attention parameters at "
                       "+3.9 to +8.4 % perplexity",
                 per(lambda r: f"-{ms([100 * v for v in vals(r, lambda x: x['sd_noln']['shrink']['cut'])], '.0f')}% "
                               f"attention parameters at "
                               f"{ms([100 * v for v in vals(r, lambda x: x['sd_noln']['shrink']['ppl_change'])], '+.1f')}% "
                               f"perplexity (no retraining)"),
                 None, ("sd_noln",)))
    add("S8", lambda: ("S8", "scalar filtering (one D value per head) costs about +0.3 perplexity",
                 per(lambda r: f"val loss {ms(vals(r, lambda x: x['sd_scalar']['val'] - x['sd_noln']['val']), '+.4f')} nats "
                               f"(ppl {ms(vals(r, lambda x: x['sd_scalar']['ppl'] - x['sd_noln']['ppl']), '+.2f')}, "
                               f"{ms(vals(r, lambda x: 100 * (x['sd_scalar']['ppl'] / x['sd_noln']['ppl'] - 1)), '+.1f')}%) "
                               f"vs full D"),
                 None, ("sd_noln", "sd_scalar")))
    add("S11", lambda: ("S11", "standard models train without LayerNorm too (the comparison of the abstract)",
                 per(lambda r: f"mha without LN {ms(vals(r, lambda x: x['mha_noln']['val']), '.3f')} vs with "
                               f"{ms(vals(r, lambda x: x['mha']['val']), '.3f')}; grad-norm blow-up steps "
                               f"{blowups(r, 'mha_noln')}"),
                 each(lambda x: stable(x["mha_noln"])), ("mha_noln",)))
    return rows


def attention_used(r):
    """The largest cost, in nats, of one layer's attention made uniform, and whether it reaches ATTN_USED."""
    worst = max(r["uniform_cost"])
    return worst, worst >= ATTN_USED


def gate(by_seed, arms, f, routing=False):
    """(testable, text) of a claim at one size: a verdict needs every seed of every arm the claim
    reads to end below the bigram floor of its val windows (scripts/floors.py); a run above it has
    learned at most what adjacent token pairs tell, and says nothing about attention. A routing
    claim also needs every such run to use its attention: some layer whose attention made uniform
    costs at least ATTN_USED nats."""
    if above_bigram({arm: [by_seed[k][arm]["val"] for k in by_seed] for arm in arms}, f):
        got = ", ".join(f"{arm} {ms([by_seed[k][arm]['val'] for k in by_seed], '.3f')}" for arm in arms)
        return False, (f"not testable at this budget (val {got} vs bigram floor {f['bigram']:.3f}, "
                       f"unigram {f['unigram']:.3f} nats)")
    unused = [(arm, k, attention_used(by_seed[k][arm])[0]) for arm in arms for k in by_seed
              if routing and not attention_used(by_seed[k][arm])[1]]
    if unused:
        got = ", ".join(f"{arm} seed {k} {c:+.3f}" for arm, k, c in unused)
        return False, (f"not testable: attention unused (the costliest layer made uniform: {got} nats; "
                       f"a verdict needs {ATTN_USED})")
    return True, ""


def agrees_text(ok, gates):
    """Per size: 'not testable at this budget (...)' where the gate fails, else 'yes', 'no',
    'k of n seeds', or 'n/a' for a claim with no yes/no rule; one text when the sizes agree."""
    def one(s):
        testable, why = gates[s]
        if not testable:
            return why
        if ok is None:
            return "n/a"
        seeds = ok[s]
        n = sum(seeds.values())
        return "yes" if n == len(seeds) else "no" if n == 0 else f"{n} of {len(seeds)} seeds"
    texts = {s: one(s) for s in gates}
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return ", ".join(f"{s}: {t}" for s, t in texts.items())


def size_nulls(a, st, size):
    """The n90 (and erank) that one and two planes of routing signal, and noise alone, give after
    the sd_noln arm's AdamW run (sd_attention/routing_null.py): ranges over NULL_NOISE of mean
    - 2 sd .. mean + 2 sd. Cached in OUT/<size>/nulls.json."""
    p, n = SIZES[size], st.steps(size)
    want = {"d": p["C"] // p["H"], "steps": n, "lr": LR, "warmup": st.warmup(size), "final_frac": 0.1,
            "noise_ratios": list(NULL_NOISE), "draws": NULL_DRAWS}
    path = os.path.join(a.out, size, "nulls.json")
    if os.path.exists(path):
        got = load(path)
        if all(got.get(k) == v for k, v in want.items()):
            return got
    res = routing_null.nulls(want["d"], n, LR, want["warmup"], 0.1, noise_ratios=NULL_NOISE, draws=NULL_DRAWS, seed=1)

    def span(k, key):
        rows = [r for r in res["rows"] if r["k"] == k]
        return [min(r[f"s_{key}"] - 2 * r[f"s_{key}_sd"] for r in rows),
                max(r[f"s_{key}"] + 2 * r[f"s_{key}_sd"] for r in rows)]
    out = dict(want, k1=span(1, "n90"), k2=span(2, "n90"), k1_erank=span(1, "erank"),
               noise=next(r["s_n90"] for r in res["rows"] if r["k"] == 0), rows=res["rows"])
    write_atomic(path, json.dumps(out, indent=1) + "\n")
    return out


def size_floors(a, st, size):
    """The unigram and bigram floors of the size's val windows, cached in OUT/<size>/floors.json
    (recomputed when the data or the windows differ)."""
    p = SIZES[size]
    path = os.path.join(a.out, size, "floors.json")
    train, val, _, tok = st.data(size)
    want = {"train": train, "val": val, "B": p["B"], "T": p["T"], "batches": p["val_batches"]}
    if os.path.exists(path):
        f = load(path)
        if all(f.get(k) == v for k, v in want.items()):
            return f
    try:
        f = floors(train, val, p["B"], p["T"], p["val_batches"], tok)
    except (FloorsError, ValueError, OSError) as e:
        raise ClaimsError(f"floors of {size}: {e}") from None
    write_atomic(path, json.dumps(f, indent=1) + "\n")
    return f


def report(a, st, sizes, seeds):
    """claims.md and claims.json over the finished seeds of each size (all of --seeds after a run;
    with --report-only, those that are finished)."""
    runs, fl, nl = {}, {}, {}
    for s in sizes:
        done = [k for k in seeds if st.finished(s, k)]
        if not done:
            raise ClaimsError(f"{os.path.join(a.out, s)}: no finished seed of {','.join(map(str, seeds))} "
                              f"(run without --report-only first)")
        runs[s] = {k: measure(st, s, k) for k in done}
        fl[s] = size_floors(a, st, s)
        nl[s] = size_nulls(a, st, s)
        for by_arm in runs[s].values():
            for r in by_arm.values():
                r["bpb"] = bits_per_byte(r["val"], fl[s])
    L = [f"# S-D claims at small scale ({a.data})", "",
         "Mean over seeds, ± the sample standard deviation where there are several. A claim gets a verdict "
         "only where every seed of every arm it reads ends below the bigram floor of the same val windows "
         "(scripts/floors.py); elsewhere it is not testable at this budget.", ""]
    for s, by_seed in runs.items():
        p = SIZES[s]
        bpb = lambda v: f" ({v:.3f} bpb)" if v is not None else ""  # noqa: E731
        L += [f"## {s}: {p['model']}, {st.steps(s)} steps of B {p['B']} x T {p['T']}, "
              f"seeds {', '.join(map(str, by_seed))}", "",
              f"Floors of the val windows ({p['val_batches']} batches of B x T): {describe(fl[s])}.", "",
              f"Routing nulls (n90 of S after the same AdamW run, head size {nl[s]['d']}, {nl[s]['draws']} draws, "
              f"gradient noise/signal {', '.join(str(r) for r in NULL_NOISE)}): one plane of signal "
              f"{nl[s]['k1'][0]:.1f}-{nl[s]['k1'][1]:.1f}, two planes {nl[s]['k2'][0]:.1f}-{nl[s]['k2'][1]:.1f}, "
              f"noise alone {nl[s]['noise']:.1f} planes; erank of one plane {nl[s]['k1_erank'][0]:.1f}-"
              f"{nl[s]['k1_erank'][1]:.1f}.", "",
              "| arm | final val loss | bits per byte | below bigram floor | ppl | routing n90 by layer | "
              "routing erank by layer | "
              "minimal-rank layers | linearizable (< 5 %), per seed | max grad norm; blow-up steps, per seed | "
              "uniform attention: nats lost by layer |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        for arm in st.arms:
            rs = [by_seed[k][arm] for k in by_seed]
            mf = [r["minimal_fraction"] for r in rs if r["minimal_fraction"] is not None]
            below = sum(1 for r in rs if r["val"] < fl[s]["bigram"])
            L.append(f"| {arm} | {ms([r['val'] for r in rs], '.4f')} | "
                     f"{ms([r['bpb'] for r in rs], '.3f') if rs[0]['bpb'] is not None else 'n/a'} | "
                     f"{below} of {len(rs)} | {ms([r['ppl'] for r in rs], '.2f')} | "
                     f"{' '.join(f'{statistics.fmean(v):.1f}' if None not in v else 'n/a' for v in zip(*[r['n90'] for r in rs]))} | "
                     f"{' '.join(f'{statistics.fmean(v):.1f}' for v in zip(*[r['erank'] for r in rs]))} | "
                     f"{f'{statistics.fmean(mf):.0%}' if mf else 'n/a'} | "
                     f"{' '.join(str(r['linearizable']) for r in rs)} | "
                     f"{max(r['norm_max'] for r in rs):.3g}; {' '.join(str(r['blowup_steps']) for r in rs)} | "
                     f"{' '.join(f'{statistics.fmean(v):+.3f}' for v in zip(*[r['uniform_cost'] for r in rs]))} |")
        L.append("")
    for s, by_seed in runs.items():
        steps = sorted({c for x in by_seed.values() for c in x.get("sd_noln", {}).get("over_training", {})})
        if len(steps) < 2:
            continue
        L += [f"### {s}: the routing of sd_noln over training (n90 per layer, mean over seeds; two planes of signal "
              f"give {nl[s]['k2'][0]:.1f}-{nl[s]['k2'][1]:.1f} at the end of the run)", "",
              "| step | " + " | ".join(f"layer {i}" for i in range(SIZES[s]["L"])) + " |",
              "|---" * (SIZES[s]["L"] + 1) + "|"]
        for c in steps:
            per_layer = [x["sd_noln"]["over_training"][c]["n90"] for x in by_seed.values()
                         if c in x["sd_noln"].get("over_training", {})]
            L.append(f"| {c} | " + " | ".join(f"{statistics.fmean(v):.2f}" if None not in v else "n/a"
                                               for v in zip(*per_layer)) + " |")
        L.append("")
    L += ["## Claims", "", "| # | the paper | measured | agrees |", "|---|---|---|---|"]
    rows = claim_rows(runs, nl)
    gates = {c: {s: gate(runs[s], arms, fl[s], c in ROUTING_CLAIMS) for s in runs} for c, _, _, _, arms in rows}
    for c, paper, got, ok, _ in rows:
        L.append(f"| {c} | {paper} | {got} | {agrees_text(ok, gates[c])} |")
    text = "\n".join(L) + "\n"
    write_atomic(os.path.join(a.out, "claims.md"), text)
    write_atomic(os.path.join(a.out, "claims.json"), json.dumps(
        {"data": a.data,
         "sizes": {s: {"model": SIZES[s]["model"], "steps": st.steps(s), "seeds": list(by_seed), "floors": fl[s],
                       "runs": {str(k): v for k, v in by_seed.items()}} for s, by_seed in runs.items()},
         "claims": [{"claim": c, "measured": g, "arms": list(arms),
                     "testable": {s: gates[c][s][0] for s in runs},
                     "agrees": None if ok is None else {s: {str(k): v for k, v in d.items()} for s, d in ok.items()}}
                    for c, _, g, ok, arms in rows]},
        indent=1, default=str) + "\n")
    print(text, end="")
    print(f"wrote {os.path.join(a.out, 'claims.md')} and claims.json")


def main(argv=None):
    p = Parser(prog="sd_attention/sd_claims.py", allow_abbrev=False, description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="tiny,small", help="comma list of tiny, small, bytes (default tiny,small)")
    p.add_argument("--data", choices=DATA_NAMES, default="prose",
                   help="the corpus (default prose; the bytes size reads the prose corpus as bytes)")
    p.add_argument("--steps", type=int, default=None, help="steps per model (default: 200 tiny, 300 small, 1920 bytes)")
    p.add_argument("--arms", default=",".join(ARMS),
                   help=f"comma list of the arms to run (default all: {','.join(ARMS)}); a claim that reads an "
                        f"arm left out is listed as not run")
    p.add_argument("--seeds", default="1", help="comma list of seeds (init and data order; default 1)")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing; report the finished seeds of each size")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--emb-scale", type=float, default=EMB_SCALE,
                   help=f"the input scale of the LayerNorm-free arms (-emb_scale; default {EMB_SCALE}; 1: GPT-2's)")
    p.add_argument("--bin", default="./train_gpt2",
                   help="the CPU trainer (default ./train_gpt2; build/blas/train_gpt2 is the faster BLAS build)")
    p.add_argument("--out", default="out/sd_claims")
    p.add_argument("--build", type=int, choices=(0, 1), default=1,
                   help="1: build the missing programs and shards with make first (default)")
    p.add_argument("--dry-run", action="store_true")
    try:
        a = p.parse_args(argv)
        os.chdir(ROOT)
        sizes = [s for s in a.sizes.split(",") if s]
        bad = [s for s in sizes if s not in SIZES]
        if bad or not sizes:
            raise ClaimsError(f"--sizes {a.sizes}: expected a comma list of {', '.join(SIZES)}")
        if a.steps is not None and a.steps < 1 or a.threads < 1:
            raise ClaimsError("--steps, --threads: expected positive integers")
        if not (0 < a.emb_scale <= 1e4):
            raise ClaimsError(f"--emb-scale {a.emb_scale}: expected 0 < F <= 10000")
        try:
            seeds = [int(x) for x in a.seeds.split(",") if x]
        except ValueError:
            seeds = []
        if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
            raise ClaimsError(f"--seeds '{a.seeds}': expected distinct non-negative integers, comma separated")
        arms = [x for x in a.arms.split(",") if x]
        if not arms or any(x not in ARMS for x in arms) or len(set(arms)) != len(arms):
            raise ClaimsError(f"--arms {a.arms}: expected a comma list of distinct arms of {', '.join(ARMS)}")
        st = Steps(a, [x for x in ARMS if x in arms])
        # what make builds is built first (a dry run prints the command)
        check = lambda: missing(a, st, sizes)  # noqa: E731
        miss = build_missing(check, a.threads, a.dry_run, ClaimsError) if a.build and not a.report_only else check()
        if a.dry_run:
            for s in sizes:
                for k in seeds:
                    for arm in st.arms:
                        print(f"printf '{st.table(s, arm).strip()}\\n' > {st.base(s, k, arm)}.table.txt")
                        for cmd, log, _ in st.commands(s, k, arm):
                            print(f"OMP_NUM_THREADS={a.threads} {quoted(cmd)} > {log}")
            for m, _ in miss:
                print(f"warning: missing input (a real run stops here): {m}", file=sys.stderr)
            return 0
        if a.report_only:
            report(a, st, sizes, seeds)
            return 0
        if miss:
            for m, _ in miss:
                print(f"error: {m}", file=sys.stderr)
            return 1
        stamp(a, st)
        run_all(a, st, sizes, seeds)
        report(a, st, sizes, seeds)
    except (ClaimsError, OSError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
