"""llmc_formats/shards.py: llm.c token shards (doc/formats.md "Token shards", "The byte vocabulary and its shards").

A shard is a header of 256 int32 (20240520, 1, ntok, zeros), then ntok uint16 token ids; its
size is exactly 1024 + 2 * ntok bytes. GPT-2 shards and the byte-vocabulary shards of 3.1 share it.

Defines
- SHARD_MAGIC, SHARD_VERSION, HEADER_INTS, HEADER_BYTES;
- write_shard(path, tokens): ids in [0, 65535) written atomically (llmc_formats/atomic.py);
  returns the token count;
- read_shard_header(path): ntok after the size, magic, version and count checks;
- read_shard(path): the tokens as a numpy uint16 array after the same checks;
- ShardWriter(path_of, size): documents packed into shards of exactly `size` tokens (the last one
  shorter), shard i written to path_of(i) as soon as it is full (dev/data/fineweb.py, prose.py).
Every error is a ValueError (the readers': FormatError) of one line naming the file and the field.
The C reader is llmc/dataloader.h.
"""
import os
import struct

from llmc_formats import FormatError
from llmc_formats.atomic import write_atomic

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4


def write_shard(path, tokens):
    """Write tokens as an llm.c shard. Written to path.tmp, synced and renamed, so a file under
    its final name is always complete."""
    import numpy as np
    toks = np.asarray(tokens)
    if toks.ndim != 1:
        raise ValueError(f"{path}: tokens must be a 1-D sequence, got shape {toks.shape}")
    if toks.size and not np.issubdtype(toks.dtype, np.integer):
        raise ValueError(f"{path}: tokens must be integers, got dtype {toks.dtype}")
    if toks.size:
        lo, hi = int(toks.min()), int(toks.max())
        # uint16 storage; 65535 is kept out as llm.c's writer does
        if lo < 0 or hi >= 65535:
            raise ValueError(f"{path}: token ids must be in [0, 65535), got min {lo} max {hi}")
    if toks.size >= 2**31:
        raise ValueError(f"{path}: {toks.size} tokens do not fit the int32 count field")
    header = struct.pack(f"<{HEADER_INTS}i", SHARD_MAGIC, SHARD_VERSION, toks.size,
                         *([0] * (HEADER_INTS - 3)))
    write_atomic(path, (header, toks.astype("<u2").tobytes()))
    return toks.size


def read_shard_header(path):
    """The token count of an llm.c shard, after the magic, version, count and size checks."""
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise FormatError(f"{path}: file is {size} bytes, shorter than the 1024-byte header")
    with open(path, "rb") as f:
        magic, version, ntok = struct.unpack("<3i", f.read(12))
    if magic != SHARD_MAGIC:
        raise FormatError(f"{path}: bad magic {magic} in header[0] (expected {SHARD_MAGIC})")
    if version != SHARD_VERSION:
        raise FormatError(f"{path}: bad version {version} in header[1] (expected {SHARD_VERSION})")
    if ntok < 0:
        raise FormatError(f"{path}: bad token count {ntok} in header[2] (expected >= 0)")
    if size != HEADER_BYTES + 2 * ntok:
        raise FormatError(f"{path}: file size {size} does not match ntok {ntok} in header[2] "
                          f"(expected {HEADER_BYTES + 2 * ntok} bytes)")
    return ntok


def read_shard(path):
    """Tokens of an llm.c shard as a uint16 array, after the magic, version and size checks."""
    import numpy as np
    read_shard_header(path)
    return np.fromfile(path, dtype="<u2", offset=HEADER_BYTES).astype(np.uint16, copy=False)


class ShardWriter:
    """Packs token sequences (documents) into llm.c shards of exactly `size` tokens, splitting a
    document over every shard boundary it crosses; shard i goes to path_of(i) (write_shard:
    temporary, fsync, rename) as soon as it is full, and close() writes the rest. `written` lists
    (path, tokens) in order; log=True prints a line per shard."""

    def __init__(self, path_of, size, log=False):
        import numpy as np
        if size < 1:
            raise ValueError(f"shard size {size}: expected >= 1")
        self.path_of, self.size, self.log = path_of, size, log
        self.buf = np.empty(size, dtype=np.uint16)
        self.fill = 0
        self.written = []

    def add(self, tokens):
        import numpy as np
        toks = np.asarray(tokens)
        if toks.size and (int(toks.min()) < 0 or int(toks.max()) >= 65535):
            raise ValueError(f"{self.path_of(len(self.written))}: token ids must be in [0, 65535), "
                             f"got min {int(toks.min())} max {int(toks.max())}")
        pos = 0
        while pos < toks.size:
            k = min(self.size - self.fill, toks.size - pos)
            self.buf[self.fill:self.fill + k] = toks[pos:pos + k]
            self.fill += k
            pos += k
            if self.fill == self.size:
                self._flush()

    def close(self, write_empty=False):
        """Write the partial last shard; with write_empty, an empty shard when nothing was written."""
        if self.fill or (write_empty and not self.written):
            self._flush()
        return self.written

    def _flush(self):
        path = self.path_of(len(self.written))
        write_shard(path, self.buf[:self.fill])
        self.written.append((path, self.fill))
        if self.log:
            print(f"wrote {path}: {self.fill:,} tokens", flush=True)
        self.fill = 0
