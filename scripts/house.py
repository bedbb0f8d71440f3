#!/usr/bin/env python3
"""The house rules the compiler does not check, checked: no circle of
imports between the modules of one crate, and no function over 120 lines.

    python3 scripts/house.py check            # both rules; exit 1 on a breach
                                              # (circles listed in scripts/house-debts.txt excepted)
    python3 scripts/house.py cycles [CRATE]   # the circles, with the imports behind each edge
    python3 scripts/house.py dot CRATE        # the crate's module imports as Graphviz DOT
    python3 scripts/house.py lengths [N]      # functions over N lines (default 120)

A module here is a source file: inline modules belong to their file, and
`#[cfg(test)]` items are left out (tests are not architecture). An edge
A -> B means code in A names an item that B defines; a path through a
re-export (`pub use`, or a parent's private `use` that its children
see) is followed to the module that defines the item, so a facade
`mod.rs` that only re-exports is never the far end of an edge. The
re-export itself is an edge from the facade to the definer.

The scan reads Rust lexically (comments and literals blanked, braces
matched), which is enough for this code base's plain `use` trees and
paths; macros that build paths out of tokens are not followed.
"""

import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 120


def blank(src):
    """The source with comments, strings and char literals replaced by
    spaces (newlines kept), so that braces and paths can be matched."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.|\\x[0-9a-fA-F]{2}|\\u\{[0-9a-fA-F]+\}|[^\\'])'", src[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def close_brace(text, open_at):
    """The index just past the brace that closes the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def item_end(text, start):
    """The end of the item that starts at `start`: its closing brace, or
    the `;` that ends it when that comes before any brace."""
    j = start
    while j < len(text) and text[j] not in "{;":
        j += 1
    if j < len(text) and text[j] == "{":
        return close_brace(text, j)
    return j + 1


def strip_tests(text):
    """The text with `#[cfg(test)]` items blanked."""
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", text))):
        end = item_end(text, m.end())
        text = text[: m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]) + text[end:]
    return text


class Crate:
    """One crate's file modules, what each defines and re-exports, and
    the imports between them."""

    def __init__(self, name, src_dir):
        self.name = name
        self.modules = {}  # path tuple -> file
        self.children = defaultdict(set)  # path -> child names (incl. inline)
        self.inline = {}  # inline module path -> file module path
        self.inline_texts = {}  # inline module path -> its body
        self.defs = defaultdict(set)  # file module -> item names
        self.reexports = defaultdict(dict)  # file module -> name -> full path
        self.globs = defaultdict(list)  # file module -> glob source paths
        self.texts = {}
        for root in ("lib.rs", "main.rs"):
            f = os.path.join(src_dir, root)
            if os.path.exists(f):
                self._load((), f, src_dir)

    def _load(self, path, file, dir_for_children):
        self.modules[path] = file
        text = strip_tests(blank(open(file, encoding="utf-8").read()))
        self.texts[path] = text
        self._scan_mods(path, path, text, file, dir_for_children)

    def _scan_mods(self, file_mod, path, text, file, child_dir):
        depth = 0
        i = 0
        while i < len(text):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif depth == 0:
                m = re.match(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])", text[i:])
                if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                    name = m.group(1)
                    self.children[path].add(name)
                    if m.group(2) == ";":
                        base = os.path.join(child_dir, name)
                        f = base + ".rs" if os.path.exists(base + ".rs") else os.path.join(base, "mod.rs")
                        if os.path.exists(f):
                            self._load(path + (name,), f, base)
                        i += m.end()
                        continue
                    open_at = i + m.end() - 1
                    end = close_brace(text, open_at)
                    self.inline[path + (name,)] = file_mod
                    self.inline_texts[path + (name,)] = text[open_at + 1:end - 1]
                    self._scan_mods(file_mod, path + (name,), text[open_at + 1:end - 1], file,
                                    os.path.join(child_dir, name))
                    i = end
                    continue
            i += 1

    def file_of(self, path):
        """The file module that holds module `path`."""
        if path in self.modules:
            return path
        return self.inline.get(path)

    def is_module(self, path):
        return path in self.modules or path in self.inline


