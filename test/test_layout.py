"""test/test_layout.py: the dependency direction of doc/design.md, held over every #include,
and the code's citations of the docs.

Every C, C++ and CUDA file of the repository belongs to a module by its folder; a module may
include only the modules below it in the table (and itself). A program (a file that defines
main(): the trainers, the tools, dev/ and test/) stands above every module and may include any.
The test also runs the checker on a small tree with one include against the direction (the
framework including a method folder) and expects that include to be the one reported. It also
holds the README's layout table and design.md's reading path to the tree: every path they name
exists, and every function or class a reading step names is in that step's files; the three kind
registries follow kinds/list.h's codes; the framework's code (llmc/, comments aside) names no kind:
no identifier with a kind's name as a word (sd_*, LIN_*), no kind's flag (-sd_sign) and no kind's
parameter slot (sdskew), with a control that such names are found; test/README.md's table names
every source file of those folders and only tests that exist, and each row's first test is named
after a module of its row (test_<stem>[_fd|_emul|_host].<ext>; the stem of a file, a package's name
for its __init__.py, or the name of the one sub-folder of llmc/ holding every file of the row),
with a control row named after nothing in it; and commit subjects since SUBJECT_RULE_FROM are at
most 72 characters.

    python test/test_layout.py            (from the repository root)
"""
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402

# module -> the modules it may include (besides itself); doc/design.md "Dependencies" draws it
ALLOWED = {
    "llmc": [],
    "llmc/cpu": ["llmc"],
    "llmc/cuda": ["llmc"],
    "llmc/attention": ["llmc", "llmc/cuda"],
    "llmc/gpu": ["llmc", "llmc/cuda", "llmc/attention"],
    "sd_attention": ["llmc", "llmc/cpu", "llmc/cuda", "llmc/gpu"],
    "prism": ["llmc", "llmc/cpu"],
    "kinds": ["llmc", "llmc/cpu", "llmc/cuda", "llmc/gpu", "sd_attention"],
}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
MAIN = re.compile(r'^\s*int\s+main\s*\(', re.M)


def module_of(rel):
    """The module of a repository path, or None for files outside every module (programs)."""
    d = os.path.dirname(rel)
    return d if d in ALLOWED else None


def sources(root):
    for base, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("build", "cudnn-frontend")]
        for f in files:
            if f.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(base, f), root)


