"""tap.py - TAP lines for ringfeed's Python unit tests (as tests/tap.h is
for the C ones): ok() prints one "ok N - name" or "not ok N - name" with
its diagnostics, done() prints the plan and gives the exit status."""
import sys

_n = 0
_failed = 0


def ok(cond, name, diag=None):
    """Reports one check; diag (any object) is printed under a failure."""
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
    print(f"{'' if cond else 'not '}ok {_n} - {name}")
    if not cond and diag is not None:
        for line in str(diag).splitlines():
            print(f"#   {line}")
    sys.stdout.flush()
    return bool(cond)


def done():
    """Prints the plan; returns 1 if any check failed, else 0."""
    print(f"1..{_n}")
    return 1 if _failed else 0
