"""METRICS for operators, end to end (docs/operating.md, Metrics; daemon/stats.c).

  1. A live daemon with clients attached: ringfeed_build_info, the two
     daemon-wide histograms (cumulative buckets 10 us .. 10 s, +Inf equal to
     _count, production counted once per published batch), client series
     labelled by dataset/name/rank/world with two attaches of one name
     added up into one series, ringfeed_client_info one per attach; and
     `promtool check metrics` on that text.
  2. The alert rules pass `promtool check rules`, and every metric that a
     PromQL expression of the rules or of the Grafana dashboard names is
     one the live daemon writes.
  3. `ringfeedctl metrics --output FILE`: the file written whole by
     rename, nothing left behind, the old file kept when the daemon is gone.
  4. The metrics service and timer are installed and `systemd-analyze
     verify` has nothing to say about them.
promtool and systemd-analyze missing skip their parts (scripts/install-deps
installs both).
"""
import json
import os
import re
import shutil
import stat
import subprocess

import pytest

from conftest import attach_held, ctl, ctl_tool, raw_request, ringfeedd, run_read, wait_for
from test_service import parse_prometheus, install_root, find_installed

SRC = os.path.join(os.path.dirname(__file__), "..", "..")
RULES = os.path.join(SRC, "contrib", "prometheus", "ringfeed-alerts.yml")
DASHBOARD = os.path.join(SRC, "contrib", "grafana", "ringfeed.json")
LE = ["1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
      "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"]
HISTOGRAMS = ("ringfeed_client_wait_seconds", "ringfeed_batch_production_seconds")
CLIENT_LABELS = {"dataset", "name", "rank", "world", "uid"}
WAIT = 30.0


def metrics_text(sock):
    reply = raw_request(sock, b"METRICS\n").decode()
    head, _, body = reply.partition("\n")
    m = re.fullmatch(r"OK (\d+)", head)
    assert m and int(m.group(1)) == body.count("\n"), head
    return body


def sample_names(fams):
    """Every series name written: families, and a histogram's _bucket,
    _sum and _count."""
    names = set()
    for name, fam in fams.items():
        names.add(name)
        if fam["type"] == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
    return names


def histogram(text, name):
    """(le -> cumulative count, sum, count) of one histogram, in order."""
    buckets = [(m.group(1), float(m.group(2))) for m in
               re.finditer(rf'^{name}_bucket{{le="([^"]+)"}} (\S+)$', text, re.M)]
    s = re.search(rf"^{name}_sum (\S+)$", text, re.M)
    c = re.search(rf"^{name}_count (\S+)$", text, re.M)
    assert s and c, name
    return buckets, float(s.group(1)), float(c.group(1))


def promtool():
    path = shutil.which("promtool") or ("/usr/local/bin/promtool"
                                        if os.access("/usr/local/bin/promtool", os.X_OK) else None)
    if not path:
        pytest.skip("promtool is not installed (scripts/install-deps installs it)")
    return path


@pytest.fixture
def live(daemon_factory, packed_fmnist):
    """A daemon that has served a whole epoch to a reader that detached,
    with three clients attached now: two of name "dup" (rank 0 of 1) and
    one "solo" (rank 1 of 2), each ring full."""
    d = daemon_factory({"fmnist": packed_fmnist["test"]}, workers=2)
    run_read(d.sock, "fmnist", batch=100, epochs=1)
    held = [attach_held(d.sock, b"ATTACH dataset=fmnist batch=50 depth=4 name=dup\n"),
            attach_held(d.sock, b"ATTACH dataset=fmnist batch=50 depth=4 name=dup\n"),
            attach_held(d.sock, b"ATTACH dataset=fmnist batch=50 depth=4 name=solo rank=1 "
                                b"world=2\n")]
    try:
        # 4 batches per held ring (the reader's count is no guide: the daemon
        # publishes up to a ring's depth past the last batch a reader takes)
        def filled():
            per = [int(v) for k, v in d.stats().items()
                   if k.startswith("clients.") and k.endswith(".batches")]
            return len(per) == 3 and all(n == 4 for n in per)
        wait_for(filled, "the three rings to fill")
        yield d
    finally:
        for c in held:
            c.close()