def violations(root):
    """(file, include, reason) for every include against the direction; also the files checked."""
    bad, checked = [], 0
    for rel in sorted(sources(root)):
        text = open(os.path.join(root, rel), errors="replace").read()
        mod = module_of(rel)
        if mod is None:
            continue  # a program at the top, in dev/ or in test/: anything goes
        checked += 1
        if MAIN.search(text):
            bad.append((rel, "", "a program inside module %s (programs stand above the modules)" % mod))
        for inc in INCLUDE.findall(text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
            if not os.path.exists(os.path.join(root, target)):
                bad.append((rel, inc, "does not exist"))
                continue
            tmod = module_of(target)
            if tmod == mod:
                continue
            if tmod is None:
                bad.append((rel, inc, "%s includes a program or test file" % mod))
            elif tmod not in ALLOWED[mod]:
                bad.append((rel, inc, "%s may not include %s" % (mod, tmod)))
    return bad, checked


def negative_control():
    """A tiny tree: llmc/a.h includes sd_attention/b.h (against the direction), llmc/c.h includes
    llmc/a.h (fine), sd_attention/b.h includes llmc/c.h (fine), and sd_attention/tool.c, a program
    inside a module, includes kinds/r.h (the cycle a program in a method folder would close)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "llmc"))
        os.makedirs(os.path.join(tmp, "sd_attention"))
        os.makedirs(os.path.join(tmp, "kinds"))
        files = {"llmc/a.h": '#include "../sd_attention/b.h"\n', "llmc/c.h": '#include "a.h"\n',
                 "sd_attention/b.h": '#include "../llmc/c.h"\n', "kinds/r.h": '#include "../sd_attention/b.h"\n',
                 "sd_attention/tool.c": '#include "../kinds/r.h"\nint main(void) { return 0; }\n'}
        for k, v in files.items():
            with open(os.path.join(tmp, k), "w") as f:
                f.write(v)
        return violations(tmp)


def main():
    bad, checked = violations(ROOT)
    for rel, inc, why in bad:
        print("  %s: #include \"%s\": %s" % (rel, inc, why))
    check(checked >= 60, "the modules' files are found and checked (%d files)" % checked)
    check(not bad, "every #include of llmc/, its sub-folders, sd_attention/, prism/ and kinds/ follows "
          "the direction of doc/design.md (%d against it)" % len(bad))
    for mod in ALLOWED:
        check(os.path.isdir(os.path.join(ROOT, mod)), "module %s exists" % mod)
    nb, _ = negative_control()
    nb = sorted(nb)
    check(len(nb) == 3 and nb[0][0] == "llmc/a.h" and "llmc may not include sd_attention" in nb[0][2]
          and nb[1][0] == nb[2][0] == "sd_attention/tool.c" and "a program inside module" in nb[1][2]
          and "sd_attention may not include kinds" in nb[2][2],
          "negative control: the framework including a method folder, a program inside a method folder and "
          "its include of the registry are reported: %s" % nb)
    # the README's layout table names every folder, and everything it names exists
    readme = open(os.path.join(ROOT, "README.md")).read()
    table = readme[readme.index("## Layout"):]
    table = table[:table.index("\n## ", 3)]
    named = set()
    for row in re.findall(r"^\| ([^|]+) \|", table, re.M):
        named.update(p.rstrip("/") for p in re.findall(r"`([^`]+)`", row))
    missing = [p for p in named if not os.path.exists(os.path.join(ROOT, p))]
    check(named and not missing, "every path of the README's layout table exists (%d; missing %s)" % (len(named), missing))
    folders = sorted(set(list(ALLOWED) + [d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d))
                                          and not d.startswith(".") and d not in ("build", "out", "log", "__pycache__")]))
    unnamed = [d for d in folders if not any(n == d or n.startswith(d + "/") for n in named)]
    check(not unnamed, "the README's layout table names every folder (%d; not named: %s)" % (len(folders), unnamed))
    # the design doc draws the same table
    design = open(os.path.join(ROOT, "doc", "design.md")).read()
    for mod, deps in ALLOWED.items():
        row = re.search(r"^\| `%s/` \|[^\n]*\| ([^|\n]*) \|$" % re.escape(mod), design, re.M)
        listed = sorted(re.findall(r"`([a-z_/]+)/`", row.group(1))) if row else None
        check(listed == sorted(deps), "doc/design.md lists what %s/ may include: %s" % (mod, listed))
    rows = registry_rows()
    check(len(set(map(tuple, rows.values()))) == 1 and len(rows) == 3,
          "the three registry tables have the same kind names in the same order (%s)" % rows)
    codes = re.search(r"typedef enum \{([^}]*)\} AttnKind;", open(os.path.join(ROOT, "kinds", "list.h")).read())
    codes = [c.strip() for c in codes.group(1).split(",")] if codes else []
    names = rows.get("kinds/registry.h", [])
    check(codes[-1:] == ["ATTN_NUM_KINDS"] and len(codes) - 1 == len(names) and
          all(c == "ATTN_" + n.upper() for c, n in zip(codes, names)),
          "the registry's rows follow kinds/list.h's codes (%s; %s)" % (codes, names))
    words, flags, slots = kind_vocabulary()
    check(len(words) >= 3 and len(flags) >= 7 and len(slots) >= 2,
          "the kinds' names, flags and slots are read from the registry and the method folders (%s; %s; %s)"
          % (sorted(words), sorted(flags), sorted(slots)))
    named_kind = []
    for rel in sorted(sources(ROOT)):
        if rel.split("/")[0] == "llmc":
            text = open(os.path.join(ROOT, rel), errors="replace").read()
            named_kind += ["%s: %s" % (rel, n) for n in kind_names_in(text, words, flags, slots)]
    check(named_kind == [], "the framework's code (llmc/, comments aside) names no kind's identifier, flag or "
          "slot (%d found: %s)" % (len(named_kind), named_kind[:8]))
    ctl = kind_names_in('/* c->sd_sign, -sd_sign */ int n = c->sd_sign + lin_x("-lin_prescale") + P_SDSKEW;\n'
                        'const char *s = "sdskew"; // sd_in_comment\nint sdk, linear, sd;\n', words, flags, slots)
    check(sorted(ctl) == sorted(["sd_sign", "lin_x", "-lin_prescale", "P_SDSKEW", "sdskew"]),
          "control: kind names in code and strings are found, in comments and other words not (%s)" % ctl)
    unmapped, missing_tests, n_rows = test_map_gaps()
    check(n_rows >= 20 and unmapped == [] and missing_tests == [],
          "test/README.md maps every source file of llmc/, kinds/, sd_attention/ and prism/ to tests that exist "
          "(%d rows; unmapped %s; missing tests %s)" % (n_rows, unmapped, missing_tests))
    text = open(os.path.join(ROOT, "test", "README.md")).read()
    bad_names = misnamed_rows(text)
    check(bad_names == [], "each row of test/README.md starts with a test named after one of its modules "
          "(test_<stem>[_fd|_emul|_host]; misnamed: %s)" % bad_names)
    ctl = misnamed_rows("| `llmc/foo.h`, `bar.h` | `test_bar_fd.c`, `test_x.sh` |\n"
                        "| `llmc/foo.h`, `bar.h` | `test_baz.c`, `test_foo.c` |\n"
                        "| `llmc/cuda/a.h`, `b.cu` | `test_cuda_host.c` |\n"
                        "| `llmc/cuda/a.h`, `llmc/gpu/b.h` | `test_cuda_host.c` |\n"
                        "| `llmc/a.h`, `b.h` | `test_llmc.c` |\n"
                        "| `llmc_formats/__init__.py`, `x.py` | `test_llmc_formats.py` |\n"
                        "| `llmc/a.h` | `test_a_fdx.c` |\n")
    check([t for t, _ in ctl] == ["test_baz.c", "test_cuda_host.c", "test_llmc.c", "test_a_fdx.c"],
          "control: a row led by a test of another name, a folder name over two folders or over llmc/ itself, "
          "an unknown qualifier are reported; a qualifier, a sub-folder and a package pass (%s)" % ctl)
    long_subjects = commit_subjects_over(72)
    if long_subjects is None:
        print("skipped: commit subjects (not a git checkout, or git missing)")
    else:
        check(long_subjects == [], "commit subjects since %s are at most 72 characters (over: %s)"
              % (SUBJECT_RULE_FROM, long_subjects))
    stale = reading_path_stale(design)
    check(stale == [], "doc/design.md's reading path names files that exist and names found in them (stale: %s)" % stale)
    # control: a name the step's files do not hold is reported
    ctl = reading_path_stale("## Where to start reading\n\n1. `train_gpt2.c`, `no_such_function`.\n\n## Next\n")
    check(ctl == ["no_such_function"], "control: a reading step naming a missing function is reported (%s)" % ctl)
    rows = chain_rows(design)
    for layer, count, steps in rows:
        gaps = chain_gaps(ROOT, steps)
        files = [f for f, _ in steps]
        check(not gaps and count == len(files) == len(set(files)),
              "doc/design.md: %s: a chain of calls from main to the kernel through %d files, as its count says "
              "(%d; gaps: %s)" % (layer, len(files), count, gaps))
    check(len(rows) == 4, "doc/design.md follows four layers from main to the kernel (%d rows)" % len(rows))
    ctl = chain_gaps(ROOT, [("train_gpt2.c", ["main", "train"]), ("llmc/cpu/gpt2_cpu.h", ["attention_block_forward"]),
                            ("llmc/cpu/kernels.h", ["no_such_kernel"])])
    check(ctl == ["llmc/cpu/kernels.h does not define no_such_kernel",
                  "main does not reach attention_block_forward (llmc/cpu/gpt2_cpu.h)"],
          "control: a chain that skips train_step and gpt2_forward, and a kernel that does not exist, are "
          "reported (%s)" % ctl)
    bad_cites, n_cites = stale_citations(ROOT)
    check(n_cites >= 250 and bad_cites == [], "code and docs cite doc sections by heading text, and every cited heading "
          "exists (%d citations; stale: %s)" % (n_cites, bad_cites[:8]))
    ctl, _ = stale_citations(ROOT, {"x.c": '/* doc/formats.md "Header", "No such heading"; doc/methods.md 3.9;\n'
                                           ' doc/nothing.md "Header"; doc/methods.md\n * 2.6, doc/formats.md\n'
                                           ' * "Nor this" */\nprintf("doc/formats.md \'Token shards\'");\n',
                                    "x.md": 'as `doc/formats.md` 4 says, and `doc/formats.md` "Not here"; '
                                            '`doc/formats.md` "Token shards" holds\n'})
    check(sorted(w for _, _, w in ctl) == ["a section cited by number"] * 3 + ["no such doc"] + ["no such heading"] * 3,
          "control: a cited heading that is missing, a doc that is missing and a number are reported, "
          "across a comment's line break too, in code and in Markdown; a heading in single quotes is found (%s)"
          % ctl)
    return finish()


# The first commit held to the subject rule (one line of at most 72 characters; detail in the
# body); the history before it is left as it was written.
SUBJECT_RULE_FROM = "15c5d61"


def commit_subjects_over(limit):
    """The subjects longer than `limit` of the commits after SUBJECT_RULE_FROM, or None without git."""
    import subprocess
    try:
        out = subprocess.run(["git", "-C", ROOT, "log", "--format=%h %s", SUBJECT_RULE_FROM + "..HEAD"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [line for line in out.stdout.splitlines() if len(line.split(" ", 1)[-1]) > limit]


def map_rows(text):
    """The rows of test/README.md's table: (module paths, tests named), a bare module name
    continuing the folder of the path before it; flags quoted in the tests column are left out."""
    rows = []
    for row in re.findall(r"^\| (`[^|]+) \| ([^\n]+) \|$", text, re.M):
        folder, mods = "", []
        for name in re.findall(r"`([^`]+)`", row[0]):
            if "/" in name:
                folder = os.path.dirname(name)
                mods.append(name)
            else:
                mods.append(folder + "/" + name)
        rows.append((mods, [n for n in re.findall(r"`([^`]+)`", row[1]) if not n.startswith("-")]))
    return rows


# How a test's name may say how it tests its module: finite differences, device code emulated on
# the CPU, GPU host code run on the CPU (test/README.md).
TEST_QUALIFIERS = ("_fd", "_emul", "_host")


def misnamed_rows(text):
    """The rows whose first test is not named after one of the row's modules, as (test, modules):
    test_<name>.<ext> where name, or name less one qualifier, is a module's file stem, the package's
    name for an __init__.py, or the last part of the one sub-folder of llmc/ (a module of
    doc/design.md's table) that holds every file of the row."""
    bad = []
    for mods, tests in map_rows(text):
        names = {os.path.basename(os.path.dirname(m)) if os.path.basename(m) == "__init__.py"
                 else os.path.basename(m).split(".")[0] for m in mods}
        folders = {os.path.dirname(m) for m in mods}
        if len(folders) == 1 and "/" in next(iter(folders)) and next(iter(folders)) in ALLOWED:
            names.add(os.path.basename(next(iter(folders))))
        first = os.path.basename(tests[0]) if tests else ""
        stem = first[len("test_"):].split(".")[0] if first.startswith("test_") else None
        stems = {stem} | {stem[:-len(q)] for q in TEST_QUALIFIERS if stem and stem.endswith(q)}
        if stem is None or not stems & names:
            bad.append((first, mods))
    return bad


def test_map_gaps():
    """test/README.md's table: the module files no row names and the tests named that are not
    there (a test/ file, a suite name of test/suites.d, a path from the root, or build/X built from
    test/X.c)."""
    text = open(os.path.join(ROOT, "test", "README.md")).read()
    suites = set()
    for f in os.listdir(os.path.join(ROOT, "test", "suites.d")):
        for line in open(os.path.join(ROOT, "test", "suites.d", f)):
            if "|" in line and not line.startswith("#"):
                suites.add(line.split("|")[0].strip())
    mapped, missing, rows = set(), [], 0
    for mods, tests in map_rows(text):
        rows += 1
        mapped.update(mods)
        for name in tests:
            if name.startswith("build/"):  # a built test program: its source in test/
                name = "test/" + name[len("build/"):] + ".c"
            ok = os.path.exists(os.path.join(ROOT, name)) if "/" in name else \
                os.path.exists(os.path.join(ROOT, "test", name)) or name in suites
            if not ok:
                missing.append(name)
    files = []
    for top in ("llmc", "kinds", "sd_attention", "prism"):
        for base, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d not in ("schedules",)]
            files += [os.path.relpath(os.path.join(base, n), ROOT) for n in names
                      if n.endswith(SOURCE_EXT + (".py",))]
    return sorted(f for f in files if f not in mapped), missing, rows


def kind_vocabulary():
    """The kinds' names other than the framework's mha (kinds/registry.h), the flags of their
    options (KIND_FLAG in the method folders) and their slot names (KindSlot)."""
    words = set(n for n in registry_rows().get("kinds/registry.h", []) if n != "mha")
    flags, slots = set(), set()
    for folder in ALLOWED:
        if folder.split("/")[0] in ("llmc", "kinds"):
            continue
        for f in os.listdir(os.path.join(ROOT, folder)):
            if f.endswith(SOURCE_EXT):
                text = open(os.path.join(ROOT, folder, f), errors="replace").read()
                flags.update(re.findall(r'\.cli\s*=\s*KIND_FLAG\(\s*\w+\s*,\s*"(-[A-Za-z0-9_]+)"', text))
                slots.update(re.findall(r'KindSlot\s+\w+\s*=\s*\{\s*\w+\s*,\s*"(\w+)"', text))
    return words, flags, slots


COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def kind_names_in(text, words, flags, slots):
    """The kind-specific names in C code: identifiers with a kind's name as one of their
    underscore-separated words, a kind's flag or slot name in a string; comments are skipped."""
    found, strings = [], []

    def blank(m):
        if m.group(0).startswith(("//", "/*")):
            return " "
        strings.append(m.group(0)[1:-1])
        return " "
    code = COMMENT_OR_STRING.sub(blank, text)
    for ident in re.findall(r"[A-Za-z_]\w*", code):
        parts = [p.lower() for p in ident.split("_") if p]
        if any(p in slots for p in parts) or (len(parts) > 1 and any(p in words for p in parts)):
            found.append(ident)
    for st in strings:
        found += [f for f in flags if re.search(r"(^|[^\w-])%s\b" % re.escape(f), st)]
        found += [w for w in slots if re.search(r"\b%s\b" % re.escape(w), st)]
    return found


def registry_rows():
    """The kind names of each registry table's rows, in order: {file: [name, ...]}."""
    out = {}
    for f in ("kinds/registry.h", "kinds/registry_cpu.h", "kinds/registry_gpu.cu"):
        text = open(os.path.join(ROOT, f)).read()
        body = re.search(r"_KINDS\[\] = \{(.*?)\n\};", text, re.S)
        out[f] = re.findall(r'\{"([a-z_]+)",', body.group(1)) if body else []
    return out


def reading_path_stale(design):
    """The paths and names of design.md's "Where to start reading" that are not there: each
    numbered step's backticked paths must exist, and each backticked identifier must occur in one
    of that step's files."""
    start = design.index("## Where to start reading")
    section = design[start:design.index("\n## ", start + 3)]
    stale = []
    for step in re.split(r"\n(?=\d+\. )", section)[1:]:
        names = re.findall(r"`([^`]+)`", step)
        paths = [n for n in names if "/" in n or re.search(r"\.(py|c|h|cu|cuh|md)$", n)]
        stale += [p for p in paths if not os.path.exists(os.path.join(ROOT, p))]
        texts = [open(os.path.join(ROOT, p)).read() for p in paths
                 if os.path.isfile(os.path.join(ROOT, p)) and not p.endswith(".md")]
        for n in names:
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) and texts and \
                    not any(re.search(r"\b%s\b" % n, t) for t in texts):
                stale.append(n)
    return stale


