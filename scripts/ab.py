#!/usr/bin/env python3
"""scripts/ab.py: one command per A/B. Every arm x seed is trained, then scored on the five
zero-shot tasks, the attention distance of each arm against the reference is measured per seed,
and one summary is written (scripts/ab_report.py: Markdown, JSON, PNGs).

  python3 scripts/ab.py --size tiny                              # uniform vs Prism on the CPU
  python3 scripts/ab.py --size small --arms uniform,prism,cascade=my_table.txt --seeds 1,2,3
  python3 scripts/ab.py --size 124M --gpus 8 --budget tenth      # run_gpt2.sh's recipe, a tenth
  python3 scripts/ab.py ... --dry-run                            # print every command
  python3 scripts/ab.py --help

Sizes (presets):
  tiny   L4C128H2T128, 4 layers x C 128, B 4 x T 64, 100 steps, the prose corpus: minutes on a CPU
  small  L8C256H4T256 (make train's model), B 4 x T 128, 300 steps, the prose corpus
  bytes  L4C128H2T256V256, the prose corpus as bytes (make prose_bytes), B 16 x T 256, 1,920 steps:
         10 tokens per parameter outside the embeddings, runs that end below the bigram floor
         (doc/reproducing.md "Floors and the gate"); no zero-shot tasks (GPT-2-tokenized files)
  124M, 354M, 757M  llm.c's recipes through scripts/run_gpt2.sh (doc/baselines.md "Hyperparameters of the reproduction scripts"; FineWeb),
         with --budget to run a fraction of the tokens
tiny, small and bytes run the trainer directly: ./train_gpt2 on the CPU, or --bin ./train_gpt2cu for a
short GPU run (--gpus N > 1: mpirun -np N); --seq-len, --val-every and --val-batches change their
T, -v and -m (doc/records/reproducing_small_ab.md runs the small preset on TinyShakespeare this way).
--jobs J trains J runs at once: on two cores --jobs 2 --threads 1, on a GPU node one run per GPU.

Arms: a comma list; the first is the reference every other arm is paired against. A name is
  uniform          the descriptor's own heads (no -prism)
  prism, prism_b, prism_c, prism_d
                   the size's preset (prism/schedules/<model>_prism[_b|_c|_d].txt; doc/prism.md
                   "Candidate schedules and negative controls"); prism_d has no 256-wide heads
  NAME=FILE        any layer-table file (doc/prism.md: head counts and sizes, kinds such as sd or
                   lin); it is run with -layers, since such a table need not follow Prism's
                   rules (for example the table sd_attention/prescribe.py writes)
Pairing (doc/prism.md "Candidate schedules and negative controls": its protocol): within a seed S every arm starts from the same weights
(-seed S; a layer table changes no parameter shape) and reads the same batches. --data-order seed
(the default) gives seed S the data order -data_seed S, so that the spread over seeds covers the
data order as well as the init; --data-order fixed keeps llm.c's order (shuffle seed 42) in
every run. The sizes that run the trainer directly draw independent rows (--rows 1, the trainers'
-rows 1: every row of a batch its own window; doc/formats.md "DataLoader semantics"); --rows 0 gives llm.c's batches,
one passage each, whose curves compare step by step with llm.c. Runs go seed by seed, the arms in turn, so that a change of machine load hits every
arm of a seed alike.

Outputs in --out (default out/ab_<size>): <arm>_seed<S>/ (the run: main.log, stdout.log,
checkpoints, evals.json), attn_<arm>_seed<S>.{json,csv,txt}, ab.json (the settings), summary.md,
summary.json, loss.png, attn_delta.png. Started again, it skips what is finished (a run whose
main.log has the last step's val loss, or whose DONE_ marker exists; an evals.json; an attention
JSON); an interrupted CPU run starts over, a launcher run resumes from its last checkpoint. A
directory holding an A/B with other settings is refused.

Before any run it builds what is missing and the Makefile makes (the CPU programs, the prose or
TinyShakespeare shards, the eval files) with one `make`, so that it runs from one command on a
fresh clone (--build 0: no make); then it checks the inputs (trainer, data, schedules, eval
files), one line each for what is still missing, and warns when a GPU run would put a layer of head size 256 on an SM 8.x GPU (cuDNN does not train it
there, doc/gpu.md "Attention paths"), naming the 128-wide preset.
"""
import argparse
import contextlib
import glob
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import build_missing, make_target  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402
from llmc_formats.descriptor import parse_descriptor  # noqa: E402
from llmc_formats.layer_table import parse_schedule  # noqa: E402
from llmc_formats.shards import read_shard_header  # noqa: E402
from scripts.ab_stats import SummaryError, final_val_loss  # noqa: E402  (the main.log reader of the summaries)
from llmc_formats.main_log import LogError  # noqa: E402

