"""test_checkconf.py - `ringfeedd --check-config` (daemon/checkconf.c) and
the RELOAD request (`ringfeedctl reload`), the two halves of the service's
ExecReload.

Checked: a file with several bad lines names each with its file and line
(not only the first) and exits 1; a good one exits 0 with a summary; a
dataset that does not open is a warning (exit 0: the daemon starts
without it); flags are checked over the file; a missing file is named;
nothing is started (no socket appears).  RELOAD answers "reloaded: ..."
once applied, and ERR reload-refused with the reason (ringfeedctl exits 1)
for a file that does not parse and for a new dataset that does not open,
the running config staying.  And ringfeedctl --timeout gives up on a
socket that accepts and never answers (a daemon starting, or stuck, behind
systemd's socket) in the time given, not 30 s.
"""
import os
import socket
import subprocess

from conftest import ctl, ctl_tool, packed_fmnist, raw_request, ringfeedd  # noqa: F401


def check(*args):
    return subprocess.run([ringfeedd(), "--check-config", *args], capture_output=True,
                          text=True, timeout=60)


def test_every_bad_line_named(tmp_path, packed_fmnist):
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text("# a comment\n"
                    "workers = 2\n"
                    "workers = 3\n"
                    "bogus = 1\n"
                    f"dataset.fm = {packed_fmnist['test']}\n"
                    "memory-budget = lots\n"
                    "log-level = loud\n")
    r = check("--config", str(conf))
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"{conf}:3: workers: given twice (first on line 2)"), lines
    assert lines[1].startswith(f'{conf}:4: unknown key "bogus"'), lines
    assert lines[2].startswith(f"{conf}:6: memory-budget: "), lines
    assert lines[3].startswith(f"{conf}:7: log-level: "), lines
    assert lines[-1] == f"{conf}: 4 problem(s)", lines
    assert not r.stdout


def test_good_file_and_a_dataset_that_does_not_open(tmp_path, packed_fmnist):
    conf = tmp_path / "ringfeedd.conf"
    sock = tmp_path / "never.sock"
    conf.write_text(f"socket = {sock}\n"
                    f"dataset.fm = {packed_fmnist['test']}\n"
                    f"dataset.ghost = {tmp_path}/nowhere\n")
    r = check("--config", str(conf))
    assert r.returncode == 0, r
    assert r.stderr.startswith(f"{conf}:3: warning: dataset.ghost = {tmp_path}/nowhere does "
                               "not open: "), r.stderr
    assert "the daemon starts without it" in r.stderr
    assert r.stdout == (f"{conf}: the configuration is good: 1 dataset(s) open, "
                        "1 warning(s)\n"), r.stdout
    assert not sock.exists(), "--check-config started a daemon"
    # flags are checked over the file
    r = check("--config", str(conf), "--workers", "9999")
    assert r.returncode == 2 and "--workers 9999" in r.stderr, r
    r = check("--config", str(tmp_path / "missing.conf"))
    assert r.returncode == 1 and "missing.conf" in r.stderr, r


def test_reload_request_answers(daemon_factory, packed_fmnist, tmp_path):
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\n")
    d = daemon_factory({}, workers=1, extra=["--config", str(conf)])
    r = ctl(d.sock, "reload")
    assert r.stdout == "reloaded: nothing changed\n", r
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\n"
                    f"dataset.fm2 = {packed_fmnist['test']}\n")
    r = ctl(d.sock, "reload")
    assert r.stdout == "reloaded: datasets\n", r
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\nworkerz = 2\n")
    r = ctl(d.sock, "reload", check=False)
    assert r.returncode == 1 and 'unknown key "workerz"' in r.stderr, r
    assert "(reload-refused)" in r.stderr, r.stderr
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\ndataset.ghost = {tmp_path}/no\n")
    reply = raw_request(d.sock, b"RELOAD\n").decode()
    assert reply.startswith("ERR reload-refused dataset.ghost"), reply
    st = d.stats()
    assert st["reloads"] == "4" and st["reloads.failed"] == "2", st
    assert st["datasets"] == "2", st


