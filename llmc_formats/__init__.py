"""llmc_formats: the Python reader and writer of each file format of the project (doc/formats.md).

Modules
- checkpoint: the model checkpoint (doc/formats.md "Header", "The 16 parameter tensors", "Per-layer heads"): the kinds (names, codes, qkvw
  rows, S-D and linear), GPTConfig (shape, layer table, header[9] flags, header[10] emb_scale,
  slot shapes), header encode/decode for versions 3/5/103/105, fp32/bf16 bodies;
- descriptor: model descriptors (dN, gpt2:dN, gpt3:cC, tiny, L<l>C<c>H<h>[T<t>][V<v>]; doc/formats.md "The 16 parameter tensors");
- layer_table: layer-table files (H[xD][:KIND][*N] entries; doc/formats.md "Per-layer heads", doc/prism.md);
- shards: llm.c token shards (doc/formats.md "Token shards");
- tokenizer: llm.c's tokenizer file (doc/formats.md "Tokenizer file");
- main_log: the trainer's main.log (doc/formats.md "main.log and stdout");
- atomic: NAME.tmp + fsync + rename, the one way every Python writer writes a file (doc/formats.md "Conventions and magic numbers");
- hf_export: the Hugging Face export's tensor names and config fields (doc/export.md).

FormatError is the error of every reader here: a ValueError whose message is one line naming the
file and the offending field.

Importing it. Scripts run from a checkout, as llm.c's do (`python dev/data/tinyshakespeare.py`,
`python3 scripts/ab.py`), so each script's first project line inserts its own checkout's root at
the front of sys.path, in one fixed form: index 0, os.path.dirname applied once per folder level
plus once to os.path.abspath(__file__), and the comment "this checkout's root first"
(test/test_llmc_formats.py checks every tracked file: no other edit of sys.path exists, and each
such line names its own checkout's root).
This is how repository-internal scripts of large Python projects (PyTorch's tools/, for one) reach
their packages. An editable install would bind every checkout on a machine to the one that ran it
last: a second checkout, or test/test_fresh_clone.sh's copy, would silently run the first one's
code. After that line a script imports `llmc_formats` and the modules of other folders by their
qualified names (`from scripts import common`, `from dev.data import data_common`,
`from sd_attention import routing_null`, `import train_gpt2`): those folders are namespace packages
and need no __init__.py. test/ is the exception: the standard library has a package `test`, so a
test imports its own folder's modules (harness) unqualified.

require(script, *modules): a script's dependencies (numpy, torch, ...), imported once here, so a
missing one is the same one line everywhere: the module, the interpreter, and the set-up command
(`make deps`, mk/deps.sh) that installs it for /usr/bin/python3. The package itself needs only the
standard library, so a script imports it first.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout this package is in


def missing_module_line(script, name):
    """The one error line for a module `name` that the interpreter running `script` lacks."""
    return (f"error: {script}: {name} is not installed for {sys.executable}; run it with "
            f"/usr/bin/python3 after `make deps` (Debian's python3-numpy, -torch, -matplotlib and "
            f"the pins of mk/requirements.txt), or pip install {name}")


def require(script, *modules):
    """Import each module, or exit with missing_module_line's one line."""
    import importlib
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            sys.exit(missing_module_line(script, e.name or module))


class FormatError(ValueError):
    """A file that does not match its format; the message names the file and the field."""