def test_live_metrics(live):
    text = metrics_text(live.sock)
    fams = parse_prometheus(text)

    # the build, by version (ringfeed_info is gone)
    assert "ringfeed_info" not in fams
    (labels, v), = fams["ringfeed_build_info"]["samples"]
    assert v == 1 and re.fullmatch(r"\d+\.\d+\.\d+.*", labels["version"]), labels
    assert labels["io_backend"], labels

    # the histograms: cumulative, the buckets docs/operating.md names, +Inf = _count
    for name in HISTOGRAMS:
        assert fams[name]["type"] == "histogram", name
        buckets, total, count = histogram(text, name)
        assert [le for le, _ in buckets] == LE, buckets
        values = [n for _, n in buckets]
        assert values == sorted(values), (name, values)
        assert values[-1] == count and count > 0 and total > 0, (name, values, count, total)
    _, prod_sum, prod_count = histogram(text, "ringfeed_batch_production_seconds")
    batches = fams["ringfeed_batches_total"]["samples"][0][1]
    assert prod_count == batches, "every published batch is one production observation"
    # each held client waited once, for its first batch; the reader many times
    _, _, waits = histogram(text, "ringfeed_client_wait_seconds")
    assert waits >= 4, waits

    # client series: by dataset/name/rank/world, the two "dup" attaches as one
    for name, fam in fams.items():
        if name.startswith("ringfeed_client_") and name != "ringfeed_client_info" and \
                fam["type"] != "histogram":
            keys = [tuple(sorted(lbl.items())) for lbl, _ in fam["samples"]]
            assert len(keys) == 2, (name, keys)
            for lbl, _ in fam["samples"]:
                assert set(lbl) == CLIENT_LABELS, (name, lbl)

    def series(name, who):
        (v,) = [v for lbl, v in fams[name]["samples"] if lbl["name"] == who]
        return v
    me = str(os.getuid())
    dup = {"dataset": "fmnist", "name": "dup", "rank": "0", "world": "1", "uid": me}
    assert {"dataset": "fmnist", "name": "solo", "rank": "1", "world": "2", "uid": me} in \
        [lbl for lbl, _ in fams["ringfeed_client_batches_total"]["samples"]]
    assert dup in [lbl for lbl, _ in fams["ringfeed_client_batches_total"]["samples"]]
    assert series("ringfeed_client_batches_total", "dup") == 8       # 2 rings of depth 4
    assert series("ringfeed_client_batches_total", "solo") == 4
    assert series("ringfeed_client_ready_batches", "dup") == 8
    assert series("ringfeed_client_ring_bytes", "dup") == 2 * series("ringfeed_client_ring_bytes",
                                                                    "solo")
    assert series("ringfeed_client_waits_total", "dup") == 2         # the first batch each
    assert series("ringfeed_client_failed", "dup") == 0
    assert 0 < series("ringfeed_client_production_seconds_total", "dup") <= prod_sum

    # the attach id only on the info metric, one sample per attach
    info = fams["ringfeed_client_info"]["samples"]
    assert len(info) == 3 and len({lbl["id"] for lbl, _ in info}) == 3, info
    assert sorted(lbl["name"] for lbl, _ in info) == ["dup", "dup", "solo"]
    assert all(lbl["batch"] == "50" and lbl["depth"] == "4" for lbl, _ in info), info
    # who each one is: SO_PEERCRED's uid and pid, the unit from /proc ("-" where none)
    assert all(lbl["uid"] == str(os.getuid()) for lbl, _ in info), info
    assert all(int(lbl["pid"]) > 0 and lbl["unit"] for lbl, _ in info), info

    # promtool reads it as the exposition format, with nothing to complain of
    r = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr


# ---- 2. rules and dashboard -----------------------------------------------------------

# PromQL words that are not metric names
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset", "inf", "nan"}
# names from node_exporter itself, not from METRICS: the textfile collector's
# own series about ringfeed.prom
NOT_RINGFEED = {"node_textfile_mtime_seconds"}


def rule_exprs(path):
    """The expr: of every rule, inline or a folded block (>- or |)."""
    lines, out = open(path).read().split("\n"), []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if not m:
            continue
        if m.group(2) not in (">-", ">", "|", "|-"):
            out.append(m.group(2))
            continue
        block, indent = [], len(m.group(1))
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            block.append(nxt.strip())
        out.append(" ".join(block))
    return out


def dashboard_exprs(path):
    with open(path) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"]
              if isinstance(v.get("query"), dict)]
    return exprs


