"""dev/data/hellaswag.py: write llm.c's HellaSwag eval file dev/data/hellaswag/hellaswag_val.bin.

Usage: python dev/data/hellaswag.py [--input PATH] [--out PATH] [--fast]

The output is llm.c's version-1 eval format (doc/formats.md "Eval files and scoring"), so llm.c's trainer reads it too:
10,042 validation examples, each one context and 4 completions. As llm.c's hellaswag.py renders
it, an example is scored as its context followed by " " + ending.

Two input forms are read (the form is detected from the first character):
- the raw HellaSwag jsonl (rowanz/hellaswag hellaswag_val.jsonl, what llm.c downloads): one JSON
  object a line with "ctx", "endings" (4 strings) and "label";
- the cleaned 6-line text form (the offline copy ../shared/data/eval/hellaswag_val_full.txt.bz2,
  plain or .bz2): per item "activity_label: context", the gold index 0-3, then the 4 endings.
  Bracketed headers are removed there and the activity label is prepended, so absolute accuracies
  differ slightly from llm.c's published numbers (doc/evals.md; doc/baselines.md "HellaSwag").
Default input: the offline cleaned copy; without it, the raw jsonl is downloaded into the cache.
"""
import bz2
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import cache_dir, download, parse_error, read_jsonl  # noqa: E402
from dev.data.eval_common import encode_example, shared_eval_input, writer_main  # noqa: E402

TEXT_COPY = "hellaswag_val_full.txt.bz2"
RAW_URL = "https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
LINES_PER_ITEM = 6


def default_input():
    path = shared_eval_input(TEXT_COPY)
    if path:
        return path
    dest = os.path.join(cache_dir("hellaswag"), "hellaswag_val.jsonl")
    if not os.path.isfile(dest):
        download(RAW_URL, dest)
    return dest


def read_text(path):
    opener = bz2.open if path.endswith(".bz2") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e})") from e


def items_from_jsonl(path, text):
    """(context, endings, label) from llm.c's raw form: ctx as is."""
    items = []
    for lineno, obj in read_jsonl(path, text.split("\n")):
        for key in ("ctx", "endings", "label"):
            if key not in obj:
                raise parse_error(path, lineno, f"missing field '{key}'")
        if not isinstance(obj["endings"], list) or len(obj["endings"]) != 4:
            raise parse_error(path, lineno, "'endings' must be a list of 4 strings")
        items.append((obj["ctx"], obj["endings"], int(obj["label"])))
    return items


def items_from_text(path, text):
    """(context, endings, label) from the 6-line form; the first line is the whole context."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) % LINES_PER_ITEM:
        raise ValueError(f"{path}: {len(lines)} lines, not a multiple of {LINES_PER_ITEM} "
                         f"(context, label, 4 endings per item)")
    items = []
    for i in range(0, len(lines), LINES_PER_ITEM):
        label = lines[i + 1].strip()
        if label not in ("0", "1", "2", "3"):
            raise parse_error(path, i + 2, f"label '{label}': expected 0, 1, 2 or 3")
        items.append((lines[i], lines[i + 2:i + LINES_PER_ITEM], int(label)))
    return items


def rendered(path):
    """Each item as it is scored, in text: ([context], [" " + ending for the 4 endings], label)."""
    text = read_text(path)
    form = items_from_jsonl if text.lstrip().startswith("{") else items_from_text
    return [([ctx], [" " + e for e in endings], label) for ctx, endings, label in form(path, text)]


def load_examples(path, enc, args=None):
    return [encode_example(enc, *item) for item in rendered(path)]


def main(argv=None):
    return writer_main(argv, "hellaswag", "val", "Write llm.c's HellaSwag eval file (version 1).",
                       default_input, load_examples, version=1, scoring="choice")


if __name__ == "__main__":
    sys.exit(main())
