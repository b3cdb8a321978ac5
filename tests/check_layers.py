#!/usr/bin/python3
"""check_layers.py - every folder includes only what docs/design/folders.md's include
table allows (TAP output; exit 1 on a breach or when the table is missing).

    check_layers.py SOURCE_ROOT

The rules live in one place: the table under "Includes, folder by folder" in
docs/design/folders.md, one row per folder, whose second column lists what the
folder's files may include: a folder (every header in it) or one header
(`folder/name.h`).  Each `#include "x.h"` of a C file is resolved to the
repository header it names (the including file's own folder first) and
checked against its folder's row.  System headers (<...>) and the generated
config.h are not checked.  There are no exemptions: a header two folders
share lives where both rows name it.
"""
import os
import re
import sys

RULES_FILE = "docs/design/folders.md"
TABLE_TITLE = "## Includes, folder by folder"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CELL = re.compile(r"`([^`]+)`")


def read_rules(root):
    """{folder: set of folders and folder/header.h} from docs/design/folders.md."""
    with open(os.path.join(root, RULES_FILE)) as f:
        text = f.read()
    at = text.find(TABLE_TITLE)
    if at < 0:
        raise SystemExit(f"Bail out! docs/design/folders.md has no '{TABLE_TITLE}' table")
    rules = {}
    for line in text[at:].splitlines()[1:]:
        if rules and not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or set(cells[0]) <= set("-: "):
            continue
        folder = CELL.findall(cells[0])
        allowed = CELL.findall(cells[1])
        if len(folder) != 1 or not allowed:
            continue
        rules[folder[0]] = set(allowed)
    if not rules:
        raise SystemExit("Bail out! docs/design/folders.md's include table has no rows")
    return rules


def headers(root):
    by_name = {}
    for folder, _, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        if rel.startswith(("build", ".git", "tests", "bench")):
            continue
        for f in files:
            if f.endswith(".h"):
                by_name.setdefault(f, []).append(os.path.normpath(os.path.join(rel, f)))
    return by_name


def main():
    root = sys.argv[1]
    rules = read_rules(root)
    by_name = headers(root)
    n = bad = 0
    for folder in sorted(rules):
        allowed = rules[folder]
        path = os.path.join(root, folder)
        n += 1
        if not os.path.isdir(path):
            bad += 1
            print(f"not ok {n} - {folder}: the include table names a folder that does not exist")
            continue
        print(f"ok {n} - {folder} exists")
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
                if os.path.dirname(target) not in allowed and target not in allowed:
                    breaches.append(target)
            n += 1
            if breaches:
                bad += 1
                print(f"not ok {n} - {src} includes {', '.join(breaches)}, outside "
                      f"{', '.join(sorted(allowed))}")
            else:
                print(f"ok {n} - {src}")
    # every folder holding C code has a row: a new folder is a new decision
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        if rel == "." or rel.split(os.sep)[0] in ("tests", "bench", "build") or rel.startswith("."):
            continue
        if any(f.endswith((".c", ".h", ".cu")) for f in files) and rel not in rules:
            n += 1
            bad += 1
            print(f"not ok {n} - {rel} holds C code but has no row in docs/design/folders.md's include table")
    print(f"1..{n}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
