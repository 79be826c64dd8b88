"""dev/data/lambada.py: write the LAMBADA eval file dev/data/lambada/lambada_test.bin (version 2).

Usage: python dev/data/lambada.py [--input PATH] [--out PATH] [--fast]

LAMBADA (OpenAI's test set), 5,153 passages, from llm-foundry's jsonl: "context" (the passage
without its last word) and "continuation" (the last word). Each example is one row: context, then
" " + continuation. Scored greedily (Paperno et al.; GPT-2 paper): correct when every
continuation token is the model's argmax prediction; eval_gpt2 also reports the perplexity of the
continuation. Input: the offline copy ../shared/data/eval/lambada_openai.jsonl.
"""
import sys

import os
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import parse_error, read_jsonl  # noqa: E402
from dev.data.eval_common import encode_example, offline_input, writer_main  # noqa: E402

DATA = "lambada_openai.jsonl"


def default_input():
    return offline_input(DATA, "llm-foundry .../language_understanding/lambada_openai.jsonl")


def example(enc, path, lineno, obj):
    for key in ("context", "continuation"):
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            raise parse_error(path, lineno, f"missing non-empty string field '{key}'")
    return encode_example(enc, [obj["context"]], [" " + obj["continuation"]], 0)


def load_examples(path, enc, args=None):
    return [example(enc, path, lineno, obj) for lineno, obj in read_jsonl(path)]


def main(argv=None):
    return writer_main(argv, "lambada", "test", "Write the LAMBADA eval file (version 2, greedy).",
                       default_input, load_examples, scoring="greedy")


if __name__ == "__main__":
    sys.exit(main())
