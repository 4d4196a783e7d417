#!/usr/bin/env python3
"""The import graph of the crate's modules: layers only look down.

For every crate of the repository (the library in src/, each tool in bin/ and tools/bin/, the
Python extension in python/src/), reads every `.rs` file and collects the module paths it names: `use` trees and
every `crate::`, `super::`, `self::` path, and paths that start at a child module the file
declares (`mod x;` then `x::f()`). Re-exports are followed to the module that defines the name
(`crate::Error` is `crate::error`). Comments and string literals are ignored.

Three rules, checked on that graph:

1. No circles. At every level of the module tree, the children of one module (each with
   everything below it) import each other without a circle: no module imports one that imports
   it back, directly or around a loop. The parent's own file (`mod.rs`, `lib.rs`) is the face
   of its folder, not one of the siblings: its children may use what it defines, it calls into
   them and re-exports them.
2. Forbidden pairs (FORBIDDEN): `solvers` and `precond` never import each other.
3. Floors (FLOORS, the library only): a top-level module imports only modules on its own floor
   or below. A module missing from the table fails the check until it is given a floor.
4. Maps (MAPS): the maps a reader meets name the library's modules as FLOORS does: the floor
   table of ARCHITECTURE.md floor by floor, the `src/` line of README.md's layout floor by floor
   (floors separated by `;`), and the module table of `src/lib.rs`'s docs every public module
   (in floor order; a private module is named by what it exports, `input` by `load`).

Problems the redesign has not fixed yet are listed in ALLOWED, each by the first line the check
prints for it; the check fails when a listed problem is gone, so that the list shrinks to empty.

Usage:  python3 .ci/import_graph.py [--graph] [REPOSITORY]   (default: the one it is in)
`--graph` prints the top-level import graph of the library. Exit status 0 when every rule
holds, 1 otherwise (each violation printed with the files and lines that make it).
"""

import os
import re
import sys
from collections import defaultdict

# ---------------------------------------------------------------------------------------------
# The rules (table-driven: edit these when the layout changes)
# ---------------------------------------------------------------------------------------------

# The library's floors, lowest first. A top-level module of `src/` may import modules of its own
# floor or a lower one; modules on one floor must not form a circle (rule 1).
FLOORS = [
    ["error", "units", "scalar"],
    ["memory"],
    ["gpu"],
    ["csr"],
    ["io", "generate"],
    ["input"],
    ["primitives"],
    ["backend"],
    ["spmv", "tridiag", "spmm"],
    ["sparse"],
    ["solvers", "precond"],
    ["dist", "batched", "autosolve"],
    ["kernel_registry"],
]

# Pairs of top-level modules of the library that never import each other (either way).
FORBIDDEN = [("solvers", "precond")]

# Problems still present, each as the first line the check prints for it (a circle names its
# members sorted, as module paths below the crate root). Remove a line when it is fixed; the
# check fails while a listed problem no longer occurs.
ALLOWED = []