# A citation of a doc section from code: doc/NAME.md followed by one or more quoted heading texts
# ("..." or '...', separated by ", "). A heading's text is what follows its number, whole or cut
# at its first " (", ": " or ", " (doc/design.md "Citing the docs"). Numbers alone are not stable.
CITE = re.compile(r"""(doc/[\w/]+\.md)`?,?\s+(?:[*#]\s+|//\s*)?((?:(["'])[^"'\n]+\3(?:, )?)+)""")
NUMBERED = re.compile(r"doc/[\w/]+\.md`?,?\s+(?:[*#]|//)?\s*(?:§ ?|sections? )?\d+(?:\.\d+)*\b(?!\.\w|%| ?[x×])")
CODE_EXT = SOURCE_EXT + (".cuh", ".py", ".sh", ".mk")


def heading_keys(path):
    """The texts by which the headings of a Markdown file may be cited."""
    keys = set()
    for line in open(path, errors="replace"):
        h = re.match(r"^#{1,6} (?:\d+(?:\.\d+)* )?(.+?)\s*$", line)
        if h:
            keys.add(h.group(1))
            keys.add(re.split(r" \(|: |, ", h.group(1))[0])
    return keys


def stale_citations(root, texts=None):
    """(file, citation, why) for each citation of a heading its doc lacks, of a doc that does not
    exist, or of a section by number. texts: {rel: text} in place of the repository's code files."""
    if texts is None:
        texts = {}
        for base, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("build", "out", "cudnn-frontend", "data")]
            for f in files:
                rel = os.path.relpath(os.path.join(base, f), root)
                if (f.endswith(CODE_EXT + (".md",)) or f == "Makefile") and rel != "test/test_layout.py":  # its control
                    texts[rel] = open(os.path.join(root, rel), errors="replace").read()
    bad, cache = [], {}
    for rel, text in sorted(texts.items()):
        for m in NUMBERED.finditer(text):
            bad.append((rel, m.group(0), "a section cited by number"))
        for m in CITE.finditer(text):
            doc = m.group(1)
            if doc not in cache:
                full = os.path.join(root, doc)
                cache[doc] = heading_keys(full) if os.path.exists(full) else None
            if cache[doc] is None:
                bad.append((rel, doc, "no such doc"))
                continue
            for title in re.findall(r"""(["'])([^"'\n]+)\1""", m.group(2)):
                if title[1] not in cache[doc]:
                    bad.append((rel, '%s "%s"' % (doc, title[1]), "no such heading"))
    return bad, sum(len(CITE.findall(t)) for t in texts.values())