TASK_FILES = {"hellaswag": "hellaswag/hellaswag_val.bin", "piqa": "piqa/piqa_val.bin",
              "arc_easy": "arc_easy/arc_easy_test.bin", "winogrande": "winogrande/winogrande_val.bin",
              "lambada": "lambada/lambada_test.bin"}

# The direct presets: the model, its batch and recipe (make train's: lr 1e-3, cosine to 0.1 of it,
# weight decay 0.1), how often and on how much the val loss is taken, eval examples per task and
# attention-distance windows.
DIRECT = {
    "tiny": dict(model="L4C128H2T128", schedules="L4C128", B=4, T=64, steps=100, warmup=10,
                 val_every=25, val_batches=16, eval_n=100, attn_windows=16),
    "small": dict(model="L8C256H4T256", schedules="L8C256", B=4, T=128, steps=300, warmup=20,
                  val_every=50, val_batches=32, eval_n=300, attn_windows=16),
    # the CPU research preset: the prose corpus as bytes (V 256, make prose_bytes), 0.79M
    # parameters outside the embeddings, 7.9M bytes (10 per parameter); no zero-shot tasks (their
    # files are GPT-2-tokenized); the tiny model's Prism preset and controls (2 base heads)
    "bytes": dict(model="L4C128H2T256V256", schedules="L4C128", B=16, T=256, steps=1920, warmup=100,
                  val_every=192, val_batches=16, eval_n=0, attn_windows=16, vocab="bytes"),
}
TOKENIZERS = {"gpt2": "gpt2_tokenizer.bin", "bytes": "bytes_tokenizer.bin"}
# The launcher presets: scripts/run_gpt2.sh --size; their schedules' prefix and default data.
LAUNCHER = {"124M": dict(model="d12", schedules="d12", fineweb="fineweb10B"),
            "354M": dict(model="d24", schedules="d24", fineweb="fineweb100B"),
            "757M": dict(model="L24C1536H24", schedules="L24C1536", fineweb="fineweb100B")}
BUDGETS = {"full": 1, "half": 2, "quarter": 4, "tenth": 10}
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*(?:_[A-Za-z0-9.-]+)*")


class AbError(Exception):
    """The whole one-line error."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (AbError), not usage + message."""

    def error(self, message):
        raise AbError(message)


def data_globs(name, size):
    """--data -> (train glob, val glob, how to prepare it)."""
    if DIRECT.get(size, {}).get("vocab") == "bytes":
        if name != "prose":
            raise AbError(f"--data {name}: the {size} size reads the prose corpus as bytes (--data prose)")
        d = "dev/data/prose_bytes"
        return f"{d}/prose_bytes_train_*.bin", f"{d}/prose_bytes_val_*.bin", "make prose_bytes"
    if name == "shakespeare":
        d = "dev/data/tinyshakespeare"
        return f"{d}/tiny_shakespeare_train.bin", f"{d}/tiny_shakespeare_val.bin", "make data"
    if name == "prose":
        return "dev/data/prose/prose_train_*.bin", "dev/data/prose/prose_val_*.bin", "make prose"
    if name in ("fineweb", "fineweb-edu"):
        version = LAUNCHER[size]["fineweb"] if size in LAUNCHER else "fineweb10B"
        edu = name == "fineweb-edu"
        d = f"dev/data/{'edu_' if edu else ''}{version}"
        prefix = "edu_fineweb" if edu else "fineweb"
        prep = f"python dev/data/fineweb.py -t {'edu' if edu else 'classic'} -v {version[len('fineweb'):]}"
        return f"{d}/{prefix}_train_*.bin", f"{d}/{prefix}_val_*.bin", prep
    d = name.rstrip("/")
    vals = sorted(glob.glob(os.path.join(d, "*_val*.bin")))
    if not os.path.isdir(d) or not vals:
        raise AbError(f"--data {name}: expected shakespeare, prose, fineweb, fineweb-edu or a "
                      f"directory holding <prefix>_train*.bin and <prefix>_val*.bin shards")
    prefix = os.path.basename(vals[0]).split("_val")[0]
    return f"{d}/{prefix}_train*.bin", f"{d}/{prefix}_val*.bin", f"(the shards in {d})"


def shard_tokens(pattern):
    """The token count of the shards matching pattern (their headers, llmc_formats/shards.py)."""
    total = 0
    for f in sorted(glob.glob(pattern)):
        try:
            total += read_shard_header(f)
        except (OSError, ValueError) as e:
            raise AbError(str(e)) from None
    return total


def schedule_head_sizes(path, cfg):
    """The head sizes of a layer-table file (llmc_formats/layer_table.py, read as -layers reads
    it), for the SM 8.x check."""
    try:
        return {d for _, d, _ in parse_schedule(path, cfg.n_embd, cfg.n_layer, unchecked=True)}
    except (OSError, ValueError) as e:
        raise AbError(str(e)) from None


