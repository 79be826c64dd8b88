"""dev/data/winogrande.py: write the WinoGrande eval file dev/data/winogrande/winogrande_val.bin.

Usage: python dev/data/winogrande.py [--input PATH] [--out PATH] [--fast]

WinoGrande dev (xl), 1,267 items, from llm-foundry's jsonl: "context_options" (the sentence up to
the blank, once with each option filled in), "continuation" (the rest of the sentence) and
"gold". Partial scoring (Sakaguchi et al.; the Eleuther harness): each option's row is its own
context followed by the shared continuation " " + continuation, and only the continuation tokens
are scored, so the options compete on how well they predict the same words. The continuation is
the same for every option, so acc_norm would equal acc; only acc is reported. Version 2 file
(per-option contexts). Input: the offline copy ../shared/data/eval/winogrande_dev.jsonl.
"""
import sys

import os
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import parse_error, read_jsonl  # noqa: E402
from dev.data.eval_common import encode_example, offline_input, writer_main  # noqa: E402

DATA = "winogrande_dev.jsonl"


def default_input():
    return offline_input(DATA, "llm-foundry .../language_understanding/winogrande.jsonl")


def render(path, lineno, obj):
    """One item as it is scored, in text: (the 2 contexts, [" " + continuation], gold)."""
    opts, gold = obj.get("context_options"), obj.get("gold")
    if not isinstance(opts, list) or len(opts) != 2:
        raise parse_error(path, lineno, "'context_options' must list 2 strings")
    if not isinstance(obj.get("continuation"), str):
        raise parse_error(path, lineno, "missing string field 'continuation'")
    if gold not in (0, 1):
        raise parse_error(path, lineno, "'gold' must be 0 or 1")
    return opts, [" " + obj["continuation"]], gold


def rendered(path):
    return [render(path, lineno, obj) for lineno, obj in read_jsonl(path)]


def load_examples(path, enc, args=None):
    return [encode_example(enc, *item) for item in rendered(path)]


def main(argv=None):
    return writer_main(argv, "winogrande", "val", "Write the WinoGrande eval file (version 2).",
                       default_input, load_examples)


if __name__ == "__main__":
    sys.exit(main())
