"""dev/data/data_common.py: helpers shared by the data scripts.

Defines
- repo_root(), shared_data_dir(), cache_dir(): where the checkout, the offline data copies
  (../shared/data, overridable with $LLMC_SHARED_DATA) and the download cache live;
  offline_data_searched(): those places in words, for errors;
- download(url, dest, sha256=None): fetch a file to a temporary name, check it, rename it; its
  errors name where the offline copy was looked for first;
- sha256_of(path);
- read_jsonl(path, lines=None): the records of a JSON-lines file (.gz too) with their line
  numbers; parse_error(path, lineno, what): the one-line error for a malformed record;
- write_datafile(path, tokens) / read_datafile(path): llm.c token shards
  (header 256 x int32: 20240520, 1, ntok, zeros; then ntok x uint16);
- ShardWriter(path_of, size): documents packed into shards of exactly `size` tokens (the last one
  shorter), shard i written to path_of(i) as soon as it is full (fineweb.py, prose.py).
"""
import gzip
import hashlib
import json
import os
import sys
import urllib.request

try:
    import numpy as np
except ModuleNotFoundError as e:  # one line naming the interpreter that has the dependencies
    sys.exit(f"error: {__file__}: {e.name} is not installed for {sys.executable}; run it with /usr/bin/python3 "
             f"(Debian's python3-numpy, -torch, -matplotlib; bash .ci/run installs them) or pip install {e.name}")

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4


def repo_root():
    """The checkout's root: this file lives in <repo>/dev/data/."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def shared_data_dir():
    """Offline copies of public data: $LLMC_SHARED_DATA, else the checkout's sibling shared/data."""
    env = os.environ.get("LLMC_SHARED_DATA")
    if env:
        return os.path.abspath(env)
    return os.path.normpath(os.path.join(repo_root(), "..", "shared", "data"))


def offline_data_searched():
    """Where shared_data_dir() looked for the offline copies, in words, for the error of the download
    that replaces a missing one: $LLMC_SHARED_DATA's value (which replaces ../shared/data) or that it
    is unset, and the checkout's ../shared/data resolved; a folder that does not exist is marked."""
    sibling = os.path.normpath(os.path.join(repo_root(), "..", "shared", "data"))

    def shown(path):
        full = os.path.abspath(path)
        return (path if full == path else f"{path} = {full}") + ("" if os.path.isdir(full) else " (absent)")
    env = os.environ.get("LLMC_SHARED_DATA")
    if env:
        return f"$LLMC_SHARED_DATA={shown(env)}, used instead of ../shared/data ({sibling})"
    state = "unset" if env is None else "empty"
    return f"$LLMC_SHARED_DATA is {state}, so the checkout's ../shared/data: {shown(sibling)}"


def cache_dir(*parts):
    """Where downloads go when the offline copies are absent: ~/.cache/llmc_prism/<parts>."""
    return os.path.join(os.path.expanduser("~"), ".cache", "llmc_prism", *parts)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(url, dest, sha256=None, timeout=60):
    """Download url to dest. The data goes to a temporary name first and is renamed only once
    complete (and, when sha256 is given, verified), so dest never holds a partial file. The data
    scripts download only when the offline copy is missing, so a failure names where that copy was
    looked for first (offline_data_searched)."""
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    tmp = f"{dest}.{os.getpid()}.tmp"
    print(f"downloading {url} -> {dest}", flush=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as f:
            for block in iter(lambda: resp.read(1 << 20), b""):
                f.write(block)
        if sha256 is not None:
            got = sha256_of(tmp)
            if got != sha256:
                raise ValueError(f"{url}: downloaded file has sha256 {got}, expected {sha256} (downloaded as no "
                                 f"offline copy was found; looked in {offline_data_searched()})")
        os.replace(tmp, dest)
    except Exception as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, ValueError):
            raise
        raise OSError(f"no offline copy (looked in {offline_data_searched()}), and could not download {url} "
                      f"to {dest}: {e}") from e
    return dest


def parse_error(path, lineno, what):
    """The one-line error for a malformed input record."""
    return ValueError(f"{path}: line {lineno}: {what}")


def read_jsonl(path, lines=None):
    """Yield (line number, record) for each non-blank line of a JSON-lines file (gzip when the
    name ends in .gz); lines: the file's text already split into lines, when the caller has read
    it. A line that is not JSON is a parse_error naming the file and the line."""
    if lines is None:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            yield from read_jsonl(path, f)
        return
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            raise parse_error(path, lineno, f"not JSON ({e.msg})") from e


def write_file_if_changed(path, data, force=False):
    """Write the bytes data to path unless a byte-identical file is there (force: always): to
    path.tmp, fsync, rename, so a file under its final name is always complete. Returns whether it
    wrote. The tokenizer writers use it (dev/data/gpt2_tokenizer.py, bytes_tokenizer.py)."""
    if not force and os.path.isfile(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return True


def write_datafile(path, tokens):
    """Write tokens as an llm.c shard. Written to path.tmp, synced and renamed, so a file under
    its final name is always complete."""
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
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0] = SHARD_MAGIC
    header[1] = SHARD_VERSION
    header[2] = toks.size
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype("<u2").tobytes())
        f.flush()
        os.fsync(f.fileno())  # on disk before the rename makes it the file under its name
    os.replace(tmp, path)
    return toks.size


def read_datafile(path):
    """Read an llm.c shard and return its tokens (numpy uint16). Raises ValueError, one line
    naming the file and the field, when the magic, version or size is wrong."""
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise ValueError(f"{path}: size is {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_BYTES), dtype="<i4")
        if header[0] != SHARD_MAGIC:
            raise ValueError(f"{path}: magic is {header[0]}, expected {SHARD_MAGIC} (not a GPT-2 token shard)")
        if header[1] != SHARD_VERSION:
            raise ValueError(f"{path}: version is {header[1]}, expected {SHARD_VERSION}")
        ntok = int(header[2])
        if ntok < 0:
            raise ValueError(f"{path}: token count is {ntok}, expected >= 0")
        expected = HEADER_BYTES + 2 * ntok
        if size != expected:
            raise ValueError(f"{path}: size is {size} bytes, expected {expected} (1024 + 2 x {ntok} tokens)")
        tokens = np.frombuffer(f.read(2 * ntok), dtype="<u2")
    return tokens.astype(np.uint16, copy=False)


class ShardWriter:
    """Packs token sequences (documents) into llm.c shards of exactly `size` tokens, splitting a
    document over every shard boundary it crosses; shard i goes to path_of(i) (write_datafile:
    temporary, fsync, rename) as soon as it is full, and close() writes the rest. `written` lists
    (path, tokens) in order; log=True prints a line per shard."""

    def __init__(self, path_of, size, log=False):
        if size < 1:
            raise ValueError(f"shard size {size}: expected >= 1")
        self.path_of, self.size, self.log = path_of, size, log
        self.buf = np.empty(size, dtype=np.uint16)
        self.fill = 0
        self.written = []

    def add(self, tokens):
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
        write_datafile(path, self.buf[:self.fill])
        self.written.append((path, self.fill))
        if self.log:
            print(f"wrote {path}: {self.fill:,} tokens", flush=True)
        self.fill = 0
