"""llmc_formats/atomic.py: complete files only (doc/formats.md "Conventions and magic numbers": complete files only).

Defines
- write_atomic(path, data): data (bytes, str written as UTF-8, or an iterable of bytes chunks)
  goes to path.tmp, which is flushed, fsynced and renamed to path, so a file under its final name
  is never partial; the parent directory is created when missing. On an error the .tmp is
  removed and the final name is left as it was.
"""
import os


def write_atomic(path, data):
    """Write data (bytes, str or an iterable of bytes) to path.tmp, fsync, rename it to path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            if isinstance(data, str):
                f.write(data.encode("utf-8"))
            elif isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                for chunk in data:
                    f.write(chunk)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it the file under its name
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
