"""dev/eval/lm_eval_data.py: our eval items as JSON lines for EleutherAI's lm-evaluation-harness.

Usage: /usr/bin/python3 dev/eval/lm_eval_data.py [--out DIR] [--tasks hellaswag,winogrande,arc_easy]

Writes DIR/<task>.jsonl (default DIR: build/lm_eval/data), which the task configs in
dev/eval/lm_eval_tasks/ read with `dataset_path: json`
(doc/evals.md "EleutherAI's lm-evaluation-harness").
The items come from the same offline copies and the same rendering functions as our eval files
(dev/data/<task>.py, `rendered`), so both scorers see the same text; only the space that starts
every completion is taken off, because the harness puts it back as its target delimiter " ".

One line per item, in file order:
- hellaswag, arc_easy: {"query": context, "choices": [completion, ...], "label": gold}
- winogrande (partial scoring): {"contexts": [context per option], "continuation": the shared
  completion, "label": gold}
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data import arc_easy, hellaswag, winogrande  # noqa: E402
from dev.data.data_common import repo_root  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402

WRITERS = {"hellaswag": hellaswag, "winogrande": winogrande, "arc_easy": arc_easy}
DELIMITER = " "  # the harness's default target_delimiter


def default_out():
    return os.path.join(repo_root(), "build", "lm_eval", "data")


def strip_delimiter(path, index, completion):
    if not completion.startswith(DELIMITER):
        raise ValueError(f"{path}: item {index}: completion {completion[:40]!r} does not start "
                         f"with the delimiter {DELIMITER!r}")
    return completion[len(DELIMITER):]


def record(path, index, contexts, completions, label):
    """The harness's view of one rendered item (see the module docstring)."""
    if len(contexts) == 1:
        return {"query": contexts[0],
                "choices": [strip_delimiter(path, index, c) for c in completions], "label": label}
    if len(completions) == 1:
        return {"contexts": list(contexts),
                "continuation": strip_delimiter(path, index, completions[0]), "label": label}
    raise ValueError(f"{path}: item {index}: {len(contexts)} contexts and {len(completions)} "
                     f"completions; expected one of them shared")


def convert(task, out_dir, input_path=None):
    """Write out_dir/<task>.jsonl from the task's offline copy (or input_path); returns (path, n)."""
    writer = WRITERS[task]
    src = input_path or writer.default_input()
    lines = [json.dumps(record(src, i, *item), ensure_ascii=False) + "\n"
             for i, item in enumerate(writer.rendered(src))]
    if not lines:
        raise ValueError(f"{src}: no items found")
    dest = os.path.join(out_dir, f"{task}.jsonl")
    write_atomic(dest, "".join(lines))
    return dest, len(lines)


def parse_tasks(text):
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in tasks if t not in WRITERS]
    if not tasks or bad:
        raise ValueError(f"--tasks {text}: expected a comma list of {', '.join(WRITERS)}")
    return tasks


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write our eval items as JSON lines for lm-eval "
                                 "(dev/eval/lm_eval_tasks/).")
    ap.add_argument("--out", default=default_out(), help="output folder (default: build/lm_eval/data)")
    ap.add_argument("--tasks", default=",".join(WRITERS), help=f"comma list of {', '.join(WRITERS)}")
    args = ap.parse_args(argv)
    try:
        for task in parse_tasks(args.tasks):
            dest, n = convert(task, args.out)
            print(f"wrote {dest}: {n:,} items")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
