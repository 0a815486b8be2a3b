#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The library's layers point down only. Reads the layer order from the zt_layer() calls in
CMakeLists.txt (zt_layer(<folder> BELOW <folder>...)) and checks every #include "..." in the
library's folders: a file may include its own folder, the folders below it (transitively) and
the public header ztier.h. Prints each upward or sideways include and exits 1 if there is one.
The build refuses the same includes (each layer's include path shows only the layers below
it); this check also reads files a build leaves out (a backend not configured).
usage: check-layers.py [ROOT]"""
import os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
below = {}
for m in re.finditer(r"^zt_layer\((\w+)(?:\s+BELOW\s+([\w ]+))?\)", open(os.path.join(root, "CMakeLists.txt")).read(), re.M):
    below[m.group(1)] = (m.group(2) or "").split()
if not below:
    sys.exit("check-layers: no zt_layer() calls in CMakeLists.txt")

def reach(layer, seen=None):
    seen = set() if seen is None else seen
    for b in below[layer]:
        if b not in seen:
            seen.add(b)
            reach(b, seen)
    return seen

allowed = {layer: reach(layer) | {layer} for layer in below}
bad = 0
for layer in below:
    for d, _, files in os.walk(os.path.join(root, layer)):
        for f in sorted(files):
            if not f.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            for n, line in enumerate(open(path, errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or m.group(1) == "ztier.h":
                    continue
                inc = m.group(1)
                if inc.startswith("."): # relative to the including file
                    inc = os.path.relpath(os.path.normpath(os.path.join(d, inc)), root)
                top = inc.split("/")[0] if "/" in inc else layer # "x.h": its own folder
                if top in below and top not in allowed[layer]:
                    print(f"{rel}:{n}: includes \"{inc}\": {top}/ is not below {layer}/ "
                          f"(layers below {layer}/: {', '.join(sorted(reach(layer))) or 'none'})")
                    bad += 1
if bad:
    print(f"check-layers: {bad} include(s) against the layer order in CMakeLists.txt")
    sys.exit(1)
print(f"check-layers: {len(below)} layers, every include points down")