def use_trees(text):
    """Every `use` declaration's paths, expanded: (is_pub, [segments])."""
    out = []
    for m in re.finditer(r"(?<![\w:])(pub(?:\([^)]*\))?\s+)?use\s+([^;]*);", text):
        for p in expand(m.group(2).replace("\n", " ")):
            out.append((bool(m.group(1)) and "(" not in (m.group(1) or ""), p))
    return out


def expand(tree):
    tree = tree.strip()
    if not tree:
        return []
    if "{" not in tree:
        tree = re.sub(r"\s+as\s+\w+$", "", tree)
        return [[s.strip() for s in tree.split("::") if s.strip()]]
    open_at = tree.index("{")
    prefix = [s.strip() for s in tree[:open_at].split("::") if s.strip()]
    inner = tree[open_at + 1:tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        for sub in expand(p):
            out.append(prefix + sub)
    return out


ITEM = re.compile(
    r"(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|const\s+|async\s+|extern\s+\"?\w*\"?\s*)*"
    r"(fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+(\w+)"
)


def scopes(crate):
    """Each module's own text, file or inline, with its inline children's
    bodies blanked: `super` and `self` in an inline module are relative to
    that module, not to its file."""
    out = []
    for path, text in list(crate.texts.items()) + list(crate.inline_texts.items()):
        for child, body in crate.inline_texts.items():
            if child[:-1] == path and body.strip():
                text = text.replace(body, " ")
        out.append((path, text))
    return out


def analyse(crate):
    """The edges between file modules, each with one example of the import."""
    # What each file module defines, and what it re-exports (an inline
    # module's items and imports count as its file's).
    for here, text in scopes(crate):
        path = crate.file_of(here) or here
        for m in ITEM.finditer(text):
            crate.defs[path].add(m.group(2))
        # Every `use` counts, not only `pub use`: a module's private
        # imports are visible to its children.
        for _, segs in use_trees(text):
            if not segs:
                continue
            full = absolute(crate, here, segs)
            if not full:
                continue
            if full[-1] == "*":
                crate.globs[path].append(full[:-1])
            elif full[-1] == "self":
                crate.reexports[path][full[-2]] = full[:-1]
            else:
                crate.reexports[path][full[-1]] = full
    edges = defaultdict(set)
    for path, text in scopes(crate):
        refs = []
        for _, segs in use_trees(text):
            full = absolute(crate, path, segs)
            if full:
                refs.append(full)
        # Paths in code: crate::a::b, super::a, self::a, and child::x.
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self|\w+)(?:\s*::\s*\w+)+)", text):
            segs = [s.strip() for s in m.group(1).split("::")]
            full = absolute(crate, path, segs, strict=True)
            if full:
                refs.append(full)
        for full in refs:
            for target in resolve(crate, full, set()):
                src = crate.file_of(path) or path
                if target != src:
                    edges[(src, target)].add("::".join(full))
    return edges