def test_ctl_timeout(tmp_path):
    path = str(tmp_path / "mute.sock")
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(path)
    mute.listen(4)  # accepts (the kernel's backlog) and never answers
    try:
        # (the message gives the limit it went by: 30 s when the option is ignored)
        r = subprocess.run([ctl_tool(), "--socket", path, "--timeout", "0.5", "ping"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "did not reply within 0.5 s" in r.stderr, r
        r = subprocess.run([ctl_tool(), "--timeout", "0", "ping"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "--timeout 0" in r.stderr, r
    finally:
        mute.close()


def test_dropin_folder(daemon_factory, packed_fmnist, tmp_path):
    """FILE.d/*.conf after FILE, in name order, a later file's key winning
    (each override said in the log and by --check-config), hidden and
    other files left alone; a problem in a drop-in named with its file and
    line; a reload reads the folder again."""
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\nmax-clients = 50\n")
    dropins = tmp_path / "ringfeedd.conf.d"
    dropins.mkdir()
    (dropins / "20-site.conf").write_text("max-clients = 70\n")
    (dropins / "10-package.conf").write_text(f"max-clients = 60\n"
                                             f"dataset.extra = {packed_fmnist['test']}\n")
    (dropins / ".30-hidden.conf").write_text("bogus = 1\n")
    (dropins / "40-notes.txt").write_text("bogus = 1\n")
    r = check("--config", str(conf))
    assert r.returncode == 0, r
    assert r.stderr.splitlines() == [
        f"{dropins}/10-package.conf: note: max-clients is set again here and wins over the "
        "files before",
        f"{dropins}/20-site.conf: note: max-clients is set again here and wins over the "
        "files before"], r.stderr
    assert "2 dataset(s) open" in r.stdout and "drop-ins read" in r.stdout, r.stdout

    d = daemon_factory({}, workers=1, extra=["--config", str(conf)])
    st = d.stats()
    assert st["datasets"] == "2", st
    log = d.read_log()
    assert f"config: max-clients is set again in {dropins}/20-site.conf" in log, log[-2000:]
    # a drop-in with a bad line: named by --check-config, refused by a reload
    (dropins / "50-bad.conf").write_text("# a comment\nworkerz = 2\n")
    r = check("--config", str(conf))
    assert r.returncode == 1 and f"{dropins}/50-bad.conf:2: unknown key \"workerz\"" in r.stderr, r
    r = ctl(d.sock, "reload", check=False)
    assert r.returncode == 1 and "50-bad.conf: line 2" in r.stderr, r
    # fixed: the reload reads the folder again
    (dropins / "50-bad.conf").write_text("max-clients = 80\n")
    r = ctl(d.sock, "reload")
    assert r.stdout == "reloaded: max-clients\n", r.stdout


def test_remote_datasets(tmp_path, packed_fmnist):
    """A remote dataset's URL is checked by the parser (a bad one names the
    line and the byte); a good one is not fetched by the check."""
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\n"
                    "dataset.web = http://127.0.0.1:9/packs/web/\n"
                    "cache-size = 2G\n"
                    "s3-region = eu-west-1\n")
    r = check("--config", str(conf))
    assert r.returncode == 0, r
    assert r.stdout == (f"{conf}: the configuration is good: 1 dataset(s) open, 0 warning(s), "
                        "remote dataset(s) fetched into cache-dir at start\n"), r.stdout
    conf.write_text("dataset.web = https://host/a//b/\ns3-endpoint = s3://bucket\n")
    r = check("--config", str(conf))
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"{conf}:1: dataset.web: URL 'https://host/a//b/': byte "), lines
    assert lines[1].startswith(f"{conf}:2: s3-endpoint: "), lines
