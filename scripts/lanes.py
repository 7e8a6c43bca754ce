#!/usr/bin/python3
"""lanes.py BUILD — checks that each file keeps to its lane (issue 42).

Every source file of the libraries and of the CLI sits in a lane, by its
folder; a lane may use the lanes below it, never the ones above:

    base   the leaf helpers every lane shares (BASE below: status, dtypes,
           half floats, memory): they call and include nothing above them
    cpu    src/cpu: the SIMD kernels and their job structs
    core   src/*.c, src/*.h: libropeattn (rope, attention, caches, layers)
    io     src/io: files (safetensors, .npy, JSON)       (above core)
    hf     src/hf: config.json, model families, checkpoints (above io)
    mpi    src/mpi: libropeattn_mpi                      (above core)
    tools  tools/: the user's CLI                        (above the libraries)
    dev    bench/, dev/: the developers' programs        (above tools)

include/*.h, the public headers, are no lane's: anyone includes them.

The graph has two kinds of edges, between files:
  calls     A -> B when an object file A leaves a function undefined (`nm`)
            that object file B defines; a call through a pointer (the
            kernels' dispatch table, src/cpu/dispatch.c) is no edge
  includes  A -> B for each `#include "B"`

It fails, naming the files, on
  (a) a call circle (a strongly connected component of the calls) whose
      files are in more than one lane;
  (b) a file that includes a private header of a lane not below its own;
  (c) a file of tools/ that includes a private header at all (but those
      of tools/ itself): the CLI is on the public API;
  (d) a call circle inside a lane that KEEP_APART says must stay broken;
  (e) a call from a file to a file of a lane not below its own (the
      kernels calling the core, say).
Other call circles inside a lane are printed, not failed.

Prints "lanes: N passed, N failed" last (one check per rule); exit 1 when
anything failed.  Takes about a second (`nm` over every object file).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The leaf helpers, lane "base": below cpu (and so below everything).
BASE = {"src/half.h", "src/internal.h", "src/quant8.h", "src/memory.h", "src/fault.h",
        "src/status.c", "src/dtype.c", "src/quant8.c", "src/memory.c", "src/fault.c"}

# lane -> the lanes it may use
BELOW = {
    "base": set(),
    "cpu": {"base"},
    "core": {"base", "cpu"},
    "io": {"base", "cpu", "core"},
    "hf": {"base", "cpu", "core", "io"},
    "mpi": {"base", "cpu", "core"},
    "tools": {"base", "cpu", "core", "io", "hf", "mpi"},
    "dev": {"base", "cpu", "core", "io", "hf", "mpi", "tools"},
}

# (d): pairs of files of one lane that once called each other and must not
# again: one of them calls the other, never back.  Latent attention is a
# layer kind of its own files: the layer calls it, and what both call is in
# layer_common.c (and layer_tape.h).
KEEP_APART = [("src/layer.c", "src/layer_mla.c"),
              ("src/layer_train.c", "src/layer_mla_backward.c")]


def lane(path):
    """The lane of a file (relative to ROOT), or None (public, tests...)."""
    if path in BASE:
        return "base"
    folder = os.path.dirname(path)
    return {"src/cpu": "cpu", "src": "core", "src/io": "io", "src/hf": "hf",
            "src/mpi": "mpi", "tools": "tools", "tools/mpi": "tools",
            "bench": "dev", "bench/mpi": "dev", "dev": "dev"}.get(folder)


def sources():
    """Every .c and .h file in a lane."""
    for folder in ("src", "src/cpu", "src/io", "src/hf", "src/mpi", "tools",
                   "tools/mpi", "bench", "bench/mpi", "dev"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith((".c", ".h")):
                yield folder + "/" + name


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    """The files path includes with "", found as the compiler finds them
    (its own folder, then -Isrc -Iinclude -Itools)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    for name in INCLUDE.findall(text):
        for folder in (os.path.dirname(path), "src", "include", "tools"):
            found = os.path.normpath(os.path.join(folder, name))
            if os.path.exists(os.path.join(ROOT, found)):
                yield found
                break


def calls(build):
    """{A: {B, ...}}: object A calls a function object B defines (sources'
    paths).  Only the objects of lane files that the build made."""
    objects = {}
    for path in sources():
        obj = os.path.join(build, "obj", path[:-2] + ".o")
        if path.endswith(".c") and os.path.exists(obj):
            objects[obj] = path
    if not objects:
        sys.exit(f"lanes.py: no object files under {build}/obj: build first")
    out = subprocess.run(["nm", "-A"] + sorted(objects), check=True,
                         capture_output=True, text=True).stdout
    defined, wanted = {}, {}
    for line in out.splitlines():  # "build/obj/src/x.o: 0000 T name" or "...:  U name"
        obj, _, rest = line.partition(":")
        fields = rest.split()
        kind, symbol = fields[-2], fields[-1]
        if kind == "T":
            defined.setdefault(symbol, set()).add(objects[obj])
        elif kind == "U":
            wanted.setdefault(objects[obj], set()).add(symbol)
    graph = {path: set() for path in objects.values()}
    for path, symbols in wanted.items():
        for symbol in symbols:
            graph[path] |= defined.get(symbol, set()) - {path}
    return graph


def circles(graph):
    """The strongly connected components of more than one file (Tarjan's
    algorithm, iterative), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def show(component, graph):
    """A circle's calls, one file a line: "a.c -> b.c, c.c"."""
    members = set(component)
    return "".join(f"\n    {a} ({lane(a)}) -> {', '.join(sorted(graph[a] & members))}"
                   for a in component)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    graph = calls(build)
    failures = {"a": [], "b": [], "c": [], "d": [], "e": []}
    inside = []
    for component in circles(graph):
        lanes = sorted({lane(p) for p in component})
        if len(lanes) > 1:
            failures["a"].append(f"a call circle across lanes {', '.join(lanes)}:"
                                 + show(component, graph))
        else:
            inside.append(component)
            for a, b in KEEP_APART:
                if a in component and b in component:
                    failures["d"].append(f"{a} and {b} call each other again:"
                                         + show(component, graph))
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if lane(b) != lane(a) and lane(b) not in BELOW[lane(a)]:
                failures["e"].append(f"{a} ({lane(a)}) calls {b} ({lane(b)})")
    for path in sources():
        for header in includes(path):
            mine, theirs = lane(path), lane(header)
            if theirs is None or theirs == mine:
                continue
            if theirs not in BELOW[mine]:
                failures["b"].append(f"{path} ({mine}) includes {header} ({theirs})")
            if mine == "tools":
                failures["c"].append(f"{path} includes the private header {header}")
    for component in inside:
        print(f"note: a call circle inside lane {lane(component[0])}:" + show(component, graph))
    rules = {"a": "no call circle crosses a lane",
             "b": "no file includes a private header of a lane above its own",
             "c": "tools/ includes public headers only",
             "d": "the call circles broken stay broken",
             "e": "no call goes up a lane"}
    passed = failed = 0
    for rule, what in rules.items():
        if failures[rule]:
            failed += 1
            print(f"FAIL ({rule}) {what}:")
            for line in sorted(set(failures[rule])):
                print("  " + line)
        else:
            passed += 1
            print(f"ok ({rule}) {what}")
    print(f"lanes: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
