#!/usr/bin/python3
"""check_exports.py - libringfeed.so exports exactly the functions that
client/ringfeed.h declares, each under the RINGFEED_ version node, and no
other symbol (proto/'s rf_err_* and the client_ internals stay local).

    check_exports.py LIBRINGFEED.so RINGFEED.H      (prints TAP)
"""
import re
import subprocess
import sys


def main():
    lib, header = sys.argv[1], sys.argv[2]
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    declared = set(re.findall(r"\b(rf_[a-z_]+)\s*\(", text))
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    exported, unversioned = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] == "A":
            continue
        name, _, version = parts[2].partition("@")
        exported.add(name)
        if not version.lstrip("@").startswith("RINGFEED_"):
            unversioned.add(name)
    checks = [
        (len(declared) >= 9, f"ringfeed.h declares {len(declared)} rf_ functions"),
        (not (exported - declared), "nothing exported beyond ringfeed.h: "
         + (" ".join(sorted(exported - declared)) or "ok")),
        (not (declared - exported), "every ringfeed.h function exported: "
         + (" ".join(sorted(declared - exported)) or "ok")),
        (not unversioned, "every export carries a RINGFEED_ version: "
         + (" ".join(sorted(unversioned)) or "ok")),
    ]
    for i, (ok, name) in enumerate(checks, 1):
        print(f"{'' if ok else 'not '}ok {i} - {name}")
    print(f"1..{len(checks)}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
