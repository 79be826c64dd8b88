"""llmc_formats/layer_table.py: layer-table files, the trainers' -layers and -prism (doc/formats.md
"Per-layer heads": the layer table; the syntax is doc/prism.md's, Prism's rule doc/prism.md "Constraints").

Defines
- parse_schedule(path, n_embd, n_layer, unchecked=False, text=None) -> [(h, d, kind code)]:
  entries H[xD][:KIND][*N] separated by whitespace, '#' comments; every error a ValueError of one
  line "file:line: message".
The C twin is llmc/layer_table.h.
"""
import re

from llmc_formats.checkpoint import KINDS

_ENTRY = re.compile(r"(\d+)(?:x(\d+))?(?::([A-Za-z]+))?(?:\*(\d+))?")


def parse_schedule(path, n_embd, n_layer, unchecked=False, text=None):
    """Layer-table file -> [(h, d, kind)] (doc/formats.md "Per-layer heads"; Prism's rule, doc/prism.md "Constraints").

    Entries H[xD][:KIND][*N] separated by whitespace, '#' comments. Without xD the head size is
    C/H and H must divide C. The entries must cover exactly n_layer layers, with non-decreasing
    head counts (Prism's rule, as -prism checks it) unless `unchecked` (as -layers reads it). Errors are ValueError("file:line: message"). `text` replaces
    the file's content (the path is still used in messages).
    """
    if text is None:
        with open(path, "r") as f:
            text = f.read()
    table = []
    prev_h = None
    last_line = 1
    readings = []  # how each HxD entry was read, for a layer count that misses L (as llmc/layer_table.h)
    for lineno, raw in enumerate(text.splitlines(), 1):
        where = f"{path}:{lineno}"
        for tok in raw.split("#", 1)[0].split():
            m = _ENTRY.fullmatch(tok)
            if not m:
                raise ValueError(f"{where}: bad entry '{tok}' (expected H[xD][:KIND][*N], "
                                 f"e.g. 4, 2x64, 12:mha*3)")
            h = int(m.group(1))
            if h < 1:
                raise ValueError(f"{where}: entry '{tok}': head count must be >= 1")
            if m.group(2) is not None:
                d = int(m.group(2))
                if d < 1:
                    raise ValueError(f"{where}: entry '{tok}': head size must be >= 1")
            else:
                if n_embd % h:
                    raise ValueError(f"{where}: entry '{tok}': {h} heads do not divide "
                                     f"C={n_embd} (give the head size explicitly as {h}xD)")
                d = n_embd // h
            kind = m.group(3) or "mha"
            if kind not in KINDS:
                raise ValueError(f"{where}: entry '{tok}': unknown kind '{kind}' "
                                 f"(expected one of {', '.join(KINDS)})")
            n = int(m.group(4)) if m.group(4) is not None else 1
            if n < 1:
                raise ValueError(f"{where}: entry '{tok}': repeat count must be >= 1")
            if prev_h is not None and h < prev_h and not unchecked:
                raise ValueError(f"{where}: entry '{tok}': head count {h} is below the previous "
                                 f"{prev_h}; schedules must be non-decreasing "
                                 f"(a table that is not a Prism schedule runs with --layers)")
            if len(table) + n > n_layer:
                raise ValueError(f"{where}: entry '{tok}': the table covers more than "
                                 f"L={n_layer} layers")
            table.extend([(h, d, KINDS.index(kind))] * n)
            if m.group(2) is not None:
                readings.append(f"'{tok}' is {n} layer{'s' if n != 1 else ''} of {h} heads of size {d}")
            prev_h = h
            last_line = lineno
    if len(table) != n_layer:
        why = f" ({', '.join(readings)}; H*N is N layers of H heads)" if readings else ""
        raise ValueError(f"{path}:{last_line}: the table covers {len(table)} layers, "
                         f"the model has L={n_layer}{why}")
    return table