def parse_arms(text, size):
    prefix = DIRECT[size]["schedules"] if size in DIRECT else LAUNCHER[size]["schedules"]
    arms = []
    for item in [x for x in text.split(",") if x]:
        name, _, path = item.partition("=")
        if not ARM_NAME.fullmatch(name) or "_seed" in name:
            raise AbError(f"--arms: '{name}' is not an arm name (letters, digits, '.', '-', '_'; "
                          f"not containing '_seed')")
        if path:
            arms.append({"name": name, "table": path, "checked": False})
        elif name == "uniform":
            arms.append({"name": name, "table": None, "checked": True})
        elif name in ("prism", "prism_b", "prism_c", "prism_d"):
            arms.append({"name": name, "table": f"prism/schedules/{prefix}_{name}.txt", "checked": True})
        else:
            raise AbError(f"--arms: '{item}': expected uniform, prism, prism_b, prism_c, prism_d or "
                          f"NAME=FILE (a layer table)")
    names = [a["name"] for a in arms]
    if len(arms) < 2 or len(set(names)) != len(names):
        raise AbError(f"--arms {text}: expected at least two arms with distinct names")
    return arms


def parse_seeds(text):
    seeds = [x for x in re.split(r"[ ,]+", text.strip()) if x]
    if not seeds or not all(re.fullmatch(r"0|[1-9][0-9]*", s) for s in seeds) or len(set(seeds)) != len(seeds):
        raise AbError(f"--seeds '{text}': expected distinct non-negative integers, e.g. 1,2,3")
    return [int(s) for s in seeds]


def quoted(cmd):
    return " ".join(shlex.quote(str(c)) for c in cmd)


