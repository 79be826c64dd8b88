"""dev/eval/lm_eval_local.py: EleutherAI's lm-evaluation-harness on our tasks, offline.

    /usr/bin/python3 dev/eval/lm_eval_local.py HF_DIR [--tasks hellaswag,winogrande,arc_easy]
        [--limit N] [--batch_size 8] [--device cpu] [--output_path build/lm_eval/out] [-- LM_EVAL_ARGS]

HF_DIR is a Hugging Face model folder (config.json, the weights and the GPT-2 tokenizer files).
The script writes the task data from the offline copies (dev/eval/lm_eval_data.py, into
build/lm_eval/data), then runs, from the repository root and with the hub switched off,

    python -m lm_eval run --model hf
        --model_args pretrained=HF_DIR,trust_remote_code=True,dtype=float32
        --include_path dev/eval/lm_eval_tasks --tasks llmc_hellaswag,...
        --device cpu --batch_size 8 --log_samples --output_path build/lm_eval/out [--limit N]

and prints that command first, so it can be rerun by hand. Arguments after `--` go to lm_eval as
they are. The harness writes results_*.json and, per task, samples_<task>_*.jsonl (every option's
log-likelihood) under the output path; doc/evals.md "EleutherAI's lm-evaluation-harness" says how
its numbers relate to eval_gpt2's. Needs lm-eval for /usr/bin/python3: make deps
(mk/requirements-eval.txt).
"""
import argparse
import importlib.util
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import repo_root  # noqa: E402
from dev.eval import lm_eval_data  # noqa: E402

TASKS_DIR = os.path.join("dev", "eval", "lm_eval_tasks")
SETUP = ("make deps (or: /usr/bin/python3 -m pip install --break-system-packages "
         "-r mk/requirements-eval.txt)")


def missing_harness():
    """None when lm_eval imports here, else the one-line reason."""
    if importlib.util.find_spec("lm_eval") is None:
        return f"lm_eval (lm-evaluation-harness) is not installed for {sys.executable}; run {SETUP}"
    return None


def lm_eval_command(hf_dir, tasks, limit, batch_size, device, output_path, extra=()):
    """The harness's command line for our task configs (run it from the repository root)."""
    cmd = [sys.executable, "-m", "lm_eval", "run", "--model", "hf",
           "--model_args", f"pretrained={hf_dir},trust_remote_code=True,dtype=float32",
           "--include_path", TASKS_DIR, "--tasks", ",".join(f"llmc_{t}" for t in tasks),
           "--device", device, "--batch_size", str(batch_size),
           "--log_samples", "--output_path", output_path]
    if limit:
        cmd += ["--limit", str(limit)]
    return cmd + list(extra)


def offline_env():
    """The environment with the Hugging Face hub and datasets switched off (every file is local)."""
    env = dict(os.environ)
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.setdefault(key, "1")
    return env


def parse_args(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description="lm-evaluation-harness on our tasks (dev/eval/lm_eval_tasks), offline.")
    ap.add_argument("hf_dir", help="a Hugging Face model folder (config.json, weights, tokenizer files)")
    ap.add_argument("--tasks", default=",".join(lm_eval_data.WRITERS),
                    help=f"comma list of {', '.join(lm_eval_data.WRITERS)}")
    ap.add_argument("--limit", type=int, default=0, help="only the first N items of each task (0 = all)")
    ap.add_argument("--batch_size", type=int, default=8, help="requests per forward (8)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cpu)")
    ap.add_argument("--output_path", default=os.path.join(repo_root(), "build", "lm_eval", "out"),
                    help="where lm_eval writes results and samples (the repository's build/lm_eval/out)")
    args = ap.parse_args(argv)
    return args, extra


def main(argv=None):
    args, extra = parse_args(argv)
    try:
        tasks = lm_eval_data.parse_tasks(args.tasks)
        if args.limit < 0:
            raise ValueError(f"--limit {args.limit}: expected 0 (all) or a positive count")
        if args.batch_size < 1:
            raise ValueError(f"--batch_size {args.batch_size}: expected a positive count")
        hf_dir = os.path.abspath(args.hf_dir)
        if not os.path.isfile(os.path.join(hf_dir, "config.json")):
            raise ValueError(f"{args.hf_dir}: not a Hugging Face model folder (no config.json)")
        why = missing_harness()
        if why:
            raise ValueError(why)
        data_dir = os.path.join(repo_root(), "build", "lm_eval", "data")
        for task in tasks:
            lm_eval_data.convert(task, data_dir)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    output_path = os.path.abspath(args.output_path)
    cmd = lm_eval_command(hf_dir, tasks, args.limit, args.batch_size, args.device, output_path, extra)
    print("running (from " + repo_root() + "): " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=repo_root(), env=offline_env()).returncode


if __name__ == "__main__":
    sys.exit(main())