def absolute(crate, here, segs, strict=False):
    """The crate-absolute path a `use` or code path names, or None when it
    leaves the crate (or, with `strict`, when its head is no local module)."""
    segs = list(segs)
    if segs[0] == "crate":
        return tuple(segs[1:])
    base = list(module_of(crate, here))
    if segs[0] in ("self", "super"):
        while segs and segs[0] in ("self", "super"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        return tuple(base + segs)
    if tuple(base + [segs[0]]) in crate.modules or tuple(base + [segs[0]]) in crate.inline:
        return tuple(base + segs)
    return None


def module_of(crate, path):
    return path


def resolve(crate, full, seen):
    """The file modules that define what `full` names, following
    re-exports; a path that names a module resolves to nothing (naming a
    module is no use of its items)."""
    full = tuple(full)
    if full in seen:
        return set()
    seen.add(full)
    # The longest prefix that is a module.
    k = len(full)
    while k > 0 and not crate.is_module(full[:k]):
        k -= 1
    mod = full[:k]
    rest = full[k:]
    if not rest or rest[0] in ("*", "self"):
        return set()
    name = rest[0]
    fmod = crate.file_of(mod)
    if fmod is None:
        return set()
    if name in crate.reexports.get(fmod, {}) and name not in crate.defs.get(fmod, set()):
        return resolve(crate, crate.reexports[fmod][name] + rest[1:], seen) or {fmod}
    if name in crate.defs.get(fmod, set()):
        return {fmod}
    for g in crate.globs.get(fmod, []):
        r = resolve(crate, tuple(g) + rest, seen)
        if r:
            return r
    return {fmod}


def sccs(nodes, edges):
    """Tarjan's strongly connected components of size two or more."""
    adj = defaultdict(list)
    for a, b in edges:
        adj[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
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

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def crates(only=None):
    base = os.path.join(ROOT, "crates")
    for name in sorted(os.listdir(base)):
        src = os.path.join(base, name, "src")
        if os.path.isdir(src) and (only is None or name == only):
            yield Crate(name, src)


def show(path):
    return "::".join(path) or "(root)"


DEBTS = os.path.join(ROOT, "scripts", "house-debts.txt")


def debts():
    """The circles the house knowingly carries (scripts/house-debts.txt:
    one line per circle, `crate: module, module, ...`, `#` comments), so
    that `check` fails on a new circle or a grown one, never on a listed
    debt. Paying one off means deleting its line."""
    out = set()
    if os.path.exists(DEBTS):
        for line in open(DEBTS, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                crate, members = line.split(":", 1)
                out.add((crate.strip(), frozenset(m.strip() for m in members.split(","))))
    return out


def cmd_cycles(only=None, quiet=False, allowed=frozenset()):
    found = 0
    for crate in crates(only):
        edges = analyse(crate)
        for comp in sccs(list(crate.modules), edges):
            names = [show(p) for p in comp]
            if (crate.name, frozenset(names)) in allowed:
                print(f"{crate.name}: known circle of {len(comp)} (scripts/house-debts.txt): {', '.join(names)}")
                continue
            found += 1
            print(f"{crate.name}: circle of {len(comp)}: {', '.join(names)}")
            if quiet:
                continue
            members = set(comp)
            for (a, b), why in sorted(edges.items()):
                if a in members and b in members:
                    print(f"    {show(a)} -> {show(b)}   ({', '.join(sorted(why)[:3])})")
    return found


def cmd_dot(only):
    for crate in crates(only):
        edges = analyse(crate)
        print(f'digraph "{crate.name}" {{\n  rankdir=LR; node [shape=box, fontsize=10];')
        for p in crate.modules:
            print(f'  "{show(p)}";')
        for a, b in sorted(edges):
            print(f'  "{show(a)}" -> "{show(b)}";')
        print("}")


FN = re.compile(r"(?<![\w])fn\s+(\w+)")


def long_functions(limit):
    """(lines, file, line, name) of every function body over `limit` lines."""
    out = []
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, "crates")):
        dirnames[:] = [d for d in dirnames if d != "target"]
        for f in files:
            if not f.endswith(".rs"):
                continue
            file = os.path.join(dirpath, f)
            text = blank(open(file, encoding="utf-8").read())
            for m in FN.finditer(text):
                j = m.end()
                while j < len(text) and text[j] not in "{;":
                    j += 1
                if j >= len(text) or text[j] == ";":
                    continue
                end = close_brace(text, j)
                first = text.count("\n", 0, m.start()) + 1
                last = text.count("\n", 0, end) + 1
                if last - first + 1 > limit:
                    out.append((last - first + 1, os.path.relpath(file, ROOT), first, m.group(1)))
    return sorted(out, reverse=True)


def cmd_lengths(limit):
    found = long_functions(limit)
    for n, file, line, name in found:
        print(f"{file}:{line}: fn {name} is {n} lines")
    return len(found)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else "check"
    if cmd == "cycles":
        return 1 if cmd_cycles(argv[2] if len(argv) > 2 else None) else 0
    if cmd == "dot":
        cmd_dot(argv[2] if len(argv) > 2 else None)
        return 0
    if cmd == "lengths":
        return 1 if cmd_lengths(int(argv[2]) if len(argv) > 2 else LIMIT) else 0
    if cmd == "check":
        circles = cmd_cycles(quiet=True, allowed=debts())
        long = cmd_lengths(LIMIT)
        print(f"house: {circles} new circle(s) inside crates, {long} function(s) over {LIMIT} lines")
        return 1 if circles or long else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
