"""dev/data/bytes_tokenizer.py: the byte vocabulary (V = 256) and its llm.c tokenizer file.

Usage: python dev/data/bytes_tokenizer.py [--out PATH] [--force]

The byte vocabulary: token = byte value (0..255), V = 256; the document separator (end-of-text,
EOT) is token 0, the NUL byte, which text never contains (encode_documents refuses a document
holding one). Models use it with a descriptor ending in V256 (e.g. L4C128H4T256V256) and token
shards written by dev/data/prose_bytes.py (doc/formats.md "The byte vocabulary and its shards").

Tokenizer file, llm.c's format version 2 (doc/formats.md "Tokenizer file"): header uint32[256] =
[20240328, 2, 256, 0 (EOT), 0, ...], then for each id 0..255 the length byte 1 and the byte itself.
The trainers read it with -tok to print samples. Default output <repo>/bytes_tokenizer.bin, beside
gpt2_tokenizer.bin.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy as np  # noqa: E402

from dev.data.data_common import repo_root, write_file_if_changed  # noqa: E402
from llmc_formats import tokenizer  # noqa: E402

BYTE_VOCAB = 256
BYTE_EOT = 0


def tokenizer_bytes():
    """The whole tokenizer file: the header, then (1, byte) for every byte value
    (llmc_formats/tokenizer.py writes the format)."""
    return tokenizer.encode([bytes([i]) for i in range(BYTE_VOCAB)], BYTE_EOT)


def encode_documents(docs, where):
    """Documents (bytes each) -> one uint8 token stream: [EOT 0] + the document's bytes, for each.
    A document holding a NUL byte is a ValueError naming `where`, the document and the offset,
    since 0 is the separator."""
    parts = []
    for i, doc in enumerate(docs):
        k = doc.find(b"\0")
        if k >= 0:
            raise ValueError(f"{where}: document {i + 1} holds a NUL byte at offset {k}; the byte vocabulary "
                             f"uses 0 as the end-of-text token, so the text must not contain it")
        parts.append(b"\0")
        parts.append(doc)
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def write_tokenizer(path, force=False):
    """Write the file to path (through path.tmp); returns False when an identical file was there."""
    return write_file_if_changed(path, tokenizer_bytes(), force)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the byte vocabulary's llm.c tokenizer file (V 256, EOT 0).")
    ap.add_argument("--out", default=os.path.join(repo_root(), "bytes_tokenizer.bin"),
                    help="output file (default: <repo>/bytes_tokenizer.bin)")
    ap.add_argument("--force", action="store_true", help="rewrite the file even if it is up to date")
    args = ap.parse_args(argv)
    try:
        wrote = write_tokenizer(args.out, args.force)
    except OSError as e:
        print(f"error: {args.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    if wrote:
        print(f"wrote {args.out}: {BYTE_VOCAB} tokens, EOT {BYTE_EOT}")
    else:
        print(f"{args.out} already exists and is valid; skipping (--force to redo)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