def metric_names(expr):
    """Metric names a PromQL expression reads: identifiers that are not a
    function (followed by "("), a keyword, a label name in a matcher or a
    grouping, a string, a duration or a Grafana variable."""
    e = re.sub(r'"(\\.|[^"\\])*"', '""', expr)          # strings
    e = re.sub(r"\$\{?\w+\}?", "", e)                      # Grafana variables
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                       # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\b\d[\w.]*", "", e)                       # numbers
    e = re.sub(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,[^)]*\)", r"\1", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word, rest = m.group(0), e[m.end():].lstrip()
        if rest.startswith("(") or word in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def test_rules_and_dashboard_name_live_metrics(live):
    r = subprocess.run([promtool(), "check", "rules", RULES], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout, r.stdout

    live_names = sample_names(parse_prometheus(metrics_text(live.sock)))
    rules, panels = rule_exprs(RULES), dashboard_exprs(DASHBOARD)
    assert len(rules) >= 8 and len(panels) >= 10, (rules, panels)
    used = set()
    for expr in rules + panels:
        names = metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        used |= names
        missing = names - live_names - NOT_RINGFEED
        assert not missing, f"{expr!r} names {sorted(missing)}, not in METRICS"
    # what the task names is there: alerts and panels on each
    for name in ("ringfeed_build_info", "ringfeed_workers_respawn_loop",
                 "ringfeed_datasets_failed_total", "ringfeed_errors_bad_samples_total",
                 "ringfeed_client_wait_seconds_bucket", "ringfeed_memory_budget_bytes",
                 "ringfeed_batch_production_seconds_bucket", "ringfeed_workers_deaths_total",
                 "ringfeed_workers_alive", "ringfeed_memory_rings_bytes",
                 "ringfeed_samples_total"):
        assert name in used, name
    # the extractor itself: functions, labels and variables are not names
    assert metric_names('histogram_quantile(0.99, sum by (le, instance) '
                        '(rate(a_bucket{instance=~"$instance",le!="x"}[$__rate_interval])))'
                        ' > 0.5 unless on (instance) b') == {"a_bucket", "b"}


def test_rules_unit_tests():
    """promtool test rules: every alert fires in its case and stays quiet in
    the other (contrib/prometheus/ringfeed-alerts.test.yml)."""
    tests = os.path.join(os.path.dirname(RULES), "ringfeed-alerts.test.yml")
    r = subprocess.run([promtool(), "test", "rules", os.path.basename(tests)],
                       cwd=os.path.dirname(tests), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    print(r.stdout)
    # every alert of the rules has a case
    with open(RULES) as f:
        alerts = set(re.findall(r"^\s*- alert: (\w+)$", f.read(), re.M))
    with open(tests) as f:
        tested = set(re.findall(r"^\s*alertname: (\w+)$", f.read(), re.M))
    assert alerts and alerts <= tested, sorted(alerts - tested)


def test_daemon_name_labels_every_sample(daemon_factory, packed_fmnist):
    """name = / --name: every sample carries daemon="NAME", so two daemons
    on one node (ringfeedd@NAME.service) stay apart; without it, none."""
    d = daemon_factory({"fmnist": packed_fmnist["test"]}, workers=1, extra=["--name", "gpu0"])
    fams = parse_prometheus(metrics_text(d.sock))
    samples = [lbl for f in fams.values() for lbl, _ in f["samples"]]
    assert len(samples) > 50 and all(lbl.get("daemon") == "gpu0" for lbl in samples), \
        [lbl for lbl in samples if lbl.get("daemon") != "gpu0"][:5]
    d2 = daemon_factory({"fmnist": packed_fmnist["test"]}, workers=1)
    fams = parse_prometheus(metrics_text(d2.sock))
    assert not any("daemon" in lbl for f in fams.values() for lbl, _ in f["samples"])
    bad = subprocess.run([ringfeedd(), "--name", "-x", "--check-config"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "--name -x" in bad.stderr, bad


# ---- 3. ringfeedctl metrics --output ----------------------------------------------------

def test_ctl_output_file(daemon_factory, packed_fmnist):
    d = daemon_factory({"fmnist": packed_fmnist["test"]}, workers=1)
    out = os.path.join(d.dir, "textfile", "ringfeed.prom")
    os.makedirs(os.path.dirname(out))
    r = ctl(d.sock, "metrics", "--output", out)
    assert r.stdout == "" and r.stderr == "", r
    with open(out) as f:
        first = f.read()
    fams = parse_prometheus(first)
    assert "ringfeed_build_info" in fams and "ringfeed_client_wait_seconds" in fams
    assert stat.S_IMODE(os.stat(out).st_mode) & 0o444 == 0o444, "readable by the collector"
    assert os.listdir(os.path.dirname(out)) == ["ringfeed.prom"], "no FILE.tmp left"
    ino = os.stat(out).st_ino

    # --output=FILE and --json: replaced by rename (a new inode), never rewritten in place
    r = ctl(d.sock, "--json", "metrics", f"--output={out}")
    with open(out) as f:
        assert any(k.startswith("ringfeed_build_info{") for k in json.load(f)["metrics"])
    assert os.stat(out).st_ino != ino
    assert os.listdir(os.path.dirname(out)) == ["ringfeed.prom"]

    # the daemon unreachable: exit 1, FILE as it was, no FILE.tmp
    ctl(d.sock, "metrics", "--output", out)
    with open(out) as f:
        before = f.read()
    bad = subprocess.run([ctl_tool(), "--socket", os.path.join(d.dir, "nobody.sock"), "metrics",
                          "--output", out], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and bad.stderr, bad
    with open(out) as f:
        assert f.read() == before
    assert os.listdir(os.path.dirname(out)) == ["ringfeed.prom"]
    # a folder that cannot be written: exit 1 with the file named
    bad = subprocess.run([ctl_tool(), "--socket", d.sock, "metrics", "--output",
                          os.path.join(d.dir, "no-such-dir", "x.prom")],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and "x.prom.tmp" in bad.stderr, bad
    # usage: --output without FILE, or on another command
    for args in (["metrics", "--output"], ["stats", "--output", out]):
        bad = subprocess.run([ctl_tool(), "--socket", d.sock] + args, capture_output=True,
                             text=True, timeout=30)
        assert bad.returncode == 2, (args, bad)


# ---- 4. the units ------------------------------------------------------------------------

def test_metrics_units():
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    root = install_root()
    try:
        service = find_installed(root, "ringfeed-metrics.service")
        timer = find_installed(root, "ringfeed-metrics.timer")
        assert service and timer, "the metrics units were not installed"
        assert os.path.dirname(service) == os.path.dirname(find_installed(root,
                                                                          "ringfeedd.service"))
        with open(service) as f:
            text = f.read()
        m = re.search(r"^ExecStart=(\S+) metrics --output \$\{TEXTFILE\}$", text, re.M)
        assert m and os.access(root + m.group(1), os.X_OK), text
        assert re.search(r"^Environment=TEXTFILE=/var/lib/prometheus/node-exporter/ringfeed\.prom$",
                         text, re.M), text
        assert re.search(r"^Requisite=ringfeedd\.service$", text, re.M), text
        # quiet without node_exporter; root (no capability) for Debian's root-owned folder
        assert re.search(r"^ConditionPathIsDirectory=/var/lib/prometheus/node-exporter$", text,
                         re.M), text
        assert re.search(r"^LogLevelMax=notice$", text, re.M), text
        assert not re.search(r"^User=", text, re.M), text
        assert re.search(r"^CapabilityBoundingSet=$", text, re.M), text
        assert re.search(r"^SupplementaryGroups=ringfeed$", text, re.M), text
        rel = "/" + os.path.relpath(os.path.dirname(service), root)
        # ExecStopPost= runs /bin/sh, which verify looks for under the root
        shutil.copy2(shutil.which("sh") or "/bin/sh", os.path.join(root, "usr/bin/sh"))
        # (its Documentation= check runs man(1), pointed at the root's pages)
        mandir = next(os.path.dirname(dp) for dp, _, files in os.walk(root)
                      if "ringfeedctl.1" in files)
        r = subprocess.run(["systemd-analyze", "verify", f"--root={root}",
                            f"{rel}/ringfeed-metrics.service", f"{rel}/ringfeed-metrics.timer"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MANPATH=mandir))
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
        # an instance's writer: its own socket and textfile (two daemons' files
        # used to collide), its own daemon as the requisite
        with open(os.path.join(root + rel, "ringfeed-metrics@.service")) as f:
            inst = f.read()
        assert re.search(r"^ExecStart=\S+ --socket /run/ringfeed/%i/ringfeed\.sock metrics "
                         r"--output \$\{TEXTFILE\}$", inst, re.M), inst
        assert re.search(r"^Environment=TEXTFILE=/var/lib/prometheus/node-exporter/"
                         r"ringfeed-%i\.prom$", inst, re.M), inst
        assert re.search(r"^Requisite=ringfeedd@%i\.service$", inst, re.M), inst
        for unit in ("ringfeedd@gpu0.service", "ringfeedd@gpu0.socket",
                     "ringfeed-metrics@gpu0.service", "ringfeed-metrics@gpu0.timer"):
            os.symlink(unit.replace("gpu0", ""), os.path.join(root + rel, unit))
        r = subprocess.run(["systemd-analyze", "verify", f"--root={root}",
                            f"{rel}/ringfeed-metrics@gpu0.service",
                            f"{rel}/ringfeed-metrics@gpu0.timer"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MANPATH=mandir))
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