# ---------------------------------------------------------------------------------------------
# Reading Rust source
# ---------------------------------------------------------------------------------------------

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The text with comments, string and char literals replaced by spaces (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 260]) if c in "rb" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases and globs dropped)."""
    tree = re.sub(r"\s+", "", tree)
    res = []

    def walk(prefix, s):
        # split s at top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            k = p.find("{")
            if k >= 0:
                head = p[:k].rstrip(":")
                walk(prefix + ([head] if head else []), p[k + 1:p.rindex("}")])
            else:
                p = p.split("as")[0] if re.search(r"as[A-Za-z_]", p) and "::" not in p.split("as")[-1] else p
                segs = [x for x in p.split("::") if x]
                segs = [x for x in segs if x != "*"]
                if segs == ["self"]:
                    segs = []
                res.append("::".join(prefix + segs))

    walk([], tree)
    return res


class File:
    def __init__(self, crate, modpath, path, is_dir_mod):
        self.crate = crate
        self.modpath = modpath  # tuple of segments below the crate root
        self.path = path
        self.is_dir_mod = is_dir_mod  # lib.rs / main.rs / mod.rs: children live beside it
        self.children = set()  # child modules declared with `mod x;`
        self.refs = []  # (line, current module path, path segments, is_pub_use)
        self.reexports = {}  # (module path, name) -> path segments


USE_RE = re.compile(r"\b(pub(\([^)]*\))?\s+)?use\s+([^;]+);")
MOD_RE = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")
PATH_RE = re.compile(r"(?<![A-Za-z0-9_:])(\$?" + IDENT + r")((?:\s*::\s*" + IDENT + r")+)")
KEYWORDS = {"std", "core", "alloc"}


def scan(f, text):
    text = strip(text)
    # Inline modules: spans (start, end, name) of `mod name { ... }`.
    spans = []
    for m in MOD_RE.finditer(text):
        if m.group(2) == ";":
            # `mod x;` at the file level (an inline module's `mod x;` would need its own folder).
            f.children.add(m.group(1))
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        spans.append((m.start(), j, m.group(1)))

    def module_at(pos):
        p = list(f.modpath)
        for s, e, name in sorted(spans):
            if s <= pos < e:
                p.append(name)
        return tuple(p)

    def line_of(pos):
        return text.count("\n", 0, pos) + 1

    used = []
    for m in USE_RE.finditer(text):
        is_pub = bool(m.group(1))
        cur = module_at(m.start())
        for p in expand_use(m.group(3)):
            segs = p.split("::")
            if segs and segs[0] and segs[0] not in KEYWORDS:
                f.refs.append((line_of(m.start()), cur, segs, is_pub))
                if is_pub and len(segs) > 1:
                    f.reexports[(cur, segs[-1])] = (cur, segs)
        used.append((m.start(), m.end()))

    def in_use(pos):
        return any(s <= pos < e for s, e in used)

    for m in PATH_RE.finditer(text):
        if in_use(m.start()):
            continue
        head = m.group(1).lstrip("$")
        segs = [head] + [s.strip() for s in m.group(2).split("::") if s.strip()]
        f.refs.append((line_of(m.start()), module_at(m.start()), segs, False))


def crate_files(crate, root_file):
    """Every file of the crate rooted at root_file: {modpath: File}."""
    files = {}

    def visit(path, modpath, is_dir_mod):
        f = File(crate, modpath, path, is_dir_mod)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        scan(f, text)
        files[modpath] = f
        base = os.path.dirname(path) if is_dir_mod else os.path.splitext(path)[0]
        # `#[path = "..."] mod x;`
        for m in re.finditer(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(' + IDENT + r")\s*;", text):
            p = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
            visit(p, modpath + (m.group(2),), False)
            f.children.discard(m.group(2))
        for c in sorted(f.children):
            a, b = os.path.join(base, c + ".rs"), os.path.join(base, c, "mod.rs")
            if os.path.exists(a):
                visit(a, modpath + (c,), False)
            elif os.path.exists(b):
                visit(b, modpath + (c,), True)

    visit(root_file, (), True)
    return files


def resolve(files, cur, segs, depth=0):
    """The module path (a key of `files`, possibly an inline module inside one) a path names,
    or None for a path outside the crate."""
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        base, rest = (), segs[1:]
    elif head in ("super", "self"):
        base = list(cur)
        rest = list(segs)
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                if not base:
                    return None
                base.pop()
            rest = rest[1:]
        base = tuple(base)
    else:
        # A path relative to the current module: only a child module declared here, or an inline
        # one, or a name this module imported from a child (`use x::y; y::z`).
        fm = owner(files, cur)
        if fm is None:
            return None
        declared = files[fm].children | {m[len(cur)] for m in inline_modules(files, cur)}
        if head not in declared:
            return None
        base, rest = cur, segs
    p = list(base)
    for s in rest:
        q = tuple(p + [s])
        if q in files or q in INLINE:
            p.append(s)
            continue
        # A re-exported name of module p.
        fm = owner(files, tuple(p))
        if fm is not None and depth < 8:
            rx = files[fm].reexports.get((tuple(p), s))
            if rx is not None:
                r = resolve(files, rx[0], rx[1], depth + 1)
                if r is not None:
                    return r
        break
    return tuple(p)


INLINE = set()


def inline_modules(files, cur):
    return [m for m in INLINE if len(m) == len(cur) + 1 and m[:len(cur)] == cur]


def owner(files, modpath):
    """The file key that holds modpath (itself, or the file of an inline module)."""
    p = tuple(modpath)
    while p not in files:
        if not p:
            return None
        p = p[:-1]
    return p


def find_cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def name(p):
    return "::".join(p) if p else "(root)"


# Rule 4: where the maps are and how a module is named in them.
MAPS = {
    "architecture": ("ARCHITECTURE.md", "## Floors"),
    "readme": ("README.md", "- `src/` the library"),
    "lib": ("src/lib.rs", "//! | module | what it holds |"),
}
# A private module named in lib.rs's table by what it exports.
LIB_NAMES = {"input": "load"}


def map_floors(which):
    """The floors a map names, lowest first, as lists of module names (None: map not found)."""
    path, anchor = MAPS[which]
    if not os.path.exists(path):
        return None
    text = open(path, encoding="utf-8").read()
    at = text.find(anchor)
    if at < 0:
        return None
    lines = text[at:].split("\n")
    names = lambda t: [m for m in re.findall(r"`([a-z_]+)`", t)]
    if which == "architecture":
        rows = []
        for ln in lines[1:]:
            m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", ln)
            if m:
                rows.append(names(m.group(2)))
            elif rows and not ln.startswith("|"):
                break
        return rows
    if which == "readme":
        block = [lines[0]]
        for ln in lines[1:]:
            if not ln.startswith("  "):
                break
            block.append(ln)
        body = " ".join(block).split(":", 1)[1]
        body = re.sub(r"\([^)]*\)", "", body)  # asides such as (`segsparse::load`, ...)
        return [names(part) for part in body.split(";") if names(part)]
    rows = []
    for ln in lines[1:]:
        if not ln.startswith("//! |"):
            break
        first = ln.split("|")[1]
        got = re.findall(r"\[`([a-z_]+)`\]", first)
        if got:
            rows.append(got)
    return rows


def check_maps(fail):
    """Rule 4: every map names the modules of FLOORS, floor by floor."""
    public = set(re.findall(r"(?m)^pub mod ([a-z_]+);", open("src/lib.rs").read()))
    for which in ("architecture", "readme", "lib"):
        got = map_floors(which)
        path = MAPS[which][0]
        if got is None:
            fail(f"maps: {path} has no module map (looked for `{MAPS[which][1]}`)")
            continue
        if which == "lib":
            want = [[LIB_NAMES.get(m, m) for m in ms if m in public or m in LIB_NAMES]
                    for ms in FLOORS]
        else:
            want = FLOORS
        if [sorted(f) for f in got] != [sorted(f) for f in want if f]:
            fail(f"maps: {path} names the floors {got}, FLOORS says {[f for f in want if f]}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(os.path.normpath(root))
    crates = [("segsparse", "src/lib.rs")]
    for tools in ("bin", "tools/bin"):
        for d in sorted(os.listdir(tools)) if os.path.isdir(tools) else []:
            if os.path.exists(f"{tools}/{d}/main.rs"):
                crates.append((f"{tools}/{d}", f"{tools}/{d}/main.rs"))
    if os.path.exists("python/src/lib.rs"):
        crates.append(("python", "python/src/lib.rs"))

    failures = []
    seen_allowed = set()
    allowed = set(ALLOWED)

    def fail(key, detail=""):
        if key in allowed:
            seen_allowed.add(key)
        else:
            failures.append(key + detail)

    for crate, rootfile in crates:
        files = crate_files(crate, rootfile)
        # Inline modules (`mod gpu { ... }`): known from the refs made inside them.
        INLINE.clear()
        for f in files.values():
            for _, cur, _, _ in f.refs:
                for k in range(len(f.modpath) + 1, len(cur) + 1):
                    INLINE.add(cur[:k])
        # Edges between module paths (source file's module, target module), with where.
        edges = []  # (src modpath, dst modpath, file, line, is face)
        for f in files.values():
            for line, cur, segs, is_pub in f.refs:
                dst = resolve(files, cur, segs)
                if dst is None:
                    continue
                src = cur
                # A parent's `pub use` of its own descendants is its face, not an import.
                if is_pub and dst[:len(f.modpath)] == f.modpath:
                    continue
                edges.append((src, dst, f.path, line))

        # Rule 1: at every module, its children (with their subtrees) and its own file.
        parents = {p for p in files if files[p].is_dir_mod} | set(files)
        for parent in sorted(parents):
            g = defaultdict(set)
            where = defaultdict(list)
            nodes = set()
            for src, dst, path, line in edges:
                if src[:len(parent)] != parent or dst[:len(parent)] != parent:
                    continue

                # The module's own file is the face of its folder: its children may use what it
                # defines, and it calls into them. Only siblings are compared.
                if len(src) == len(parent) or len(dst) == len(parent):
                    continue
                a, b = src[:len(parent) + 1], dst[:len(parent) + 1]
                if a == b:
                    continue
                nodes.update([a, b])
                g[a].add(b)
                if f"{path}:{line}" not in where[(a, b)]:
                    where[(a, b)].append(f"{path}:{line}")
            for comp in find_cycles(nodes, g):
                lines = [""]
                cs = set(comp)
                for (a, b), ws in sorted(where.items()):
                    if a in cs and b in cs:
                        lines.append(f"    {name(a)} -> {name(b)}: {', '.join(ws[:4])}"
                                     + (f" (+{len(ws) - 4} more)" if len(ws) > 4 else ""))
                fail(f"{crate}: circle {' <-> '.join(name(c) for c in comp)}", "\n".join(lines))

        if crate != "segsparse":
            continue
        top = defaultdict(lambda: defaultdict(list))
        for src, dst, path, line in edges:
            if src and dst and src[0] != dst[0]:
                if f"{path}:{line}" not in top[src[0]][dst[0]]:
                    top[src[0]][dst[0]].append(f"{path}:{line}")
        modules = sorted({p[0] for p in files if p})
        # Rule 2.
        for a, b in FORBIDDEN:
            for x, y in ((a, b), (b, a)):
                if y in top.get(x, {}):
                    fail(f"{crate}: {x} imports {y} (forbidden both ways)",
                         ": " + ", ".join(top[x][y][:6]))
        # Rule 3.
        floor = {m: i for i, ms in enumerate(FLOORS) for m in ms}
        for m in modules:
            if m not in floor:
                fail(f"{crate}: top-level module `{m}` has no floor in FLOORS")
        for x in sorted(top):
            for y in sorted(top[x]):
                if x in floor and y in floor and floor[y] > floor[x]:
                    fail(f"{crate}: {x} (floor {floor[x]}) imports {y} (floor {floor[y]}), "
                         "a higher floor", ": " + ", ".join(top[x][y][:6]))
        if "--graph" in sys.argv:
            for x in sorted(top):
                print(f"{x:16} -> " + ", ".join(f"{y}({len(top[x][y])})" for y in sorted(top[x])))

    check_maps(fail)
    for key in sorted(allowed - seen_allowed):
        failures.append(f"fixed, remove it from ALLOWED: {key}")
    if failures:
        print("import graph: %d problem(s)\n" % len(failures))
        print("\n\n".join(failures))
        return 1
    print(f"import graph: {len(crates)} crates, no circle, no forbidden import, floors hold, "
          "maps agree"
          + (f" ({len(allowed)} known problems allowed)" if allowed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
