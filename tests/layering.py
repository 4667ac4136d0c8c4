#!/usr/bin/env python3
"""Checks that the C files of each directory given call each other without
cycles, and, where the directory declares its layers, only downwards.

For every directory: which .c file defines each non-static function (and each
non-static object, such as a table of function pointers), and which other .c
files of the same directory name it. Naming a function of another file, to
call it or to take its address, makes the naming file depend on the defining
one. A cycle between files is reported with the functions that make it.

A directory's files are those in its subfolders too, named by their path
below it ("tensor/view.c"), except the subfolders that declare layers of
their own (a library apart, such as core/io, is checked as its own
directory). So core/ is one graph, and a cycle across its folders is caught.

A static inline function of a header counts as part of every file that names
it: what its body names is named by that file too, so that an inline helper
cannot hide a call up the layers or round a circle.

A directory declares its layers in a comment of any of its .h files (those
directly in it), one layer a line, lowest first:

     * layer 1: runtime/error.c runtime/memory.c
     * layer 2: runtime/config.c

(glob patterns allowed: "tensor/[a-z]*.c"; "/*" cannot stand in a C comment). A file may then name only functions of its own or of
lower layers, and every .c file must have a layer.

Usage: layering.py DIR...   exits 0 when every directory is clean, 1 otherwise.
"""
import fnmatch
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")
LAYER = re.compile(r"^\s*\*?\s*layer\s+(\d+)\s*:\s*(.*?)\s*(\*/)?\s*$")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else",
            "case", "goto", "typedef", "struct", "union", "enum"}


def strip(text):
    """The text without comments, string and character literals, or
    preprocessor lines; newlines kept so that line numbers stay right."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j) or " ")
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def definitions(code):
    """Names of the non-static functions and objects defined at file scope."""
    names = set()
    depth = 0
    start = 0  # where the current file-scope declaration began
    i = 0
    while i < len(code):
        c = code[i]
        if c == "{":
            if depth == 0:
                decl = code[start:i]
                m = re.search(r"([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*"
                              r"(?:__attribute__\s*\(\(.*\)\)\s*)?$", decl, re.S)
                words = set(IDENT.findall(decl))
                if m and "=" not in decl and m.group(1) not in KEYWORDS:
                    if "static" not in words:
                        names.add(m.group(1))
                elif "=" in decl and "static" not in words and "typedef" not in words:
                    m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*=\s*$", decl)
                    if m:
                        names.add(m.group(1))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif c == ";" and depth == 0:
            decl = code[start:i]
            words = set(IDENT.findall(decl))
            if "=" in decl and not words & {"static", "typedef", "extern"}:
                m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*=", decl)
                if m:
                    names.add(m.group(1))
            start = i + 1
        i += 1
    return names


def layers_of(directory):
    layers = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".h"):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            for line in f:
                m = LAYER.match(line)
                if m:
                    layers.append((int(m.group(1)), m.group(2).split()))
    return layers


def sources(directory):
    """The .c and .h files of the directory and of its subfolders that keep
    no layer list of their own, as paths relative to it."""
    found = []
    for root, dirs, names in os.walk(directory):
        if root != directory and layers_of(root):
            dirs[:] = []
            continue
        dirs.sort()
        rel = os.path.relpath(root, directory)
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                found.append(name if rel == "." else os.path.join(rel, name))
    return found


def inline_bodies(code):
    """The static inline functions defined in a header: name -> the names
    their bodies use."""
    bodies = {}
    for m in re.finditer(r"\bstatic\s+inline\b[^;{}]*?([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", code):
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        bodies[m.group(1)] = set(IDENT.findall(code[m.end():i]))
    return bodies


def rank(layers, filename):
    for number, patterns in layers:
        if any(fnmatch.fnmatch(filename, p) for p in patterns):
            return number
    return None


def check(directory):
    everything = sources(directory)
    files = [f for f in everything if f.endswith(".c")]
    code, defined_in, inlines = {}, {}, {}
    problems = []
    for f in everything:
        with open(os.path.join(directory, f), encoding="utf-8") as fh:
            text = strip(fh.read())
        if f.endswith(".h"):
            inlines.update(inline_bodies(text))
            continue
        code[f] = text
        for name in definitions(code[f]):
            if name in defined_in:
                problems.append("%s and %s both define %s" % (defined_in[name], f, name))
            defined_in[name] = f
    # uses[a][b]: the names of b's that a names, itself or through the
    # bodies of the inline functions it names (followed to any depth)
    uses = {f: {} for f in files}
    for f in files:
        named, todo = set(), set(IDENT.findall(code[f]))
        while todo:
            name = todo.pop()
            if name in named:
                continue
            named.add(name)
            todo |= inlines.get(name, set()) - named
        for name in named:
            owner = defined_in.get(name)
            if owner and owner != f:
                uses[f].setdefault(owner, set()).add(name)

    layers = layers_of(directory)
    if layers:
        for f in files:
            if rank(layers, f) is None:
                problems.append("%s has no layer: add it to the layer list in %s/*.h"
                                % (f, directory))
        for f in files:
            for g, names in sorted(uses[f].items()):
                rf, rg = rank(layers, f), rank(layers, g)
                if rf is not None and rg is not None and rg > rf:
                    problems.append("%s (layer %d) calls up into %s (layer %d): %s"
                                    % (f, rf, g, rg, ", ".join(sorted(names))))

    # Cycles: Tarjan's strongly connected components.
    index, low, stack, on_stack, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in uses[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for f in files:
        if f not in index:
            visit(f)
    for scc in sccs:
        edges = ["  %s -> %s: %s" % (a, b, ", ".join(sorted(uses[a][b])))
                 for a in scc for b in scc if b in uses[a]]
        problems.append("cycle between %s:\n%s" % (", ".join(scc), "\n".join(edges)))

    for p in problems:
        print("%s: %s" % (directory, p))
    nedges = sum(len(u) for u in uses.values())
    if not problems:
        print("ok: %s: %d files, %d dependencies between them, no cycle%s"
              % (directory, len(files), nedges, ", layers kept" if layers else ""))
    return not problems


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    ok = True
    for d in argv[1:]:
        if not os.path.isdir(d):
            print("%s: not a directory" % d)
            ok = False
            continue
        ok = check(d.rstrip("/")) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
