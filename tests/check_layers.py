#!/usr/bin/python3
"""check_layers.py - every folder includes only what docs/design.md's folder
map allows (TAP output; exit 1 on a breach).

    check_layers.py SOURCE_ROOT

Each `#include "x.h"` of a C file is resolved to the repository header it
names (the including file's own folder first) and its folder checked
against the rules below.  System headers (<...>) and the generated
config.h are not checked.
"""
import os
import re
import sys

# folder of the including file -> folders whose headers it may include
RULES = {
    "proto": {"proto"},
    "client": {"client", "proto"},
    "daemon": {"daemon", "daemon/worker", "proto"},
    # the worker runs in its own process: of daemon/, only the two headers
    # both processes share (SHARED below), never the main process's
    "daemon/worker": {"daemon/worker", "proto"},
    "kernels": {"kernels", "kernels/cpu", "kernels/cuda"},
    "kernels/cpu": {"kernels", "kernels/cpu"},
    "kernels/cuda": {"kernels", "kernels/cuda"},
    "python/ext": {"python/ext", "client:ringfeed.h"},
    "tools": {"tools", "proto", "client:ringfeed.h",
              # ctlconn.c compiles client/env.c's socket rule in, so the tools
              # find the daemon exactly where libringfeed does (one copy)
              "client:client.h"},
    "examples": {"examples", "kernels", "client:ringfeed.h"},
}
SHARED = {"daemon/worker": {"daemon/wire.h", "daemon/log.h"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def headers(root):
    by_name = {}
    for folder, _, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        if rel.startswith(("build", ".git", "tests", "bench")):
            continue
        for f in files:
            if f.endswith(".h"):
                by_name.setdefault(f, []).append(os.path.join(rel, f))
    return by_name


def main():
    root = sys.argv[1]
    by_name = headers(root)
    n = bad = 0
    for folder in sorted(RULES):
        allowed = RULES[folder]
        path = os.path.join(root, folder)
        for f in sorted(os.listdir(path)):
            if not f.endswith((".c", ".h", ".cu")):
                continue
            src = os.path.join(folder, f)
            with open(os.path.join(root, src)) as fh:
                text = fh.read()
            breaches = []
            for inc in INCLUDE.findall(text):
                name = os.path.basename(inc)
                if name == "config.h" or name not in by_name:
                    continue
                cands = by_name[name]
                here = [c for c in cands if os.path.dirname(c) == folder]
                target = (here or cands)[0]
                tdir = os.path.dirname(target)
                ok = (tdir in allowed or f"{tdir}:{name}" in allowed or
                      target in SHARED.get(folder, ()))
                if not ok:
                    breaches.append(target)
            n += 1
            if breaches:
                bad += 1
                print(f"not ok {n} - {src} includes {', '.join(breaches)}, outside "
                      f"{', '.join(sorted(allowed))}")
            else:
                print(f"ok {n} - {src}")
    print(f"1..{n}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