class Plan:
    """Every command of the A/B, built from the options; nothing runs here."""

    def __init__(self, a):
        self.a = a
        self.direct = a.size in DIRECT
        self.arms = parse_arms(a.arms, a.size)
        self.seeds = parse_seeds(a.seeds)
        self.train_glob, self.val_glob, self.prepare = data_globs(a.data, a.size)
        self.tokenizer = TOKENIZERS[DIRECT.get(a.size, {}).get("vocab", "gpt2")]
        self.bin = a.bin or ("./train_gpt2" if self.direct else "./train_gpt2cu")
        self.gpu = "cu" in os.path.basename(self.bin) or not self.direct
        self.eval_bin = a.eval_bin or ("./eval_gpt2cu" if self.gpu else "./eval_gpt2")
        if self.direct:
            p = dict(DIRECT[a.size])
            self.model, self.B, self.T = p["model"], a.micro_batch or p["B"], a.seq_len or p["T"]
            self.cfg = parse_descriptor(self.model)
            if self.T > self.cfg.block_size:
                raise AbError(f"--seq-len {self.T}: longer than the maxT {self.cfg.block_size} of {self.model}")
            steps = a.steps or p["steps"] // BUDGETS[a.budget]
            self.steps, self.warmup = max(1, steps), min(p["warmup"], max(1, steps // 5))
            self.val_every = min(a.val_every or p["val_every"], self.steps)
            self.val_batches = p["val_batches"] if a.val_batches is None else a.val_batches
            val_tokens = shard_tokens(self.val_glob)
            if val_tokens:
                windows = (val_tokens - 1) // (self.B * self.T * a.gpus)
                if windows < 1:
                    raise AbError(f"{self.val_glob}: {val_tokens} val tokens hold no batch of "
                                  f"B*T*GPUs = {self.B * self.T * a.gpus}")
                if self.val_batches != -1:  # -1: the trainer reads the whole split
                    self.val_batches = min(self.val_batches, windows)
            self.eval_n = p["eval_n"] if a.eval_n is None else a.eval_n
            self.attn_windows = a.attn_windows or p["attn_windows"]
        else:
            self.model = LAUNCHER[a.size]["model"]
            self.cfg = parse_descriptor(self.model)
            self.T = 1024
            self.eval_n = 0 if a.eval_n is None else a.eval_n
            self.attn_windows = a.attn_windows or 16
            self.steps = self.launcher_steps()
        self.attn_batch = a.attn_batch or 1
        if self.val_glob and self.a.attn:
            # attn_distance reads windows of attn_batch x T tokens (and one more, the last target)
            val_tokens = shard_tokens(self.val_glob)
            window = self.attn_batch * self.T
            if val_tokens and (val_tokens - 1) // window < self.attn_windows:
                if val_tokens - 1 < window:
                    raise AbError(f"{self.val_glob}: {val_tokens} val tokens hold no attn_distance window of "
                                  f"--attn-batch x T = {window} tokens (lower --attn-batch, or --attn 0)")
                self.attn_windows = (val_tokens - 1) // window
        self.ckpt = "model_%08d.bin" % self.steps

    def run_dir(self, arm, seed):
        return os.path.join(self.a.out, f"{arm['name']}_seed{seed}")

    def data_seed(self, seed):
        return seed if self.a.data_order == "seed" else 42

    def launcher_args(self, arm, seed):
        a = self.a
        args = ["scripts/run_gpt2.sh", "--size", a.size, "--seed", str(seed),
                "--data-seed", str(self.data_seed(seed)), "--gpus", str(a.gpus), "--bin", self.bin,
                "--out", self.run_dir(arm, seed)]
        if arm["table"] is None:
            args += ["--arm", "uniform"]
        else:
            args += ["--arm", "prism" if arm["checked"] else "table", "--schedule", arm["table"]]
        args += ["--steps", str(a.steps)] if a.steps else ["--budget", a.budget]
        if a.data != "fineweb":  # run_gpt2.sh's default is FineWeb of the size's recipe
            args += ["--data", os.path.dirname(self.val_glob)]
        if a.micro_batch:
            args += ["--micro-batch", str(a.micro_batch)]
        if a.gpu_arch:
            args += ["--gpu-arch", a.gpu_arch]
        args += ["--hellaswag", "1" if os.path.isfile("dev/data/" + TASK_FILES["hellaswag"]) else "0"]
        return args, []

    def launcher(self, arm, seed, *mode):
        """The run_gpt2.sh command line, with a mode flag (--dry-run, --print-done-file) if given."""
        opts, extra = self.launcher_args(arm, seed)
        return ["bash"] + opts + list(mode) + extra

    def launcher_steps(self):
        out = subprocess.run(self.launcher(self.arms[0], self.seeds[0], "--print-done-file"),
                             capture_output=True, text=True)
        m = re.search(r"DONE_(\d{8})$", out.stdout.strip())
        if out.returncode != 0 or not m:
            raise AbError(f"scripts/run_gpt2.sh: {(out.stderr.strip() or out.stdout.strip()).splitlines()[-1:]}")
        return int(m.group(1))

    def train_cmd(self, arm, seed, steps=None, flags=()):
        """(command, environment additions). steps: -x (and the checkpoint, -n) in place of the
        A/B's; flags: (flag, value) pairs of the trainer that replace the preset's, or are added
        (prism/search.py's rungs). A launcher size takes steps as --steps and the flags after its
        `--`, where the trainer takes the last of a repeated flag."""
        if not self.direct:
            cmd = self.launcher(arm, seed)
            if steps is not None:  # in place of --steps N or --budget B
                k = cmd.index("--steps") if "--steps" in cmd else cmd.index("--budget")
                cmd[k:k + 2] = ["--steps", str(steps)]
                flags = (("-n", steps),) + tuple(flags)
            return cmd + (["--"] + [str(x) for fv in flags for x in fv] if flags else []), {}
        a = self.a
        cmd = [self.bin, "-e", self.model, "-seed", str(seed), "-i", self.train_glob, "-j", self.val_glob,
               "-b", str(self.B), "-t", str(self.T), "-x", str(self.steps), "-l", "1e-3",
               "-u", str(self.warmup), "-q", "0.1", "-c", "0.1", "-v", str(self.val_every),
               "-m", str(self.val_batches), "-s", "0", "-n", str(self.steps), "-o", self.run_dir(arm, seed),
               "-y", "1"]  # a run stopped by Ctrl-C resumes from its checkpoint (doc/formats.md "Optimizer/DataLoader state")
        if self.tokenizer != "gpt2_tokenizer.bin":
            cmd += ["-tok", self.tokenizer]
        if self.a.data_order == "seed":
            cmd += ["-data_seed", str(seed)]
        cmd += ["-rows", str(a.rows)]
        if arm["table"] is not None:
            cmd += ["-prism" if arm["checked"] else "-layers", arm["table"]]
        if steps is not None:
            flags = (("-x", steps), ("-n", steps)) + tuple(flags)
        for flag, value in flags:
            if flag in cmd:
                cmd[cmd.index(flag) + 1] = str(value)
            else:
                cmd += [flag, str(value)]
        if a.gpus > 1:
            cmd = ["mpirun", "-np", str(a.gpus)] + cmd
        return cmd, {"OMP_NUM_THREADS": str(a.threads)}

    def eval_cmd(self, arm, seed):
        d = self.run_dir(arm, seed)
        return [self.eval_bin, "-e", os.path.join(d, self.ckpt), "-tasks", "all", "-n", str(self.eval_n),
                "-json", os.path.join(d, "evals.json")]

    def attn_cmd(self, arm, seed):
        ref = self.arms[0]
        base = os.path.join(self.a.out, f"attn_{arm['name']}_seed{seed}")
        return [self.a.attn_bin, "-e", os.path.join(self.run_dir(arm, seed), self.ckpt),
                "-e2", os.path.join(self.run_dir(ref, seed), self.ckpt), "-j", self.val_glob,
                "-b", str(self.attn_batch), "-t", "0", "-n", str(self.attn_windows),
                "-csv", base + ".csv", "-json", base + ".json"]

    def floors_cmd(self):
        """scripts/floors.py on the windows the trainer's val loss covers (B x GPUs per batch)."""
        cmd = [report_python(), "scripts/floors.py", "--train", self.train_glob, "--val", self.val_glob,
               "-b", str(self.B * self.a.gpus), "-t", str(self.T), "-m", str(self.val_batches),
               "--json", os.path.join(self.a.out, "floors.json")]
        return cmd + ["--tokenizer", self.tokenizer]

    def report_cmd(self):
        cmd = [report_python(), "scripts/ab_report.py", self.a.out, "--arms", ",".join(x["name"] for x in self.arms)]
        if self.a.target_loss is not None:
            cmd += ["--target-loss", str(self.a.target_loss)]
        return cmd

    def settings(self):
        """What must agree for the runs of one --out to be one A/B (seeds and arms may grow)."""
        s = {k: getattr(self, k) for k in ("model", "T", "steps")}
        s.update(size=self.a.size, data=self.a.data, data_order=self.a.data_order, bin=self.bin,
                 gpus=self.a.gpus, rows=self.a.rows)
        if self.direct:
            s.update(B=self.B, val_every=self.val_every, val_batches=self.val_batches)
        return s

    # ---- checks
    def missing(self):
        """[(one line naming a missing input, the make target that builds it or None)]."""
        out = []
        a = self.a
        if not (os.path.isfile(self.bin) and os.access(self.bin, os.X_OK)):
            t = make_target(self.bin)
            how = (f"make {t}" if t else "make train_gpt2cu USE_CUDNN=1 (doc/gpu.md)" if self.gpu
                   else "--bin names a built trainer")
            out.append((f"{self.bin}: not built ({how})", make_target(self.bin)))
        prep = self.prepare[len("make "):] if self.prepare.startswith("make ") else None
        if not glob.glob(self.train_glob):
            out.append((f"{self.train_glob}: no train shard matches (prepare it: {self.prepare})", prep))
        if not glob.glob(self.val_glob):
            out.append((f"{self.val_glob}: no val shard matches (prepare it: {self.prepare})", prep))
        if self.direct and not os.path.isfile(self.tokenizer):  # the floors' bits per byte, -tok
            out.append((f"{self.tokenizer}: not written (make {self.tokenizer})", self.tokenizer))
        for arm in self.arms:
            if arm["table"] is not None and not os.path.isfile(arm["table"]):
                out.append((f"{arm['table']}: layer table of arm {arm['name']} not found", None))
        if a.evals:
            if not (os.path.isfile(self.eval_bin) and os.access(self.eval_bin, os.X_OK)):
                out.append((f"{self.eval_bin}: not built (make {os.path.basename(self.eval_bin)}; or --evals 0)",
                            make_target(self.eval_bin)))
            for t, f in TASK_FILES.items():
                if not os.path.isfile(os.path.join("dev/data", f)):
                    out.append((f"dev/data/{f}: not found (make evals; or --evals 0)", "evals"))
        if a.attn and not (os.path.isfile(a.attn_bin) and os.access(a.attn_bin, os.X_OK)):
            out.append((f"{a.attn_bin}: not built (make attn_distance; or --attn 0)", make_target(a.attn_bin)))
        if a.gpus > 1 and shutil.which("mpirun") is None:
            out.append((f"mpirun: not found in PATH (--gpus {a.gpus} launches mpirun -np {a.gpus})", None))
        return out

    def sm8_warnings(self):
        """Head size 256 on an SM 8.x GPU under -attn auto runs on the own kernels."""
        if not self.gpu:
            return []
        arch = self.a.gpu_arch
        if not arch:
            try:
                arch = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                      capture_output=True, text=True, timeout=20).stdout.split("\n")[0].strip()
            except (OSError, subprocess.SubprocessError):
                arch = ""
        if not arch.startswith("8."):
            return []
        prefix = DIRECT[self.a.size]["schedules"] if self.direct else LAUNCHER[self.a.size]["schedules"]
        alt = f"prism/schedules/{prefix}_prism_d.txt"
        alt_text = (f"the 128-wide preset {alt} avoids it (--arms ...,prism_d)" if os.path.isfile(alt)
                    else "no 128-wide preset exists for this size")
        out = []
        for arm in self.arms:
            if arm["table"] and os.path.isfile(arm["table"]) and 256 in schedule_head_sizes(arm["table"], self.cfg):
                out.append(f"SM {arch} GPU: cuDNN does not train head size 256 there, so the 256-wide "
                           f"layers of arm {arm['name']} ({arm['table']}) run on the own kernels "
                           f"under -attn auto, several times slower (doc/gpu.md \"Attention paths\"), "
                           f"and its tokens/s would not measure the method; {alt_text}")
        return out


def report_python():
    """The interpreter of the report: $PYTHON, else this one when it has matplotlib (the plots),
    else Debian's /usr/bin/python3 (python3-matplotlib)."""
    if os.environ.get("PYTHON"):
        return os.environ["PYTHON"]
    try:
        import matplotlib  # noqa: F401
        return sys.executable
    except ImportError:
        return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def run_complete(plan, arm, seed):
    d = plan.run_dir(arm, seed)
    if not plan.direct:
        return os.path.exists(os.path.join(d, "DONE_%08d" % plan.steps))
    try:
        with open(os.path.join(d, "stdout.log"), errors="replace") as f:
            finished = any(line.startswith("total average iteration time") for line in f)
        _, steps = final_val_loss(os.path.join(d, "main.log"))
    except (OSError, SummaryError, LogError):
        return False
    return finished and steps == plan.steps and os.path.isfile(os.path.join(d, plan.ckpt))


def execute(cmd, log, env_add, what):
    """Run cmd with its output in log (appended for a resuming launcher, else new)."""
    env = dict(os.environ, **env_add)
    with open(log, "a") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        with open(log, errors="replace") as f:
            tail = [x.strip() for x in f if x.strip()][-1:] or ["(no output)"]
        raise AbError(f"{log}: {what} failed (exit {rc}): {tail[0]}")


def last_val(run_dir):
    try:
        return f"{final_val_loss(os.path.join(run_dir, 'main.log'))[0]:.4f}"
    except (OSError, SummaryError, LogError):
        return "?"


def dry_run(plan):
    a = plan.a
    print(f"# A/B {a.size}: arms {', '.join(x['name'] + ('=' + x['table'] if x['table'] else '') for x in plan.arms)}; "
          f"seeds {' '.join(map(str, plan.seeds))}; {plan.steps} steps; data {a.data} "
          f"(order: {'-data_seed S per seed' if a.data_order == 'seed' else 'llm.c fixed 42'}); out {a.out}")
    if not plan.direct:
        out = subprocess.run(plan.launcher(plan.arms[0], plan.seeds[0], "--dry-run"),
                             capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("# budget"):
                print(f"{line} per run; {len(plan.arms) * len(plan.seeds)} runs")
    for seed in plan.seeds:
        for arm in plan.arms:
            cmd, env = plan.train_cmd(arm, seed)
            pre = " ".join(f"{k}={v}" for k, v in env.items())
            log = os.path.join(plan.run_dir(arm, seed), "stdout.log" if plan.direct else "launcher.out")
            print(f"{pre + ' ' if pre else ''}{quoted(cmd)} > {log}")
    if a.evals:
        for seed in plan.seeds:
            for arm in plan.arms:
                print(f"{quoted(plan.eval_cmd(arm, seed))} > {os.path.join(plan.run_dir(arm, seed), 'evals.log')}")
    if a.attn:
        for seed in plan.seeds:
            for arm in plan.arms[1:]:
                print(f"OMP_NUM_THREADS={a.threads} {quoted(plan.attn_cmd(arm, seed))} > "
                      f"{os.path.join(a.out, 'attn_' + arm['name'] + '_seed' + str(seed) + '.txt')}")
    if plan.direct:
        print(quoted(plan.floors_cmd()))
    print(quoted(plan.report_cmd()))


def stamp(plan):
    """Write or check OUT/ab.json: the settings must match an earlier A/B in the same --out."""
    path = os.path.join(plan.a.out, "ab.json")
    settings = plan.settings()
    if os.path.isfile(path):
        with open(path) as f:
            old = json.load(f)
        if old.get("settings") != settings:
            diff = sorted(k for k in set(settings) | set(old.get("settings", {}))
                          if settings.get(k) != old.get("settings", {}).get(k))
            raise AbError(f"{path}: this directory holds an A/B with other settings ({', '.join(diff)} "
                          f"differ); use another --out or remove it")
        tables = {x["name"]: x["table"] for x in old.get("arms", [])}
        for arm in plan.arms:
            if arm["name"] in tables and tables[arm["name"]] != arm["table"]:
                raise AbError(f"{path}: arm {arm['name']} was run with the table {tables[arm['name']]}, "
                              f"not {arm['table']}; give the new table another name")
    write_atomic(path, json.dumps({"settings": settings, "arms": plan.arms, "seeds": plan.seeds},
                                  indent=1) + "\n")


@contextlib.contextmanager
def job_pool(jobs):
    """A pool of `jobs` threads for trainings. Leaving it waits for the running ones; an exception
    (Ctrl-C among them) cancels the queued ones first, so that nothing new starts."""
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class Devices:
    """The --jobs slots of concurrent trainings. With a GPU trainer and --jobs > 1, the training in
    slot k sees GPUs kG .. kG + G - 1 (G = --gpus) through CUDA_VISIBLE_DEVICES; on the CPU the
    slots only count. prism/search.py's rungs use it too."""

    def __init__(self, plan):
        self.gpus = plan.a.gpus if plan.gpu and plan.a.jobs > 1 else 0
        self.free = queue.Queue()
        for k in range(plan.a.jobs):
            self.free.put(k)

    @contextlib.contextmanager
    def env(self, env):
        """env with this slot's devices added, for the duration of one training."""
        slot = self.free.get()
        try:
            if self.gpus:
                env = dict(env, CUDA_VISIBLE_DEVICES=",".join(str(slot * self.gpus + g) for g in range(self.gpus)))
            yield env
        finally:
            self.free.put(slot)


def run(plan):
    a = plan.a
    os.makedirs(a.out, exist_ok=True)
    stamp(plan)
    jobs = [(s, arm) for s in plan.seeds for arm in plan.arms]
    start = time.time()
    todo = []
    for i, (seed, arm) in enumerate(jobs, 1):
        tag = f"[{i}/{len(jobs)}] {arm['name']}_seed{seed}"
        if run_complete(plan, arm, seed):
            print(f"{tag}: complete, skipped", flush=True)
        else:
            todo.append((tag, seed, arm))
    # --jobs J trainings at once, each in its own run folder; a failed training stops the A/B once
    # the others have ended
    devices = Devices(plan)

    def train(tag, seed, arm):
        d = plan.run_dir(arm, seed)
        os.makedirs(d, exist_ok=True)
        t0 = time.time()
        print(f"{tag}: training, {plan.steps} steps", flush=True)
        cmd, env = plan.train_cmd(arm, seed)
        with devices.env(env) as env:
            execute(cmd, os.path.join(d, "stdout.log" if plan.direct else "launcher.out"), env, "the training run")
        print(f"{tag}: val loss {last_val(d)} at step {plan.steps}, {time.time() - t0:.0f} s", flush=True)

    with job_pool(a.jobs) as pool:
        futures = [pool.submit(train, *job) for job in todo]
        wait(futures)
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    if a.evals:
        for seed, arm in jobs:
            d = plan.run_dir(arm, seed)
            if os.path.isfile(os.path.join(d, "evals.json")):
                continue
            t0 = time.time()
            execute(plan.eval_cmd(arm, seed), os.path.join(d, "evals.log"), {"OMP_NUM_THREADS": str(a.threads)},
                    "eval_gpt2")
            print(f"{arm['name']}_seed{seed}: zero-shot evals, {time.time() - t0:.0f} s", flush=True)
    if a.attn:
        for seed in plan.seeds:
            for arm in plan.arms[1:]:
                base = os.path.join(a.out, f"attn_{arm['name']}_seed{seed}")
                if os.path.isfile(base + ".json"):
                    continue
                execute(plan.attn_cmd(arm, seed), base + ".txt", {"OMP_NUM_THREADS": str(a.threads)},
                        "attn_distance")
                print(f"attention distance {arm['name']} vs {plan.arms[0]['name']}, seed {seed}: {base}.json", flush=True)
    print(f"all runs: {time.time() - start:.0f} s", flush=True)
    if plan.direct:  # the unigram and bigram floors of the val windows the trainer scored
        cmd = plan.floors_cmd()
        if subprocess.run(cmd).returncode != 0:
            raise AbError(f"{quoted(cmd)} failed (its error is above)")
    rc = subprocess.run(plan.report_cmd()).returncode
    if rc != 0:
        raise AbError("scripts/ab_report.py failed (its error is above)")


def parse_options(argv):
    """The validated options of an A/B (AbError for a bad one); prism/search.py builds its runs'
    commands from them too."""
    p = Parser(prog="scripts/ab.py", allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Sizes, arms, pairing and outputs: see the head of scripts/ab.py.")
    p.add_argument("--size", required=True, choices=list(DIRECT) + list(LAUNCHER))
    p.add_argument("--arms", default="uniform,prism", help="comma list, the reference first (default uniform,prism)")
    p.add_argument("--seeds", default="1,2,3", help="init seeds (default 1,2,3)")
    p.add_argument("--data-order", choices=("seed", "fixed"), default="seed",
                   help="seed: -data_seed S for seed S (default); fixed: llm.c's order 42 in every run")
    p.add_argument("--rows", type=int, choices=(0, 1), default=1,
                   help="1: independent rows per batch (default; tiny, small and bytes); 0: llm.c's batches")
    p.add_argument("--data", default=None,
                   help="shakespeare, prose, fineweb, fineweb-edu or a shard directory (default: prose for "
                        "tiny/small, fineweb for 124M-757M)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default: the preset's)")
    p.add_argument("--budget", choices=list(BUDGETS), default="full", help="a fraction of the preset's steps")
    p.add_argument("--micro-batch", type=int, default=None, help="B per process (default: the preset's)")
    p.add_argument("--seq-len", type=int, default=None, help="T, the direct sizes only (default: the preset's)")
    p.add_argument("--val-every", type=int, default=None, help="-v, the direct sizes only (default: the preset's)")
    p.add_argument("--val-batches", type=int, default=None,
                   help="-m, the direct sizes only (-1: the whole val split; default: the preset's)")
    p.add_argument("--gpus", type=int, default=1, help="processes per run (mpirun -np N when N > 1)")
    p.add_argument("--gpu-arch", default=None, help="compute capability for the SM 8.x check (default: nvidia-smi's)")
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of the CPU programs (default 2)")
    p.add_argument("--jobs", type=int, default=1,
                   help="trainings at once (default 1); with a GPU trainer, one per GPU 0..J-1")
    p.add_argument("--evals", type=int, choices=(0, 1), default=None,
                   help="the five zero-shot tasks on each final checkpoint (default 1; 0 for the bytes size, "
                        "whose vocabulary the GPT-2-tokenized task files do not fit)")
    p.add_argument("--eval-n", type=int, default=None, help="examples per task (0: all; default: the preset's)")
    p.add_argument("--attn", type=int, choices=(0, 1), default=1, help="attention distance per seed, each arm vs the reference")
    p.add_argument("--attn-windows", type=int, default=None,
                   help="val windows for attn_distance (default 16, or as many as the val split holds)")
    p.add_argument("--attn-batch", type=int, default=None,
                   help="sequences of T tokens per attn_distance window (its -b; default 1)")
    p.add_argument("--target-loss", type=float, default=None, help="steps-to-target level (default: the largest final val loss)")
    p.add_argument("--bin", default=None, help="the trainer (default ./train_gpt2; ./train_gpt2cu for 124M-757M)")
    p.add_argument("--eval-bin", default=None, help="the evaluator (default ./eval_gpt2, or ./eval_gpt2cu with a CUDA trainer)")
    p.add_argument("--attn-bin", default="./attn_distance")
    p.add_argument("--out", default=None, help="output directory (default out/ab_<size>)")
    p.add_argument("--build", type=int, choices=(0, 1), default=1,
                   help="1: build the missing CPU programs, shards and eval files with make first (default)")
    p.add_argument("--dry-run", action="store_true", help="print every command, run nothing")
    a = p.parse_args(argv)
    os.chdir(ROOT)
    for name in ("steps", "micro_batch", "eval_n", "attn_windows", "attn_batch", "seq_len", "val_every"):
        v = getattr(a, name)
        if v is not None and (v < 0 or v == 0 and name != "eval_n"):
            raise AbError(f"--{name.replace('_', '-')} {v}: expected a positive integer"
                          + (" (or 0: all)" if name == "eval_n" else ""))
    if a.val_batches is not None and a.val_batches != -1 and a.val_batches < 1:
        raise AbError(f"--val-batches {a.val_batches}: expected a positive integer or -1 (the whole val split)")
    for name in ("seq_len", "val_every", "val_batches"):
        if getattr(a, name) is not None and a.size not in DIRECT:
            raise AbError(f"--{name.replace('_', '-')}: tiny, small and bytes only; {a.size} runs llm.c's "
                          "recipe (scripts/run_gpt2.sh)")
    if a.gpus < 1 or a.threads < 1 or a.jobs < 1:
        raise AbError("--gpus, --threads and --jobs: expected positive integers")
    if a.steps and a.budget != "full":
        raise AbError(f"--steps and --budget {a.budget}: give one of them")
    if a.gpu_arch and not re.fullmatch(r"\d+\.\d", a.gpu_arch):
        raise AbError(f"--gpu-arch '{a.gpu_arch}': expected a compute capability such as 8.0 or 9.0")
    a.data = a.data or ("prose" if a.size in DIRECT else "fineweb")
    bytes_size = DIRECT.get(a.size, {}).get("vocab") == "bytes"
    if a.evals == 1 and bytes_size:
        raise AbError(f"--evals 1: the zero-shot task files are GPT-2-tokenized; the {a.size} size's "
                      f"byte vocabulary cannot score them (--evals 0)")
    a.evals = (0 if bytes_size else 1) if a.evals is None else a.evals
    a.out = (a.out or f"out/ab_{a.size}").rstrip("/")
    return a


def main(argv=None):
    try:
        a = parse_options(argv)
        plan = Plan(a)
        if a.size in DIRECT and a.gpus > 1 and not plan.gpu:
            raise AbError(f"--gpus {a.gpus}: the CPU trainer {plan.bin} runs one process (use --bin ./train_gpt2cu)")
        for w in plan.sm8_warnings():
            print(f"warning: {w}", file=sys.stderr)
        # what make builds is built first (in a dry run: its command is printed)
        missing = build_missing(plan.missing, a.threads, a.dry_run, AbError) if a.build else plan.missing()
        if a.dry_run:
            dry_run(plan)
            for m, _ in missing:
                print(f"warning: missing input (a real run stops here): {m}", file=sys.stderr)
            return 0
        if missing:
            for m, _ in missing:
                print(f"error: {m}", file=sys.stderr)
            return 1
        run(plan)
    except AbError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: started again, the A/B skips what is finished", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
