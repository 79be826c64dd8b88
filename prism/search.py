#!/usr/bin/env python3
"""prism/search.py: which layer table? Successive halving over head schedules and layer kinds
under a budget, then the finalists against uniform with seeds (doc/prism.md "Searching for a table").

  python3 prism/search.py --size bytes --kinds mha,sd --kind-layers 2 --threads 1 --jobs 2
  python3 prism/search.py --size tiny --data shakespeare --steps 8 ...   # a few minutes
  python3 prism/search.py ... --extra cascade=table.txt                  # any table file too
  python3 prism/search.py --size 124M --steps 4000 --bin ./train_gpt2cu --jobs 8 --dry-run   # GPUs

Candidates: every head-count sequence that passes Prism's rule at the size's shape (head counts
from H, H/2, H/4, ... that never decrease with depth; h*d = C), each with, when --kinds is given,
every combination of those kinds in the first --kind-layers layers (later layers mha); tables
given with --extra; and uniform, the size's own model, always. The model, data, batch and recipe
are scripts/ab.py's preset (--size): the CPU sizes (tiny, small, bytes) with -rows 1; the GPU
sizes (124M, 354M, 757M) through scripts/run_gpt2.sh, llm.c's recipe and batches, with the rung's
flags after its `--`.

Successive halving: R rungs (--rungs) at N/eta^(R-1), ..., N/eta, N steps (N = --steps or the
preset's). Every candidate trains to the first rung; after each rung the best 1/eta by val loss
(on the preset's fixed val windows) go on, uniform always with them; each resumes from its own
checkpoint (the trainer's -y 1), never retrained. The schedule is warmup-stable-decay (-k wsd):
the rungs before the last run with -decay_frac 0, so their learning rate is the peak whatever the
budget, and the last rung decays over the final --decay-frac of N, which the trainer continues
exactly as one run of N steps would (test/test_resume.sh).

Record: OUT/search.jsonl, one JSON line per candidate and rung (name, table, rung, steps, val or
the error, seconds); started again with the same settings (OUT/search.json) the search continues
from it to the same result. A table that fails to parse or to train is recorded with its error
and dropped. --jobs J trains J candidates of a rung at once (each with --threads, or with a GPU
trainer each on its own GPU, CUDA_VISIBLE_DEVICES 0..J-1; the record is the same). Progress: one
line per finished training, the ranking after each rung, and an estimate of the time left.

Finalists: the best --finalists of the last rung, trained again to N with --seeds by scripts/ab.py
(the preset's cosine recipe) against uniform, in OUT/finals/: paired differences with intervals
under the floors' gate (scripts/ab_report.py). OUT/search.md is the record of the whole search.
"""
import argparse
import itertools
import json
import math
import os
import shlex
import sys
import time
from concurrent.futures import as_completed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from llmc_formats.atomic import write_atomic  # noqa: E402
from llmc_formats.layer_table import parse_schedule  # noqa: E402
from scripts import ab  # noqa: E402
from scripts.ab_stats import SummaryError, final_val_loss  # noqa: E402
from llmc_formats.main_log import LogError  # noqa: E402

KINDS = ("mha", "sd", "lin", "sdlin")


class SearchError(Exception):
    """The whole one-line error."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise SearchError(message)


def head_counts(H):
    """Prism's head counts at base H: H, H/2, H/4, ... down to 1 (the head size doubling)."""
    out, h = [], H
    while h >= 1 and H % h == 0:
        out.append(h)
        if h % 2:
            break
        h //= 2
    return sorted(out)


def candidates(L, H, kinds, kind_layers):
    """(name, table line) of every non-decreasing head-count sequence with every kind combination
    in the first kind_layers layers, uniform (all H, all mha) excluded: it is the reference."""
    out = []
    for seq in itertools.combinations_with_replacement(head_counts(H), L):
        for ks in itertools.product(kinds, repeat=min(kind_layers, L)):
            ks = list(ks) + ["mha"] * (L - len(ks))
            if all(h == H for h in seq) and all(k == "mha" for k in ks):
                continue
            name = "-".join(str(h) + ("" if k == "mha" else k) for h, k in zip(seq, ks))
            table = " ".join(str(h) + ("" if k == "mha" else ":" + k) for h, k in zip(seq, ks))
            out.append((name, table))
    return out


