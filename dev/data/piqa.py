"""dev/data/piqa.py: write the PIQA eval file dev/data/piqa/piqa_val.bin (version 2, doc/evals.md).

Usage: python dev/data/piqa.py [--input valid.jsonl] [--labels valid-labels.lst] [--out PATH] [--fast]

PIQA dev, 1,838 items: a goal and two solutions, the gold index in a separate file, one label a
line. Scored completion style like HellaSwag: context = goal, completions = " " + sol1, " " + sol2
(acc and acc_norm). Input: the offline copy ../shared/data/eval/piqa_valid.jsonl and
piqa_valid-labels.lst (the labels file is taken from next to --input unless --labels is given).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import parse_error, read_jsonl  # noqa: E402
from dev.data.eval_common import encode_example, offline_input, writer_main  # noqa: E402

DATA = "piqa_valid.jsonl"


def default_input():
    return offline_input(DATA, "PIQA dev from github ybisk/ybisk.github.io piqa/data")


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
    items = list(read_jsonl(path))
    if len(labels) != len(items):
        raise ValueError(f"{labels_path}: {len(labels)} labels for {len(items)} items in {path}")
    examples = []
    for label_no, ((lineno, obj), label) in enumerate(zip(items, labels), 1):
        if label not in ("0", "1"):
            raise parse_error(labels_path, label_no, f"label '{label}': expected 0 or 1")
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
