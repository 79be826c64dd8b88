"""dev/data/arc_easy.py: write the ARC-Easy eval file dev/data/arc_easy/arc_easy_test.bin (version 2).

Usage: python dev/data/arc_easy.py [--input PATH] [--out PATH] [--fast]

ARC-Easy test, 2,376 items, from llm-foundry's jsonl: "query" (already "Question: ..."),
"choices" (2-5 strings) and "gold". Rendered as the Eleuther harness does: context = query +
"\\nAnswer:", completions = " " + choice; scored completion style (acc and acc_norm).
Input: the offline copy ../shared/data/eval/arc_easy_test.jsonl.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_common import encode_example, parse_error, shared_eval_input, writer_main  # noqa: E402

DATA = "arc_easy_test.jsonl"
MIN_CHOICES, MAX_CHOICES = 2, 5


def default_input():
    path = shared_eval_input(DATA)
    if path is None:
        raise FileNotFoundError(f"{DATA}: no offline copy in ../shared/data/eval; pass --input "
                                f"(llm-foundry scripts/eval/local_data/world_knowledge/arc_easy.jsonl)")
    return path


def load_examples(path, enc, args=None):
    examples = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise parse_error(path, lineno, f"not JSON ({e.msg})") from e
            choices, gold = obj.get("choices"), obj.get("gold")
            if not isinstance(obj.get("query"), str):
                raise parse_error(path, lineno, "missing string field 'query'")
            if not isinstance(choices, list) or not MIN_CHOICES <= len(choices) <= MAX_CHOICES:
                raise parse_error(path, lineno, f"'choices' must list {MIN_CHOICES}-{MAX_CHOICES} strings")
            if not isinstance(gold, int) or not 0 <= gold < len(choices):
                raise parse_error(path, lineno, f"'gold' must be an index into the {len(choices)} choices")
            examples.append(encode_example(enc, [obj["query"] + "\nAnswer:"],
                                           [" " + c for c in choices], gold))
    return examples


def main(argv=None):
    return writer_main(argv, "arc_easy", "test", "Write the ARC-Easy eval file (version 2).",
                       default_input, load_examples)


if __name__ == "__main__":
    sys.exit(main())
