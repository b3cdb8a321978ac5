"""skipped_is_77.py - a pytest plugin: a run whose every test skipped is a skip.

pytest exits 0 when every test it ran was skipped, and meson counts that as
a pass: a file that could not test anything (no facility, a mis-wired path)
would read as green.  With this plugin such a run exits 77, which meson
reports as SKIP, and the last lines name each reason.  A run with at least
one test passed or failed keeps pytest's own exit status; a run that
collected nothing keeps it too (pytest's 5).

conftest.py loads it for tests/integration; tests/integration/test_harness.py
checks it on small files of its own.
"""

SKIP_EXIT = 77

_outcomes = {"passed": 0, "failed": 0, "skipped": 0}
_reasons = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _outcomes["passed"] += 1
    elif report.failed:
        _outcomes["failed"] += 1
    elif report.skipped:
        _outcomes["skipped"] += 1
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if reason not in _reasons:
            _reasons.append(reason)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus != 0 or _outcomes["skipped"] == 0:
        return
    if _outcomes["passed"] or _outcomes["failed"]:
        return
    session.exitstatus = SKIP_EXIT


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _outcomes["skipped"] and not (_outcomes["passed"] or _outcomes["failed"]):
        terminalreporter.write_line(
            f"every test skipped ({_outcomes['skipped']}): exit {SKIP_EXIT}, a skip for meson")
        for r in _reasons:
            terminalreporter.write_line(f"  skipped: {r}")
