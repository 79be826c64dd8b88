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
- write_datafile(path, tokens) / read_datafile(path) (llm.c's names), ShardWriter(path_of, size):
  llm.c token shards; they are llmc_formats/shards.py's write_shard, read_shard and ShardWriter,
  imported here for the data scripts;
- write_file_if_changed(path, data, force=False): an atomic write (llmc_formats/atomic.py) unless
  a byte-identical file is there.
"""
import gzip
import hashlib
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy  # noqa: F401

from llmc_formats.atomic import write_atomic  # noqa: E402
from llmc_formats.shards import HEADER_BYTES, HEADER_INTS, SHARD_MAGIC, SHARD_VERSION, ShardWriter  # noqa: E402,F401
from llmc_formats.shards import read_shard as read_datafile  # noqa: E402,F401
from llmc_formats.shards import write_shard as write_datafile  # noqa: E402,F401


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
    write_atomic(path, data)
    return True