def rung_steps(N, rungs, eta):
    return [max(1, N // eta ** (rungs - 1 - i)) for i in range(rungs)]


class Search:
    def __init__(self, a):
        self.a = a
        self.out = a.out
        self.rungs = rung_steps(a.steps_total, a.rungs, a.eta)
        P = int((1.0 - a.decay_frac) * a.steps_total)
        if len(self.rungs) > 1 and self.rungs[-2] > P:
            raise SearchError(f"--rungs {a.rungs} --eta {a.eta}: rung {self.rungs[-2]} falls in the decay, which "
                              f"starts at step {P} of {a.steps_total} (--decay-frac {a.decay_frac}); use fewer "
                              f"rungs or a larger --eta")
        if len(set(self.rungs)) != len(self.rungs):
            raise SearchError(f"--steps {a.steps_total}: too few for {a.rungs} rungs of ratio {a.eta} ({self.rungs})")
        self.tables_dir = os.path.join(self.out, "tables")
        self.record = os.path.join(self.out, "search.jsonl")
        self.cands = [{"name": "uniform", "table": None, "error": None}]
        for name, line in candidates(a.cfg.n_layer, a.cfg.n_head, a.kinds, a.kind_layers):
            self.cands.append({"name": name, "table": line, "error": None})
        for name, path in a.extra:
            try:
                text = open(path).read()
                parse_schedule(path, a.cfg.n_embd, a.cfg.n_layer, unchecked=True)
                line = " ".join(" ".join(ln.split("#")[0] for ln in text.splitlines()).split())
                self.cands.append({"name": name, "table": line, "error": None})
            except (OSError, ValueError) as e:
                self.cands.append({"name": name, "table": None, "error": str(e)})

    def settings(self):
        a = self.a
        return {"size": a.size, "data": a.data, "steps": a.steps_total, "rungs": self.rungs, "eta": a.eta,
                "decay_frac": a.decay_frac, "kinds": a.kinds, "kind_layers": a.kind_layers,
                "candidates": [[c["name"], c["table"]] for c in self.cands], "micro_batch": a.micro_batch,
                "seq_len": a.seq_len, "val_batches": a.val_batches}

    def stamp(self):
        os.makedirs(self.tables_dir, exist_ok=True)
        path = os.path.join(self.out, "search.json")
        want = self.settings()
        if os.path.exists(path):
            with open(path) as f:
                have = json.load(f)
            if have != want:
                diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
                raise SearchError(f"{self.out}: holds a search with other settings ({', '.join(diff)}); "
                                  f"use another --out")
        else:
            write_atomic(path, json.dumps(want, indent=1) + "\n")

    def load(self):
        done = {}
        if os.path.exists(self.record):
            with open(self.record) as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        r = json.loads(line)
                        done[(r["name"], r["rung"])] = r
                    except (ValueError, KeyError):
                        raise SearchError(f"{self.record}:{n}: not a record line (JSON with name and rung)") from None
        return done

    def append(self, r):
        with open(self.record, "a") as f:
            f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def ab_plan(self):
        """scripts/ab.py's plan for every candidate as an arm at seed 1: its trainer commands."""
        argv = self.ab_argv([c for c in self.cands[1:] if c["table"]], "1", self.out)
        try:
            return ab.Plan(ab.parse_options(argv))
        except ab.AbError as e:
            raise SearchError(str(e)) from None

    def ab_argv(self, cands, seeds, out):
        """scripts/ab.py's options for uniform and these candidates at the search's preset."""
        a = self.a
        arms = ["uniform"] + [f"{c['name']}={self.table_path(c)}" for c in cands]
        argv = ["--size", a.size, "--data", a.data, "--arms", ",".join(arms), "--seeds", seeds,
                "--steps", str(a.steps_total), "--threads", str(a.threads), "--jobs", str(a.jobs), "--out", out,
                "--attn", "0",
                "--evals", "0", "--build", "0"]
        for opt in ("micro_batch", "seq_len", "val_batches"):
            if getattr(a, opt) is not None:
                argv += ["--" + opt.replace("_", "-"), str(getattr(a, opt))]
        return argv + (["--bin", a.bin] if a.bin else [])

    def table_path(self, c):
        return os.path.join(self.tables_dir, c["name"] + ".txt")

    def rung_cmd(self, plan, c, rung):
        """(command, environment additions, run folder) that trains candidate c to rung `rung`: the
        preset's command at seed 1 with the rung's steps, a checkpoint there, val at every rung and
        -k wsd, decaying only in the last rung (scripts/ab.py's Plan.train_cmd puts them in the
        preset's command, or after a launcher's `--`)."""
        decay = self.a.decay_frac if rung == len(self.rungs) - 1 else 0
        arm = {"name": c["name"], "table": self.table_path(c) if c["table"] else None, "checked": False}
        cmd, env = plan.train_cmd(arm, 1, steps=self.rungs[rung],
                                  flags=(("-v", self.rungs[0]), ("-k", "wsd"), ("-decay_frac", decay)))
        return cmd, env, plan.run_dir(arm, 1)

    def train(self, plan, c, rung):
        """Train candidate c to rung `rung` (resuming from its checkpoint); its record line."""
        steps = self.rungs[rung]
        cmd, env, d = self.rung_cmd(plan, c, rung)
        os.makedirs(d, exist_ok=True)
        t0 = time.time()
        r = {"name": c["name"], "table": c["table"], "rung": rung, "steps": steps}
        try:
            with self.devices.env(env) as env:
                ab.execute(cmd, os.path.join(d, "stdout.log"), env, f"rung {rung + 1}")
            val, at = final_val_loss(os.path.join(d, "main.log"))
            if at != steps:
                raise SearchError(f"{d}/main.log: the last val loss is at step {at}, not {steps}")
            r.update(status="ok", val=round(float(val), 6))
        except (ab.AbError, SearchError, SummaryError, LogError, OSError) as e:
            r.update(status="failed", error=str(e))
        r["seconds"] = round(time.time() - t0, 1)
        return r

    def dry_run(self):
        """Print the plan and every candidate's first-rung command; write and run nothing."""
        plan = self.ab_plan()
        print(f"# search {self.a.size}: {len(self.cands)} candidates; rungs (steps) {', '.join(map(str, self.rungs))}; "
              f"eta {self.a.eta}; out {self.out}")
        for c in self.cands:
            if c["error"]:
                print(f"# dropped {c['name']}: {c['error']}")
                continue
            cmd, env, d = self.rung_cmd(plan, c, 0)
            envs = "".join(f"{k}={v} " for k, v in env.items())
            print(f"{envs}{' '.join(shlex.quote(x) for x in cmd)} > {d}/stdout.log")
        print(f"# then rungs 2-{len(self.rungs)} resume the best 1/{self.a.eta} of each rung with the same command "
              f"at the rung's steps; the last rung with -decay_frac {self.a.decay_frac}")
        if self.a.seeds and self.a.finalists:
            print(f"# finals: scripts/ab.py {' '.join(self.ab_argv([], self.a.seeds, os.path.join(self.out, 'finals')))}"
                  f" with the finalists as arms")
        return 0

    def run(self):
        a = self.a
        if a.dry_run:
            return self.dry_run()
        self.stamp()
        for c in self.cands:
            if c["table"] is not None and not os.path.exists(self.table_path(c)):
                write_atomic(self.table_path(c), f"# prism/search.py candidate {c['name']}\n{c['table']}\n")
        done = self.load()
        for c in self.cands:
            if c["error"] and (c["name"], 0) not in done:
                r = {"name": c["name"], "table": None, "rung": 0, "steps": self.rungs[0], "status": "failed",
                     "error": c["error"], "seconds": 0}
                self.append(r)
                done[(c["name"], 0)] = r
                print(f"dropped {c['name']}: {c['error']}", flush=True)
        plan = self.ab_plan()
        self.devices = ab.Devices(plan)  # --jobs slots; with a GPU trainer, one GPU each
        alive = [c for c in self.cands if not c["error"]]
        trained, start = 0, time.time()
        for i, steps in enumerate(self.rungs):
            todo = [c for c in alive if (c["name"], i) not in done]
            if a.max_trainings is not None:
                todo = todo[:max(0, a.max_trainings - trained)]
            # the trainings of a rung are independent: --jobs of them at once, each recorded as it ends;
            # on Ctrl-C the queued ones are cancelled (the running trainers stop at their checkpoint)
            with ab.job_pool(a.jobs) as pool:
                running = {pool.submit(self.train, plan, c, i): c for c in todo}
                for fut in as_completed(running):
                    c, r = running[fut], fut.result()
                    self.append(r)
                    done[(c["name"], i)] = r
                    trained += 1
                    k = sum(1 for x in alive if (x["name"], i) in done)
                    what = f"val {r['val']:.4f}" if r["status"] == "ok" else f"failed: {r['error']}"
                    print(f"rung {i + 1}/{len(self.rungs)} ({steps} steps) [{k}/{len(alive)}] {c['name']}: {what} "
                          f"({r['seconds']:.0f} s); left ~{self.time_left(done, alive, i):.0f} s", flush=True)
            if any((c["name"], i) not in done for c in alive):
                print(f"stopped after {trained} trainings (--max-trainings); run the same command to continue",
                      flush=True)
                return 3
            ok = [c for c in alive if done[(c["name"], i)]["status"] == "ok"]
            ok.sort(key=lambda c: (done[(c["name"], i)]["val"], c["name"]))
            print(f"rung {i + 1} ranking: " + ", ".join(f"{c['name']} {done[(c['name'], i)]['val']:.4f}"
                                                       for c in ok), flush=True)
            if i + 1 < len(self.rungs):
                keep = ok[:max(1, math.ceil(len(ok) / a.eta))]
                if not any(c["name"] == "uniform" for c in keep):
                    keep += [c for c in ok if c["name"] == "uniform"]
                alive = keep
        final = [c for c in alive if done[(c["name"], len(self.rungs) - 1)]["status"] == "ok"]
        final.sort(key=lambda c: (done[(c["name"], len(self.rungs) - 1)]["val"], c["name"]))
        finalists = [c for c in final if c["name"] != "uniform"][:a.finalists]
        rc = 0
        if finalists and a.seeds:
            rc = self.finals(finalists)
        self.report(done, finalists, time.time() - start)
        return rc

    def time_left(self, done, alive, rung):
        """Seconds left: the mean seconds per step so far times the steps still to train, the
        later rungs assumed to keep 1/eta of the candidates."""
        secs = sum(r["seconds"] for r in done.values() if r["status"] == "ok")
        steps = sum(self.rungs[r["rung"]] - (self.rungs[r["rung"] - 1] if r["rung"] else 0)
                    for r in done.values() if r["status"] == "ok")
        if not steps:
            return 0.0
        left, n = 0, len(alive)
        for i in range(rung, len(self.rungs)):
            todo = n if i > rung else sum(1 for c in alive if (c["name"], i) not in done)
            left += todo * (self.rungs[i] - (self.rungs[i - 1] if i else 0))
            n = max(1, math.ceil(n / self.a.eta)) + 1
        return left * secs / steps / self.a.jobs

    def finals(self, finalists):
        argv = self.ab_argv(finalists, self.a.seeds, os.path.join(self.out, "finals"))
        print(f"finalists: {', '.join(c['name'] for c in finalists)}: scripts/ab.py {' '.join(argv)}", flush=True)
        return ab.main(argv)

    def report(self, done, finalists, seconds):
        lines = ["# Layer-table search", "", f"`python3 prism/search.py {' '.join(sys.argv[1:])}`", "",
                 f"Rungs (steps): {', '.join(map(str, self.rungs))}; eta {self.a.eta}; WSD decay over the final "
                 f"{self.a.decay_frac} of {self.a.steps_total} steps; {len(self.cands)} candidates.", "",
                 "| candidate | table | " + " | ".join(f"rung {i + 1} ({s})" for i, s in enumerate(self.rungs)) + " |",
                 "|---|---|" + "---|" * len(self.rungs)]
        for c in self.cands:
            cells = []
            for i in range(len(self.rungs)):
                r = done.get((c["name"], i))
                cells.append("" if r is None else f"{r['val']:.4f}" if r["status"] == "ok" else "failed")
            lines.append(f"| {c['name']} | `{c['table'] or ('the descriptor' if c['name'] == 'uniform' else '-')}` | "
                         + " | ".join(cells) + " |")
        failed = [r for r in done.values() if r["status"] == "failed"]
        if failed:
            lines += ["", "Dropped:"] + [f"- {r['name']} (rung {r['rung'] + 1}): {r['error']}" for r in failed]
        lines += ["", f"Finalists: {', '.join(c['name'] for c in finalists) or 'none'}"
                  + (f"; their paired results against uniform: `{self.out}/finals/summary.md`." if finalists else ".")]
        write_atomic(os.path.join(self.out, "search.md"), "\n".join(lines) + "\n")
        print(f"search: {self.out}/search.md ({seconds:.0f} s since this command started)", flush=True)


def parse_args(argv):
    p = Parser(prog="prism/search.py", allow_abbrev=False, description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True, choices=list(ab.DIRECT) + list(ab.LAUNCHER),
                   help="scripts/ab.py's preset; 124M, 354M, 757M run scripts/run_gpt2.sh on GPUs")
    p.add_argument("--data", default=None,
                   help="shakespeare, prose, fineweb or a shard directory (default prose; fineweb for 124M-757M)")
    p.add_argument("--steps", type=int, default=None, help="N, the full budget (default: the preset's)")
    p.add_argument("--rungs", type=int, default=4, help="rungs R (default 4)")
    p.add_argument("--eta", type=int, default=2, help="keep 1/eta per rung; rungs eta apart (default 2)")
    p.add_argument("--decay-frac", type=float, default=0.2, help="-decay_frac of the last rung (default 0.2)")
    p.add_argument("--kinds", default="mha", help=f"kinds for the first --kind-layers layers ({','.join(KINDS)})")
    p.add_argument("--kind-layers", type=int, default=0, help="layers that take --kinds (default 0: mha only)")
    p.add_argument("--extra", action="append", default=[], help="NAME=FILE: a layer-table file as a candidate")
    p.add_argument("--finalists", type=int, default=2, help="finalists against uniform (default 2)")
    p.add_argument("--seeds", default="1,2,3", help="the finals' seeds (default 1,2,3; empty: no finals)")
    p.add_argument("--micro-batch", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--val-batches", type=int, default=None)
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS per training (default 2)")
    p.add_argument("--jobs", type=int, default=1,
                   help="trainings at once within a rung (default 1); with a GPU trainer, one per GPU 0..J-1")
    p.add_argument("--bin", default=None, help="the trainer (default ./train_gpt2)")
    p.add_argument("--out", default=None, help="output directory (default out/search_<size>)")
    p.add_argument("--max-trainings", type=int, default=None, help="stop after this many trainings (exit 3)")
    p.add_argument("--dry-run", action="store_true", help="print the candidates' first-rung commands, run nothing")
    a = p.parse_args(argv)
    a.kinds = [k for k in a.kinds.split(",") if k]
    bad = [k for k in a.kinds if k not in KINDS]
    if bad or not a.kinds:
        raise SearchError(f"--kinds {','.join(a.kinds)}: expected a comma list of {', '.join(KINDS)}")
    if (a.rungs < 1 or a.eta < 2 or a.finalists < 0 or a.kind_layers < 0 or a.jobs < 1
            or not 0 <= a.decay_frac <= 1):
        raise SearchError("--rungs >= 1, --eta >= 2, --finalists >= 0, --kind-layers >= 0, --jobs >= 1, "
                          "--decay-frac in [0, 1]")
    extra = []
    for item in a.extra:
        name, _, path = item.partition("=")
        if not path or not ab.ARM_NAME.fullmatch(name) or name == "uniform":
            raise SearchError(f"--extra '{item}': expected NAME=FILE (NAME letters, digits, '.', '-', '_')")
        extra.append((name, path))
    a.extra = extra
    a.data = a.data or ("prose" if a.size in ab.DIRECT else "fineweb")
    if a.size in ab.DIRECT:
        a.steps_total = a.steps or ab.DIRECT[a.size]["steps"]
        a.cfg = ab.parse_descriptor(ab.DIRECT[a.size]["model"])
    else:
        if not a.steps:
            raise SearchError(f"--size {a.size}: give --steps N, the full budget of the search (the recipe's is "
                              f"`bash scripts/run_gpt2.sh --size {a.size} --print-done-file`)")
        a.steps_total = a.steps
        a.cfg = ab.parse_descriptor(ab.LAUNCHER[a.size]["model"])
    a.out = (a.out or f"out/search_{a.size}").rstrip("/")
    return a


def main(argv=None):
    try:
        a = parse_args(argv)
        os.chdir(ROOT)
        return Search(a).run()
    except SearchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the same command continues from the record", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
