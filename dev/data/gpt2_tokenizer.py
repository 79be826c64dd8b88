"""dev/data/gpt2_tokenizer.py: write llm.c's GPT-2 tokenizer file (gpt2_tokenizer.bin).

Usage: python dev/data/gpt2_tokenizer.py [--out PATH] [--bpe_dir DIR] [--force]

Format (version 2): header uint32[256] = [20240328, 2, 50257, 50256 (EOT), 0, ...], then for each
id 0..50256 one uint8 length (1..255) followed by that token's raw bytes (GPT-2's byte <-> unicode
mapping undone). The trainers use it only to print samples. Built offline from encoder.json via
dev/data/gpt2_bpe.py; default output <repo>/gpt2_tokenizer.bin, since llm.c reads it from the
working directory.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy as np  # noqa: E402

from dev.data.data_common import repo_root, write_file_if_changed  # noqa: E402
from dev.data.gpt2_bpe import get_encoder  # noqa: E402
from llmc_formats import tokenizer  # noqa: E402


def tokenizer_bytes(enc):
    """The whole file's contents for encoder enc (llmc_formats/tokenizer.py writes the format)."""
    return tokenizer.encode([enc.token_bytes(i) for i in range(enc.n_vocab)], enc.eot)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write llm.c's gpt2_tokenizer.bin.")
    ap.add_argument("--out", default=os.path.join(repo_root(), "gpt2_tokenizer.bin"),
                    help="output file (default: <repo>/gpt2_tokenizer.bin)")
    ap.add_argument("--bpe_dir", help="folder with encoder.json and vocab.bpe (default: see gpt2_bpe.py)")
    ap.add_argument("--force", action="store_true", help="rewrite the file even if it is up to date")
    args = ap.parse_args(argv)

    try:
        enc = get_encoder(args.bpe_dir)
        data = tokenizer_bytes(enc)
        # valid = byte-identical to what we would write (building it takes well under a second)
        if not write_file_if_changed(args.out, data, args.force):
            print(f"{args.out} already exists and is valid; skipping (--force to redo)")
            return 0
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {len(data):,} bytes, {enc.n_vocab} tokens, EOT {enc.eot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
