"""dev/data/piqa.py: write the PIQA eval file dev/data/piqa/piqa_val.bin (version 2, doc/evals.md).

Usage: python dev/data/piqa.py [--input valid.jsonl] [--labels valid-labels.lst] [--out PATH] [--fast]

PIQA dev, 1,838 items: a goal and two solutions, the gold index in a separate file, one label a
line. Scored completion style like HellaSwag: context = goal, completions = " " + sol1, " " + sol2
(acc and acc_norm). Input: the offline copy ../shared/data/eval/piqa_valid.jsonl and
piqa_valid-labels.lst (the labels file is taken from next to --input unless --labels is given).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_common import encode_example, parse_error, shared_eval_input, writer_main  # noqa: E402

DATA, LABELS = "piqa_valid.jsonl", "piqa_valid-labels.lst"


def default_input():
    path = shared_eval_input(DATA)
    if path is None:
        raise FileNotFoundError(f"{DATA}: no offline copy in ../shared/data/eval; pass --input "
                                f"(PIQA dev from github ybisk/ybisk.github.io piqa/data)")
    return path


def labels_path_for(path):
    """valid.jsonl -> valid-labels.lst next to it (the layout of the PIQA release)."""
    base = path[:-len(".jsonl")] if path.endswith(".jsonl") else path
    return base + "-labels.lst"


def load_examples(path, enc, labels_path=None):
    labels_path = labels_path or labels_path_for(path)
    if not os.path.isfile(labels_path):
        raise FileNotFoundError(f"{labels_path}: PIQA labels file not found (one 0/1 a line)")
    with open(labels_path, encoding="utf-8") as f:
        labels = [ln.strip() for ln in f if ln.strip()]
    with open(path, encoding="utf-8") as f:
        lines = [ln for ln in f if ln.strip()]
    if len(labels) != len(lines):
        raise ValueError(f"{labels_path}: {len(labels)} labels for {len(lines)} items in {path}")
    examples = []
    for lineno, (line, label) in enumerate(zip(lines, labels), 1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise parse_error(path, lineno, f"not JSON ({e.msg})") from e
        if label not in ("0", "1"):
            raise parse_error(labels_path, lineno, f"label '{label}': expected 0 or 1")
        for key in ("goal", "sol1", "sol2"):
            if not isinstance(obj.get(key), str):
                raise parse_error(path, lineno, f"missing string field '{key}'")
        examples.append(encode_example(enc, [obj["goal"]], [" " + obj["sol1"], " " + obj["sol2"]],
                                       int(label)))
    return examples


def main(argv=None):
    return writer_main(argv, "piqa", "val", "Write the PIQA eval file (version 2).", default_input,
                       lambda path, enc, args: load_examples(path, enc, args.labels),
                       extra_args=[("--labels", {"help": "the labels file (default: <input>-labels.lst)"})])


if __name__ == "__main__":
    sys.exit(main())
