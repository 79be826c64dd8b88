"""dev/data/arc_easy.py: write the ARC-Easy eval file dev/data/arc_easy/arc_easy_test.bin (version 2).

Usage: python dev/data/arc_easy.py [--input PATH] [--out PATH] [--fast]

ARC-Easy test, 2,376 items, from llm-foundry's jsonl: "query" (already "Question: ..."),
"choices" (2-5 strings) and "gold". Rendered as the Eleuther harness does: context = query +
"\\nAnswer:", completions = " " + choice; scored completion style (acc and acc_norm).
Input: the offline copy ../shared/data/eval/arc_easy_test.jsonl.
"""
import sys

import os
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import parse_error, read_jsonl  # noqa: E402
from dev.data.eval_common import encode_example, offline_input, writer_main  # noqa: E402

DATA = "arc_easy_test.jsonl"
MIN_CHOICES, MAX_CHOICES = 2, 5


def default_input():
    return offline_input(DATA, "llm-foundry scripts/eval/local_data/world_knowledge/arc_easy.jsonl")


def render(path, lineno, obj):
    """One item as it is scored, in text: ([context], [" " + choice, ...], gold)."""
    choices, gold = obj.get("choices"), obj.get("gold")
    if not isinstance(obj.get("query"), str):
        raise parse_error(path, lineno, "missing string field 'query'")
    if not isinstance(choices, list) or not MIN_CHOICES <= len(choices) <= MAX_CHOICES:
        raise parse_error(path, lineno, f"'choices' must list {MIN_CHOICES}-{MAX_CHOICES} strings")
    if not isinstance(gold, int) or not 0 <= gold < len(choices):
        raise parse_error(path, lineno, f"'gold' must be an index into the {len(choices)} choices")
    return [obj["query"] + "\nAnswer:"], [" " + c for c in choices], gold


def rendered(path):
    return [render(path, lineno, obj) for lineno, obj in read_jsonl(path)]


def load_examples(path, enc, args=None):
    return [encode_example(enc, *item) for item in rendered(path)]


def main(argv=None):
    return writer_main(argv, "arc_easy", "test", "Write the ARC-Easy eval file (version 2).",
                       default_input, load_examples)


if __name__ == "__main__":
    sys.exit(main())
