"""llmc_formats/tokenizer.py: llm.c's tokenizer file (doc/formats.md "Tokenizer file").

A header of 256 int32 ([0] 20240328, [1] version 1 or 2, [2] the token count n, [3] the EOT id in
version 2; version 1 implies 50256), then for each id 0..n-1 a uint8 length (1..255) and that many
raw bytes. The GPT-2 file (dev/data/gpt2_tokenizer.py) and the byte vocabulary's
(dev/data/bytes_tokenizer.py) are both version 2.

Defines
- TOKENIZER_MAGIC, TOKENIZER_VERSION (the version written), HEADER_INTS, HEADER_BYTES, MAX_TOKENS
  (2^24, llmc/tokenizer.h's bound on the count);
- encode(tokens, eot): the whole file as bytes for tokens (a sequence of bytes objects, id order)
  and the EOT id; a token outside 1..255 bytes is a ValueError naming its id;
- read(path): (tokens, eot) of a version 1 or 2 file: the bytes of each id and the EOT id; every
  check of the C reader (magic, version, count, the EOT id, a zero length, a file that ends early) is a
  FormatError of one line naming the file and the field.
The C reader is llmc/tokenizer.h.
"""
import struct

from llmc_formats import FormatError

TOKENIZER_MAGIC = 20240328
TOKENIZER_VERSION = 2
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
MAX_TOKENS = 1 << 24
V1_EOT = 50256


def encode(tokens, eot):
    """The tokenizer file holding tokens (bytes per id) with end-of-text id eot, version 2."""
    tokens = list(tokens)
    if not 1 <= len(tokens) <= MAX_TOKENS or not 0 <= eot < len(tokens):
        raise ValueError(f"tokenizer: {len(tokens)} tokens, EOT {eot}: expected 1..{MAX_TOKENS} tokens and "
                         f"an EOT among them")
    parts = [struct.pack(f"<{HEADER_INTS}i", TOKENIZER_MAGIC, TOKENIZER_VERSION, len(tokens), eot,
                         *([0] * (HEADER_INTS - 4)))]
    for i, b in enumerate(tokens):
        # one length byte: never write a file the readers refuse
        if not 1 <= len(b) <= 255:
            raise ValueError(f"tokenizer: token {i} is {len(b)} bytes, expected 1..255")
        parts.append(bytes([len(b)]))
        parts.append(bytes(b))
    return b"".join(parts)


def read(path):
    """(tokens, eot) of the tokenizer file at path: tokens[i] is the bytes of id i."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FormatError(f"{path}: cannot read the tokenizer file ({e.strerror})") from None
    if len(data) < HEADER_BYTES:
        raise FormatError(f"{path}: {len(data)} bytes, shorter than the {HEADER_BYTES}-byte tokenizer header")
    magic, version, n, eot = struct.unpack_from("<4i", data, 0)
    if magic != TOKENIZER_MAGIC or version not in (1, 2):
        raise FormatError(f"{path}: header[0] magic {magic}, header[1] version {version}: expected "
                          f"{TOKENIZER_MAGIC} and 1 or 2 (llm.c's tokenizer file)")
    if not 1 <= n <= MAX_TOKENS:
        raise FormatError(f"{path}: header[2] token count {n}: expected 1..{MAX_TOKENS}")
    if version == 1:
        eot = V1_EOT
    elif not 0 <= eot < n:
        raise FormatError(f"{path}: header[3] end-of-text token {eot}: expected an id below header[2] {n}")
    tokens, off = [], HEADER_BYTES
    for i in range(n):
        if off >= len(data):
            raise FormatError(f"{path}: ends at token {i} of {n} (header[2])")
        ln = data[off]
        if ln == 0:
            raise FormatError(f"{path}: token {i}: length 0, expected 1..255")
        if off + 1 + ln > len(data):
            raise FormatError(f"{path}: ends inside token {i} of {n} (header[2])")
        tokens.append(data[off + 1:off + 1 + ln])
        off += 1 + ln
    return tokens, eot
