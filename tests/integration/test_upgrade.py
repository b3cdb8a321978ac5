"""test_upgrade.py - replacing ringfeedd's executable on disk under a
running daemon (what dpkg, rsync or `meson install` do before the restart)
never gives it workers of another build.

The main process keeps its executable open and starts every worker from
that descriptor (daemon/common/buildid.h).  It used to start them from the
path: after an upgrade, the next respawn, resize or reload ran the new file
as a worker ("sent a bad DONE"; every stream failed with EIO).  Here the
daemon runs from a copy of the binary, a reader is attached, the copy is
replaced by another executable (renamed over it, as dpkg does), and then:
a resize, workers killed and respawned, and a reload that restarts the
pool.  The reader's digest equals one read before, no worker was refused,
and the workers report the main process's build.
"""
import json
import os
import shutil
import signal
import stat
import subprocess

from conftest import (Daemon, ctl, packed_fmnist, read_tool, ringfeedd, run_read,  # noqa: F401
                      wait_for)


def alive(d, n):
    return wait_for(lambda: (lambda s: s if int(s["workers.alive"]) == n and
                             int(s["workers.target"]) == n else None)(d.stats()),
                    f"{n} workers alive")


def test_binary_replaced_under_a_running_daemon(tmp_path, packed_fmnist):
    exe = tmp_path / "ringfeedd"
    shutil.copy2(ringfeedd(), exe)
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(f"dataset.test = {packed_fmnist['test']}\nlog-level = info\n")
    d = Daemon({}, workers=1, extra=["--config", str(conf)])
    d.args[0] = str(exe)
    d.start()
    try:
        alive(d, 1)
        version = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                                 check=True).stdout
        assert "(commit " in version, version
        clean, _ = run_read(d.sock, "test", batch=100, epochs=2)

        # a reader attached, held where it is: the workers stopped
        pids = d.worker_pids()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        reader = subprocess.Popen([read_tool(), "--socket", d.sock, "--dataset", "test",
                                   "--batch", "100", "--epochs", "2", "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: int(d.stats()["clients.attached"]) == 1, "the reader to attach")

        # the upgrade: another executable renamed over the daemon's path
        new = tmp_path / "ringfeedd.new"
        new.write_text("#!/bin/sh\necho 'another build' >&2\nexit 3\n")
        new.chmod(new.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.rename(new, exe)

        ctl(d.sock, "workers", 3)                      # a resize
        for pid in pids:                               # respawns
            os.kill(pid, signal.SIGKILL)
        alive(d, 3)
        conf.write_text(f"dataset.test = {packed_fmnist['test']}\nlog-level = debug\n")
        spawned = int(d.stats()["workers.spawned"])
        os.kill(d.proc.pid, signal.SIGHUP)             # a reload that restarts the pool
        wait_for(lambda: int(d.stats()["workers.spawned"]) >= spawned + 3,
                 "the reload to restart the workers")
        alive(d, 3)

        out, err = reader.communicate(timeout=300)
        assert reader.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["digest"] == clean["digest"]
        log = d.read_log()
        assert "another build" not in log, log[-3000:]
        assert "runs build" not in log and "bad HELLO" not in log, log[-3000:]
        assert d.proc.poll() is None
    finally:
        d.cleanup()