def symbol_body(text, name):
    """The body of a C/CUDA definition of `name` in text: a function's braces, a table's or a
    constant's initializer, or a macro's line; None if text does not define it."""
    for m in re.finditer(r"\b%s\s*\(" % re.escape(name), text):
        head = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if not re.fullmatch(r"[\w \t\*]*", head) or re.search(r"\breturn\b", head) or not head.strip():
            continue
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        rest = text[i:i + 200].lstrip()
        if rest.startswith("{"):
            return balanced(text, text.index("{", i))
    m = re.search(r"\b%s\s*(?:\[[^\]]*\])?\s*=\s*\{" % re.escape(name), text)
    if m:
        return balanced(text, m.end() - 1)
    m = re.search(r"^#\s*define\s+%s\b(.*)$" % re.escape(name), text, re.M)
    return m.group(1) if m else None


def balanced(text, open_at):
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at:i + 1]
    return text[open_at:]


def chain_rows(design):
    """design.md's "How many files a layer takes": (layer, count, [(file, [symbols])])."""
    sec = design[design.index("**How many files a layer takes.**"):]
    sec = sec[:sec.index("\n\n", sec.index("| layer |"))]
    rows = []
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].isdigit():
            continue
        steps = [(f, re.findall(r"`([^`]+)`", syms)) for f, syms in
                 re.findall(r"`([\w./]+\.(?:c|h|cu|cuh|cpp))`(?: \(([^)]*)\))?", cells[2])]
        rows.append((cells[0], int(cells[1]), steps))
    return rows


def chain_gaps(root, steps):
    """What breaks a row's chain: a file that does not exist or names nothing, a symbol its file
    does not define, or one that the row's first symbol (main) does not reach through the bodies
    of the symbols listed (so the row skips a step between them)."""
    gaps, bodies = [], {}
    for f, syms in steps:
        path = os.path.join(root, f)
        if not os.path.exists(path):
            gaps.append("%s: no such file" % f)
            continue
        if not syms:
            gaps.append("%s: names nothing to read" % f)
        text = open(path, errors="replace").read()
        for sym in syms:
            body = symbol_body(text, sym)
            if body is None:
                gaps.append("%s does not define %s" % (f, sym))
            else:
                bodies[(f, sym)] = body
    order = [k for f, syms in steps for k in [(f, x) for x in syms] if k in bodies]
    reached, grew = set(order[:1]), True
    while grew:
        grew = False
        for k in order:
            if k not in reached and any(re.search(r"\b%s\b" % re.escape(k[1]), bodies[r]) for r in reached):
                reached.add(k)
                grew = True
    gaps += ["%s does not reach %s (%s)" % (order[0][1], k[1], k[0]) for k in order if k not in reached]
    return gaps

if __name__ == "__main__":
    sys.exit(main())
