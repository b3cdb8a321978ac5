#!/usr/bin/python3
"""test_systemd.py - ringfeedd under a real systemd, booted with systemd-nspawn.

    /usr/bin/python3 tests/system/test_systemd.py BUILD_DIR

The integration tests (tests/integration/test_service.py) play systemd's
part themselves; this one installs the build into a Debian 12 root, boots
that root's systemd (252) in a container and operates ringfeedd the way an
administrator would:

  packages  the Debian packages of this tree, and of its rebuild as the
            next version, from scripts/deb (BUILD/deb, BUILD/deb-rebuild;
            a no-op when they are fresh)
  root      `debootstrap --variant=minbase bookworm` plus systemd and what
            the packages depend on, cached in BUILD/system-root/root
            (BUILD/system-root/stamp says how it was made; a later run only
            installs what is missing, and purges what the last one left);
            Fashion-MNIST's test split packed at /var/lib/ringfeed/fmnist
  boot      systemd-nspawn --boot --register=no --keep-unit, a host folder
            bound onto /run/ringfeed so host clients reach the socket;
            commands run inside with nsenter into the container's init
  checks    `apt-get install ./*.deb` into the running system (a fresh
            install starts cleanly and serves nothing), then the operator's
            config (the dataset, "workers = 2", "numa-node = 0");
            socket activation and an epoch read from the host (digest equal
            to a daemon started directly on the host on the same data); each
            I/O backend forced by a drop-in under the unit's syscall filter;
            reloads (good and bad) under a reading client; the watchdog
            (daemon SIGSTOPped, killed and restarted, the client resumes);
            stop under load; a user outside the ringfeed group refused (by
            the socket file, then by the daemon: ERR denied), a member
            reading; the journal's priorities; systemd-analyze security
            against the running manager equal to --offline on the unit file;
            an upgrade to the next build while a trainer reads (digest equal,
            the daemon on the new build, the edited config kept); remove
            (config kept), then purge (no unit, user or packaged file left)

Each check prints "ok N - what (seconds)" or "not ok N - what" with the
reason; a failed check does not stop the later ones unless they need what
it made.  Exit status: 0 all passed, 1 a check failed, 77 skipped because
this machine cannot boot a container (not root, no systemd-nspawn or
debootstrap, no cached root and Debian's mirror unreachable, nspawn refused
by the kernel).  The container is powered off and nspawn killed whatever
happens (SIGTERM from meson's timeout included).
"""
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
SUITE = "bookworm"
MIRROR = os.environ.get("RINGFEED_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# what the root holds besides minbase: the init, useradd, /bin/kill (the
# unit's ExecReload); the libraries come from the build's own ldd
BASE_PACKAGES = ["systemd", "passwd", "procps"]
STAMP = f"debootstrap --variant=minbase {SUITE} +{','.join(BASE_PACKAGES)} v2\n"
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the packages scripts/deb makes, and where their .debs are copied in the root
OURS = ("ringfeedd", "libringfeed0", "libringfeed-dev", "python3-ringfeed", "ringfeed-train")
DEBS_IN = "/var/cache/ringfeed-system-test"
FMNIST = "/usr/share/datasets/fashion-mnist"
SOCK_IN = "/run/ringfeed/ringfeed.sock"
# the watchdog and reload clients read this many epochs of 64 (a few seconds
# on the host), long enough to be mid-stream when the daemon is stopped
LONG = ("64", "100")
WAIT = 60.0


class Skip(Exception):
    pass


class Fatal(Exception):
    """A failure that leaves nothing for the later checks to stand on."""


def log(msg):
    print(msg, flush=True)


T0 = time.monotonic()


def stamp():
    return f"[{time.monotonic() - T0:6.1f}s]"


def run(cmd, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n"
                             f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def wait_for(pred, what, timeout=WAIT, interval=0.1):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# ---- the checks' bookkeeping -------------------------------------------------

class Checks:
    def __init__(self):
        self.n = 0
        self.failed = []

    @contextlib.contextmanager
    def check(self, what):
        self.n += 1
        n, t = self.n, time.monotonic()
        log(f"{stamp()} -- {n}. {what}")
        try:
            yield
        except (AssertionError, OSError, subprocess.TimeoutExpired) as e:
            self.failed.append(what)
            log(f"not ok {n} - {what} ({time.monotonic() - t:.1f} s)")
            for line in str(e).rstrip().splitlines():
                log(f"#   {line}")
        else:
            log(f"ok {n} - {what} ({time.monotonic() - t:.1f} s)")


# ---- the root ------------------------------------------------------------------

def mirror_reachable():
    try:
        with urllib.request.urlopen(f"{MIRROR}/dists/{SUITE}/Release", timeout=15) as r:
            return r.status == 200
    except OSError:
        return False


def build_debs(build):
    """The .debs of this tree (scripts/deb into BUILD/deb) and of its rebuild
    as the next version (BUILD/deb-rebuild), each a no-op when fresh: two
    lists of paths, the -dbgsym packages left out."""
    sets = []
    for args, sub in (([], "deb"), (["--rebuild"], "deb-rebuild")):
        out = os.path.join(build, sub)
        t = time.monotonic()
        r = run([os.path.join(SRC, "scripts", "deb")] + args + [out], check=False, timeout=1800)
        if r.returncode == SKIP:
            raise Skip(f"cannot build the packages: {r.stderr.strip()}")
        if r.returncode != 0:
            raise Fatal(f"scripts/deb {' '.join(args + [out])} exited {r.returncode}:\n"
                        f"{r.stdout[-3000:]}{r.stderr[-2000:]}")
        debs = sorted(os.path.join(out, f) for f in os.listdir(out)
                      if f.endswith(".deb") and "-dbgsym_" not in f)
        names = sorted(os.path.basename(d).split("_")[0] for d in debs)
        assert names == sorted(OURS), f"{out} holds {names}, expected {sorted(OURS)}"
        log(f"{stamp()} packages: {' '.join(os.path.basename(d) for d in debs)} "
            f"({time.monotonic() - t:.0f} s)")
        sets.append(debs)
    return sets


def dependencies(debs):
    """The packages the .debs depend on besides each other: the first of
    each alternative, without versions or architecture qualifiers."""
    deps = set()
    for d in debs:
        for field in ("Pre-Depends", "Depends"):
            text = run(["dpkg-deb", "-f", d, field]).stdout
            for clause in text.split(","):
                name = clause.split("|")[0].split("(")[0].strip().split(":")[0]
                if name and name not in OURS:
                    deps.add(name)
    return sorted(deps)


def chroot_missing(root, packages):
    missing = []
    for p in packages:
        r = run(["chroot", root, "dpkg-query", "-W", "-f=${Status}", p], check=False)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    return missing


def make_root(sysroot, packages):
    """BUILD/system-root/root, debootstrapped once; returns its path."""
    root = os.path.join(sysroot, "root")
    stamp_path = os.path.join(sysroot, "stamp")
    with contextlib.suppress(OSError):
        with open(stamp_path) as f:
            if f.read() == STAMP and os.path.isdir(root):
                missing = chroot_missing(root, packages)
                if missing:
                    log(f"{stamp()} cached root lacks {' '.join(missing)}: apt-get install")
                    if not mirror_reachable():
                        raise Skip(f"the cached root lacks {missing} and {MIRROR} is unreachable")
                    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
                    shutil.copy("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
                    run(["chroot", root, "apt-get", "update", "-qq"], timeout=600, env=env)
                    run(["chroot", root, "apt-get", "install", "-y", "-qq",
                         "--no-install-recommends"] + missing, timeout=600, env=env)
                log(f"{stamp()} root: cached {root}")
                return root
    if not shutil.which("debootstrap"):
        raise Skip("debootstrap is not installed (scripts/install-deps installs it)")
    if not mirror_reachable():
        raise Skip(f"no cached root and {MIRROR} is unreachable for debootstrap")
    os.makedirs(sysroot, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(stamp_path)
    tmp = root + ".tmp"
    # an interrupted debootstrap may have left /proc or /sys mounted there
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for mnt in reversed(mounts):
        if mnt.startswith(tmp + "/") or mnt.startswith(root + "/"):
            run(["umount", "-l", mnt], check=False)
    for d in (tmp, root):
        shutil.rmtree(d, ignore_errors=True)
    log(f"{stamp()} root: debootstrap --variant=minbase {SUITE} into {tmp} (once)")
    include = ",".join(BASE_PACKAGES + packages)
    r = run(["debootstrap", "--variant=minbase", f"--include={include}", SUITE, tmp, MIRROR],
            check=False, timeout=1200)
    if r.returncode != 0:
        raise Fatal(f"debootstrap failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-2000:]}")
    # apt's lists and the downloaded packages are not needed again
    run(["chroot", tmp, "apt-get", "clean"], check=False)
    os.rename(tmp, root)
    with open(stamp_path, "w") as f:
        f.write(STAMP)
    log(f"{stamp()} root: made")
    return root


def clean_root(root):
    """Takes out what a previous run left in the cached root: the packages
    (purged in the chroot: no systemd runs there, so their scripts skip
    systemctl), the test's drop-ins, dataset, journal and copied .debs."""
    # (installed or removed with their conffiles left; dpkg passes over the rest)
    run(["chroot", root, "dpkg", "--purge"] + list(OURS), check=False, timeout=300)
    for p in ("etc/systemd/system/ringfeedd.service.d", "etc/systemd/system/ringfeedd.socket.d",
              "var/lib/ringfeed", "var/log/journal", DEBS_IN.lstrip("/")):
        shutil.rmtree(os.path.join(root, p), ignore_errors=True)
    os.makedirs(os.path.join(root, "var/log/journal"))


# ---- the container -----------------------------------------------------------------

class Container:
    def __init__(self, root, hostdir, logdir):
        self.root = root
        self.hostdir = hostdir
        self.console_path = os.path.join(logdir, "console.log")
        self.proc = None
        self.pid = None  # the container's init, a host pid

    def boot(self):
        self.console = open(self.console_path, "wb")
        cmd = ["systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--quiet",
               "--console=read-only", "--machine=ringfeed-systest", "-D", self.root,
               f"--bind={self.hostdir}:/run/ringfeed"]
        log(f"{stamp()} $ {' '.join(cmd)}")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.console,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        my_ns = os.readlink("/proc/self/ns/pid")

        def init_pid():
            if self.proc.poll() is not None:
                return -1
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                with contextlib.suppress(OSError):
                    with open(f"/proc/{self.proc.pid}/task/{tid}/children") as f:
                        for c in f.read().split():
                            if os.readlink(f"/proc/{c}/ns/pid") != my_ns:
                                return int(c)
            return None

        pid = wait_for(init_pid, "nspawn to start the container's init", timeout=60)
        if pid == -1:
            out = self.console_text()
            if re.search(r"Operation not permitted|Permission denied|not supported|"
                         r"Failed to (create|mount|clone|allocate)", out):
                raise Skip(f"systemd-nspawn cannot boot a container here:\n{out[-1500:]}")
            raise Fatal(f"systemd-nspawn exited {self.proc.returncode}:\n{out[-3000:]}")
        self.pid = pid
        # is-system-running answers "offline" or cannot connect until the
        # manager is up, then "starting" until the boot is done (--wait
        # needs D-Bus, which the root does not have)
        def booted():
            if self.proc.poll() is not None:
                raise Fatal(f"systemd-nspawn exited {self.proc.returncode}:\n"
                            f"{self.console_text()[-3000:]}")
            r = self.exec("systemctl", "is-system-running", check=False, timeout=30)
            return r if r.stdout.strip() not in ("", "offline", "initializing", "starting") \
                else None
        try:
            r = wait_for(booted, "the container's boot", 120, interval=0.3)
        except AssertionError as e:
            raise Fatal(f"{e}\n{self.console_text()[-3000:]}")
        state = r.stdout.strip()
        if state not in ("running", "degraded"):
            raise Fatal(f"the container's systemd did not finish booting: {state!r}\n"
                        f"{r.stderr}\n{self.console_text()[-3000:]}")
        if state == "degraded":
            log(f"{stamp()} boot: degraded; failed units: "
                + " ".join(self.ctl("list-units", "--failed", "--plain", "--no-legend",
                                    check=False).stdout.split()[::4]))

    def console_text(self):
        with open(self.console_path, "rb") as f:
            return f.read().decode(errors="replace")

    def exec(self, *argv, check=True, timeout=60, input=None):
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "", "TERM": "dumb",
               "SYSTEMD_LOG_COLOR": "0"}
        return run(["nsenter", "-t", str(self.pid), "-a", "--"] + list(argv), check=check,
                   timeout=timeout, env=env, input=input)

    def sh(self, script, **kw):
        return self.exec("/bin/sh", "-c", script, **kw)

    def ctl(self, *args, **kw):
        return self.exec("systemctl", "--no-pager", *args, **kw)

    def show(self, unit, *props):
        out = self.ctl("show", "-p", ",".join(props), unit).stdout
        return dict(line.partition("=")[::2] for line in out.splitlines() if "=" in line)

    def write(self, path, text):
        """A file in the container's tree (from the host; the root is plain files)."""
        full = self.root + path
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full + ".tmp", "w") as f:
            f.write(text)
        os.replace(full + ".tmp", full)

    def procs(self, exe):
        """(host pid, container pid, cmdline) of the container's processes
        running exe (a path inside the container)."""
        out = []
        ns = os.readlink(f"/proc/{self.pid}/ns/pid")
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{p}/ns/pid") != ns:
                    continue
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                with open(f"/proc/{p}/status") as f:
                    nspid = [line.split()[-1] for line in f if line.startswith("NSpid:")]
                if argv and argv[0].decode(errors="replace") == exe:
                    out.append((int(p), int(nspid[0]) if nspid else -1,
                                b" ".join(argv).decode(errors="replace").strip()))
        return out

    def teardown(self):
        if not self.proc:
            return
        if self.proc.poll() is None and self.pid:
            with contextlib.suppress(Exception):
                self.exec("systemctl", "poweroff", check=False, timeout=10)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            if self.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self.console.close()
        log(f"{stamp()} container down (nspawn exited {self.proc.returncode})")


# ---- clients -------------------------------------------------------------------------

def raw_request(path, data, timeout=30.0):
    """Sends a request on a fresh control connection and half-closes it;
    returns the reply, read until the daemon closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out.decode(errors="replace")
            out += chunk
    finally:
        s.close()


def stats(path):
    reply = raw_request(path, b"STATS\n")
    lines = reply.splitlines()
    assert lines and lines[0].startswith("OK"), f"STATS answered {reply!r}"
    return dict(line.partition(" ")[::2] for line in lines[1:] if line)


def build_revision(path):
    """The revision label of ringfeed_build_info in the daemon's METRICS."""
    text = raw_request(path, b"METRICS\n")
    m = re.search(r'^ringfeed_build_info\{[^}]*revision="([^"]*)"', text, re.M)
    assert m, f"no ringfeed_build_info revision in METRICS:\n{text[:1000]}"
    return m.group(1)


class Reader:
    """ringfeed-read --json in the background."""

    def __init__(self, tool, sock, batch, epochs, extra=()):
        self.cmd = [tool, "--socket", sock, "--dataset", "fmnist", "--batch", batch,
                    "--epochs", epochs, "--json"] + list(extra)
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def result(self, timeout=120):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{' '.join(self.cmd)} did not finish in {timeout} s")
        return self.proc.returncode, out, err

    def json(self, timeout=120):
        rc, out, err = self.result(timeout)
        assert rc == 0, f"{' '.join(self.cmd)} exited {rc}: {err.strip()}"
        return json.loads(out.strip().splitlines()[-1])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def read_once(tool, sock, batch, epochs, extra=()):
    return Reader(tool, sock, batch, epochs, extra).json()


# a PING on a fresh connection, from a process of another uid
RAW_PING = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(sys.argv[1])
try:
    s.sendall(b"PING\\n")
    s.shutdown(socket.SHUT_WR)
except (BrokenPipeError, ConnectionResetError):
    pass  # a refused peer is answered and closed at once: its line waits to be read
out = b""
while True:
    try:
        b = s.recv(4096)
    except ConnectionResetError:
        break  # closed with our request unread: the line came first
    if not b:
        break
    out += b
print(out.decode(errors="replace"))
"""


def unix_listening(path):
    """Is an AF_UNIX socket bound at path and listening?  (/proc/net/unix:
    the file appears at bind(), before listen(); a connect in between is
    refused.)"""
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == path and int(fields[3], 16) & 0x10000:
                    return True
    except OSError:
        pass
    return False


def exposure(text):
    m = re.search(r"Overall exposure level for ringfeedd\.service: ([0-9.]+) (\S+)", text)
    return (m.group(1), m.group(2)) if m else None


# ---- the test --------------------------------------------------------------------------

def main(build):
    build = os.path.abspath(build)
    if os.geteuid() != 0:
        raise Skip("needs root (systemd-nspawn, chroot, dpkg in a root)")
    for tool in ("systemd-nspawn", "nsenter", "chroot", "dpkg-deb"):
        if not shutil.which(tool):
            raise Skip(f"{tool} is not installed (systemd-nspawn: package systemd-container)")
    daemon = os.path.join(build, "daemon/ringfeedd")
    read_tool = os.path.join(build, "tools/ringfeed-read")
    pack = os.path.join(build, "tools/ringfeed-pack")
    for b in (daemon, read_tool, pack):
        if not os.access(b, os.X_OK):
            raise Fatal(f"{b} is not built")
    if not os.path.isdir(FMNIST):
        raise Fatal(f"{FMNIST} is missing (package dataset-fashion-mnist, scripts/install-deps)")

    sysroot = os.path.join(build, "system-root")
    checks = Checks()
    cleanup = []
    try:
        # ---- the packages, the root, the data ----
        first, second = build_debs(build)
        versions = [run(["dpkg-deb", "-f", debs[0], "Version"]).stdout.strip()
                    for debs in (first, second)]
        packages = dependencies(first + second)
        log(f"{stamp()} what they depend on: {' '.join(packages)}")
        root = make_root(sysroot, packages)
        clean_root(root)
        debs_in = []
        for n, debs in enumerate((first, second)):
            d = f"{DEBS_IN}/{n}"
            os.makedirs(root + d)
            for deb in debs:
                shutil.copy(deb, root + d)
            debs_in.append([f"{d}/{os.path.basename(deb)}" for deb in debs])

        data_in = "/var/lib/ringfeed/fmnist"
        # the folder is made now; the package's tmpfiles.d entry gives it to
        # the ringfeed user at install
        os.makedirs(os.path.dirname(root + data_in), exist_ok=True)
        run([pack, "idx", "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
             "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", root + data_in])

        # ---- a bare daemon on the host, same data: the digests to match ----
        tmp = tempfile.mkdtemp(prefix="rfsys-")
        cleanup.append(lambda: shutil.rmtree(tmp, ignore_errors=True))
        os.chmod(tmp, 0o755)
        bare_sock = os.path.join(tmp, "bare.sock")
        bare_log = open(os.path.join(tmp, "bare.log"), "wb")
        bare = subprocess.Popen([daemon, "--socket", bare_sock, "--workers", "2",
                                 "--dataset", f"fmnist={root + data_in}"],
                                stdout=bare_log, stderr=bare_log, start_new_session=True)
        cleanup.append(lambda: (bare.poll() is None and bare.kill(), bare.wait()))
        wait_for(lambda: unix_listening(bare_sock), "the bare daemon's socket listening")
        digest_one = read_once(read_tool, bare_sock, "256", "1")["digest"]
        digest_long = read_once(read_tool, bare_sock, *LONG)["digest"]
        bare.send_signal(signal.SIGTERM)
        bare.wait(30)
        log(f"{stamp()} bare run on the host: 1 epoch of 256 -> {digest_one}, "
            f"{LONG[1]} epochs of {LONG[0]} -> {digest_long}")

        # ---- boot ----
        hostdir = os.path.join(tmp, "run-ringfeed")
        os.mkdir(hostdir, 0o755)
        sock = os.path.join(hostdir, "ringfeed.sock")
        # the container's console stays in BUILD/system-root/console.log
        c = Container(root, hostdir, sysroot)
        cleanup.insert(0, c.teardown)
        t = time.monotonic()
        c.boot()
        log(f"{stamp()} booted in {time.monotonic() - t:.1f} s: "
            f"{c.exec('systemctl', '--version').stdout.splitlines()[0]}")

        def wait_running(what, pred=None, timeout=WAIT):
            def ok():
                s = c.show("ringfeedd.service", "ActiveState", "SubState", "NRestarts", "MainPID")
                if s.get("ActiveState") == "active" and s.get("SubState") == "running" \
                        and (pred is None or pred(s)):
                    return s
                return None
            try:
                return wait_for(ok, what, timeout)
            except AssertionError as e:
                raise AssertionError(f"{e}\n{status_text()}")

        def status_text():
            return (c.ctl("status", "ringfeedd.service", "-n", "30", check=False).stdout
                    + c.exec("journalctl", "-b", "--no-pager", "-n", "20", "-u", "ringfeedd",
                             check=False).stdout)

        def wait_attached(n=1):
            wait_for(lambda: int(stats(sock).get("clients.attached", 0)) >= n,
                     f"{n} client(s) attached")

        # ---- 0. the packages installed into the running system ----
        with checks.check("apt-get install ./*.deb: a fresh install starts cleanly, serving "
                          "nothing; the user, the folder, the library and the Python "
                          "package are in place"):
            t = time.monotonic()
            r = c.exec("apt-get", "install", "-y", "--no-install-recommends", *debs_in[0],
                       check=False, timeout=600)
            assert r.returncode == 0, f"apt-get install exited {r.returncode}:\n" \
                f"{r.stdout[-3000:]}{r.stderr[-2000:]}"
            log(f"#   apt-get install {' '.join(os.path.basename(d) for d in debs_in[0])} "
                f"({time.monotonic() - t:.1f} s)")
            s = wait_running("the service the package started")
            sk = c.show("ringfeedd.socket", "ActiveState", "SubState", "UnitFileState")
            assert sk["ActiveState"] == "active" and sk["UnitFileState"] == "enabled" and \
                sk["SubState"] in ("listening", "running"), f"the socket unit: {sk}"
            reply = raw_request(sock, b"DATASETS\n")
            assert reply.splitlines()[0].startswith("OK") and \
                not [ln for ln in reply.splitlines()[1:] if ln.strip()], \
                f"a fresh install serves datasets: {reply!r}"
            owner = c.sh("getent passwd ringfeed >/dev/null && stat -c %U:%G /var/lib/ringfeed")
            assert owner.stdout.strip() == "ringfeed:ringfeed", owner.stdout
            files = c.exec("dpkg", "-L", *OURS).stdout.split()
            exe_in = next(f for f in files if f.endswith("/sbin/ringfeedd"))
            version = c.exec(exe_in, "--version").stdout.strip()
            assert f"+deb{versions[0]})" in version, version
            py = c.exec("python3", "-c", "import ringfeed; print(ringfeed.__version__)")
            train = c.exec("ringfeed-train", "--help", check=False)
            assert train.returncode == 0, f"ringfeed-train --help: {train.stderr[-1000:]}"
            log(f"#   {s}; socket {sk}; no dataset; /var/lib/ringfeed {owner.stdout.strip()}; "
                f"{version}; import ringfeed {py.stdout.strip()}; ringfeed-train starts")
        if checks.failed:
            raise Fatal("the packages do not install: nothing else to check")

        unit_path = next(f for f in files if f.endswith("/systemd/system/ringfeedd.service"))
        with open(root + unit_path) as f:
            unit = f.read()
        m = re.search(r"^ExecStart=(\S+) --config (\S+)$", unit, re.M)
        assert m, f"no ExecStart=... --config ... in {unit_path}"
        assert m.group(1) == exe_in, f"ExecStart runs {m.group(1)}, the package has {exe_in}"
        conf_in = m.group(2)
        ctl_in = next(f for f in files if f.endswith("/bin/ringfeedctl"))
        read_in = next(f for f in files if f.endswith("/bin/ringfeed-read"))
        watchdog_s = float(re.search(r"^WatchdogSec=(\d+)s$", unit, re.M).group(1))
        restart_s = float(re.search(r"^RestartSec=(\d+)s$", unit, re.M).group(1))
        stop_s = float(re.search(r"^TimeoutStopSec=(\d+)s$", unit, re.M).group(1))
        with open(root + conf_in) as f:
            example = f.read()
        # the shipped config serves nothing until an operator adds a dataset
        assert not re.search(r"^dataset\.", example, re.M), \
            f"the shipped config {conf_in} serves a dataset on a fresh install"
        # the operator's config: the test's dataset, two workers, the daemon
        # on NUMA node 0 (its CPUs and memory policy, under the unit's filter)
        good_conf = (example + f"\n# system test\ndataset.fmnist = {data_in}\nworkers = 2\n"
                     "numa-node = 0\n")
        c.ctl("stop", "ringfeedd.service")
        c.write(conf_in, good_conf)

        # ---- 1. socket activation ----
        with checks.check("enable --now ringfeedd.socket; the first connection starts the service"):
            c.ctl("enable", "--now", "ringfeedd.socket")
            s = c.show("ringfeedd.socket", "ActiveState", "SubState")
            assert s == {"ActiveState": "active", "SubState": "listening"}, f"the socket unit: {s}"
            s = c.show("ringfeedd.service", "ActiveState")
            assert s["ActiveState"] == "inactive", \
                f"the service started before any client connected: {s}"
            assert os.path.exists(sock), f"{sock} (bound onto /run/ringfeed) has no socket"
            t = time.monotonic()
            reply = raw_request(sock, b"PING\n", timeout=WAIT)
            assert reply.startswith("OK pong"), f"PING through the activated socket: {reply!r}"
            log(f"#   PING answered {time.monotonic() - t:.2f} s after connecting")
            s = wait_running("the service to be active/running")
            assert s["NRestarts"] == "0", f"NRestarts {s['NRestarts']}, expected 0"
            log(f"#   ringfeedd.service: {s}")
            journal = c.exec("journalctl", "-b", "--no-pager", "-u", "ringfeedd").stdout
            assert "socket-activated" in journal, \
                f"the daemon did not say it took the activated socket:\n{journal[-2000:]}"
            out = read_once(read_tool, sock, "256", "1")
            assert out["samples"] == 10000, out
            assert out["digest"] == digest_one, \
                f"digest through the unit {out['digest']} != bare run {digest_one}"
            log(f"#   host ringfeed-read through the bound socket: digest {out['digest']} "
                f"(bare run {digest_one})")
        if checks.failed:
            raise Fatal("the service does not start: nothing else to check")

        # ---- 2. each I/O backend under the syscall filter ----
        dropin = "/etc/systemd/system/ringfeedd.service.d/50-io.conf"
        for backend in ("io_uring", "pread", "mmap"):
            with checks.check(f"RINGFEED_IO={backend} by a drop-in serves under the unit's filter"):
                c.write(dropin, f"[Service]\nEnvironment=RINGFEED_IO={backend}\n")
                c.ctl("daemon-reload")
                c.ctl("restart", "ringfeedd.service")
                wait_running(f"the service to run with RINGFEED_IO={backend}")
                st = wait_for(lambda: (lambda s: s if int(s.get("workers.alive", 0)) >= 2
                                       and s.get("io.backend") not in (None, "unknown")
                                       else None)(stats(sock)), "2 workers up")
                assert st["io.backend"] == backend, \
                    f"io.backend {st['io.backend']} ({st.get('io.reason')}), asked for {backend}"
                out = read_once(read_tool, sock, "256", "1")
                assert out["digest"] == digest_one, \
                    f"digest with {backend} {out['digest']} != bare run {digest_one}"
                log(f"#   io.backend {st['io.backend']}, io.reason {st.get('io.reason')!r}, "
                    f"digest {out['digest']}")
        os.unlink(root + dropin)
        c.ctl("daemon-reload")
        c.ctl("restart", "ringfeedd.service")
        wait_running("the service to run without the drop-in")

        # ---- 3. reload, good and bad, under a reading client ----
        with checks.check("systemctl reload (good, then bad) while a client reads"):
            main_pid = c.show("ringfeedd.service", "MainPID")["MainPID"]
            reader = Reader(read_tool, sock, *LONG)
            cleanup.append(reader.kill)
            wait_attached()
            c.write(conf_in, good_conf.replace("workers = 2", "workers = 3")
                    + f"dataset.fmnist2 = {data_in}\n")
            c.ctl("reload", "ringfeedd.service")
            wait_for(lambda: "reload done" in c.exec("journalctl", "-b", "--no-pager", "-u",
                                                     "ringfeedd").stdout, "reload done")
            wait_for(lambda: (lambda s: s if int(s.get("workers.alive", 0)) == 3 else None)(
                stats(sock)), "3 workers after the good reload")
            names = sorted(line.split()[0] for line in
                           raw_request(sock, b"DATASETS\n").splitlines()[1:] if line.strip())
            assert names == ["fmnist", "fmnist2"], f"DATASETS after the good reload: {names}"
            assert reader.proc.poll() is None, "the client finished before the good reload ended"
            # a file that does not parse: ExecReload's --check-config names
            # the line, `systemctl reload` fails, the daemon is never asked
            c.write(conf_in, good_conf + "no-such-key = 1\n")
            r = c.ctl("reload", "ringfeedd.service", check=False)
            assert r.returncode != 0, "systemctl reload succeeded on a config that does not parse"
            bad_line = len(good_conf.splitlines()) + 1
            checked = wait_for(lambda: re.search(
                rf"ringfeedd.conf:{bad_line}: unknown key \"no-such-key\".*", c.exec(
                    "journalctl", "-b", "--no-pager", "-u", "ringfeedd").stdout),
                "the journal to name the bad line")
            log(f"#   systemctl reload exit {r.returncode}; journal: {checked.group(0)[:100]}")
            # a config that parses but that the daemon refuses (a new dataset
            # that does not open): the daemon's answer fails the reload
            c.write(conf_in, good_conf + "dataset.ghost = /var/lib/ringfeed/nowhere\n")
            r = c.ctl("reload", "ringfeedd.service", check=False)
            assert r.returncode != 0, "systemctl reload succeeded though the daemon refused it"
            refused = wait_for(lambda: re.search(
                r"reload refused, the running config stays: .*", c.exec(
                    "journalctl", "-b", "--no-pager", "-u", "ringfeedd").stdout),
                "the journal's refusal")
            status = wait_for(lambda: (lambda t: t if "reload failed, running the old config:"
                                       in t else None)(c.ctl("status", "ringfeedd.service",
                                                             check=False).stdout),
                              "systemctl status to show the refusal")
            line = next(ln for ln in status.splitlines() if "Status:" in ln)
            assert "dataset.ghost" in line, f"the status line does not say why: {line.strip()}"
            log(f"#   systemctl reload exit {r.returncode}; journal: {refused.group(0)[:100]}\n"
                f"#   systemctl status: {line.strip()}")
            s = c.show("ringfeedd.service", "MainPID", "ActiveState")
            assert s == {"MainPID": main_pid, "ActiveState": "active"}, \
                f"the service after the bad reload: {s} (MainPID was {main_pid})"
            assert reader.proc.poll() is None, "the client finished before the bad reload ended"
            out = reader.json()
            assert out["digest"] == digest_long, \
                f"digest across the reloads {out['digest']} != bare run {digest_long}"
            log(f"#   client across both reloads: digest {out['digest']}, "
                f"reconnects {out['reconnects']}")
            c.write(conf_in, good_conf)
            c.ctl("reload", "ringfeedd.service")

        # ---- 3a. a worker killed from outside (as the OOM killer does) ----
        with checks.check("a worker SIGKILLed from outside is respawned; the unit stays up "
                          "(OOMPolicy=continue)"):
            s0 = c.show("ringfeedd.service", "MainPID", "ActiveState", "OOMPolicy")
            assert s0["OOMPolicy"] == "continue", s0
            st = stats(sock)
            deaths0 = int(st["workers.deaths"])
            pids = [v for k, v in st.items() if k.startswith("workers.") and k.endswith(".pid")
                    and v.isdigit()]
            assert pids, st
            c.exec("kill", "-KILL", pids[0])  # a pid of the container's namespace
            wait_for(lambda: (lambda x: x if int(x["workers.deaths"]) == deaths0 + 1 and
                              x["workers.alive"] == x["workers.target"] else None)(stats(sock)),
                     "the worker to be respawned")
            s1 = c.show("ringfeedd.service", "MainPID", "ActiveState", "OOMPolicy")
            assert s1 == s0, f"the unit after a worker's death: {s1} (before: {s0})"
            log(f"#   worker {pids[0]} killed; respawned, MainPID {s1['MainPID']} "
                f"{s1['ActiveState']}, OOMPolicy {s1['OOMPolicy']}")

        # ---- 3b. the metrics writer, with and without node_exporter's folder ----
        with checks.check("ringfeed-metrics.service: skipped quietly without the textfile "
                          "folder, writes ringfeed.prom into Debian's root-owned one"):
            folder = "/var/lib/prometheus/node-exporter"
            c.exec("rm", "-rf", folder)
            r = c.ctl("start", "ringfeed-metrics.service", check=False)
            s = c.show("ringfeed-metrics.service", "Result", "ConditionResult", "ExecMainStatus")
            assert r.returncode == 0 and s["ConditionResult"] == "no" and \
                s["Result"] == "success", f"without the folder: exit {r.returncode}, {s}"
            c.exec("install", "-d", "-m", "0755", "-o", "root", "-g", "root", folder)
            r = c.ctl("start", "ringfeed-metrics.service", check=False)
            s = c.show("ringfeed-metrics.service", "Result", "ConditionResult", "ExecMainStatus")
            assert r.returncode == 0 and s["Result"] == "success", \
                f"with a root-owned folder: exit {r.returncode}, {s}: " + c.exec(
                    "journalctl", "-b", "--no-pager", "-u", "ringfeed-metrics").stdout[-1500:] \
                + c.sh("ls -la /run/ringfeed; ls -ln /run/ringfeed", check=False).stdout
            text = c.exec("cat", folder + "/ringfeed.prom").stdout
            assert "ringfeed_build_info{" in text, text[:500]
            log(f"#   without the folder: {s and 'condition no, result success'}; with it: "
                f"ringfeed.prom {len(text)} bytes, {text.count(chr(10))} lines")
            c.exec("rm", "-rf", folder)

        # ---- 4. the watchdog ----
        with checks.check(f"SIGSTOPped daemon: killed by the watchdog and restarted within "
                          f"WatchdogSec+RestartSec ({watchdog_s:.0f}+{restart_s:.0f} s); "
                          f"the client resumes"):
            s0 = wait_running("the service before the watchdog check")
            reader = Reader(read_tool, sock, *LONG, extra=["--reconnect-ms", "90000"])
            cleanup.append(reader.kill)
            wait_attached()
            c.exec("kill", "-STOP", s0["MainPID"])
            t = time.monotonic()
            s1 = wait_running("a restarted service",
                              pred=lambda s: s["MainPID"] not in ("0", s0["MainPID"]),
                              timeout=watchdog_s + restart_s + 60)
            took = time.monotonic() - t
            log(f"#   restarted {took:.1f} s after SIGSTOP: MainPID {s0['MainPID']} -> "
                f"{s1['MainPID']}, NRestarts {s0['NRestarts']} -> {s1['NRestarts']}")
            journal = c.exec("journalctl", "-b", "--no-pager", "-u", "ringfeedd").stdout
            assert re.search(r"[Ww]atchdog timeout", journal), \
                f"the journal says nothing of a watchdog timeout:\n{journal[-2000:]}"
            assert int(s1["NRestarts"]) == int(s0["NRestarts"]) + 1, \
                f"NRestarts {s0['NRestarts']} -> {s1['NRestarts']}, expected one more"
            # the watchdog fires WatchdogSec after the last ping at most
            # (the daemon pings every WatchdogSec/2), the restart RestartSec
            # later, then the daemon needs its start-up (a few seconds)
            bound = watchdog_s + restart_s + 10
            assert took <= bound, f"restarted {took:.1f} s after SIGSTOP, bound {bound:.0f} s"
            out = reader.json(timeout=180)
            assert out["reconnects"] >= 1, f"the client never reconnected: {out}"
            assert out["digest"] == digest_long, \
                f"digest across the watchdog restart {out['digest']} != bare run {digest_long}"
            log(f"#   client: {out['reconnects']} reconnect(s), digest {out['digest']}")
            new_main = int(s1["MainPID"])
            procs = c.procs(exe_in)
            main_host = next((hp for hp, nsp, _ in procs if nsp == new_main), None)
            left = [p for p in procs if p[1] != new_main and ppid(p[0]) != main_host]
            assert not left, f"processes of the killed daemon are left: {left}"

        # ---- 5. stop under load ----
        # The load: two clients told not to reconnect (--reconnect-ms 0).  If
        # one connects again anyway, the socket starts the service again:
        # this check judges the stopped instance, the next one that.
        readers = []
        with checks.check(f"systemctl stop under load: stopped within TimeoutStopSec "
                          f"({stop_s:.0f} s), nothing left, the socket still listening"):
            wait_running("the service before stop")
            readers += [Reader(read_tool, sock, "64", "1000", extra=["--reconnect-ms", "0"])
                        for _ in range(2)]
            for r in readers:
                cleanup.append(r.kill)
            wait_attached(2)
            instance = c.procs(exe_in)
            assert len(instance) == 3, f"expected the daemon and 2 workers: {instance}"
            since = c.exec("date", "+%Y-%m-%d %H:%M:%S").stdout.strip()
            t = time.monotonic()
            c.ctl("stop", "ringfeedd.service", timeout=stop_s + 30)
            took = time.monotonic() - t
            left = [p for p in instance if os.path.exists(f"/proc/{p[0]}")]
            s = c.show("ringfeedd.service", "ActiveState", "SubState")
            sk = c.show("ringfeedd.socket", "ActiveState", "SubState")
            journal = c.exec("journalctl", "--no-pager", "-u", "ringfeedd", "--since",
                             since).stdout
            log(f"#   stopped in {took:.2f} s; service now {s}; socket {sk}")
            assert took < stop_s, f"stop took {took:.1f} s, TimeoutStopSec is {stop_s:.0f} s"
            assert not left, f"processes of the stopped daemon are left: {left}"
            assert "ringfeedd.service: Deactivated successfully." in journal, \
                f"the stop was not clean (exit status 0, nothing killed):\n{journal[-2500:]}"
            assert not re.search(r"Killing process|timed out|status=\d", journal), \
                f"systemd had to kill or saw a failure:\n{journal[-2500:]}"
            assert sk["ActiveState"] == "active" and sk["SubState"] in ("listening", "running"), \
                f"the socket unit after stopping the service: {sk}"
            assert os.path.exists(sock), "the socket file went with the service"

        with checks.check("clients with --reconnect-ms 0 do not connect again after the stop "
                          "(the socket would start the service again)"):
            time.sleep(1)
            s = c.show("ringfeedd.service", "ActiveState", "SubState")
            journal = c.exec("journalctl", "--no-pager", "-u", "ringfeedd", "--since",
                             since).stdout
            restarted = [ln for ln in journal.splitlines()
                         if "Starting ringfeedd.service" in ln or " attached (" in ln]
            assert s["ActiveState"] == "inactive", (
                f"the service is {s['ActiveState']}/{s['SubState']} after stop: a client "
                f"told never to reconnect connected again and the socket started it:\n"
                + "\n".join(restarted))
            s = c.show("ringfeedd.socket", "ActiveState", "SubState")
            assert s == {"ActiveState": "active", "SubState": "listening"}, \
                f"the socket unit after stopping the service: {s}"
        for r in readers:
            r.kill()
        c.ctl("stop", "ringfeedd.service", check=False)

        # ---- 6. users: outside the group refused, a member reads ----
        with checks.check("a user outside the ringfeed group is refused, a member reads"):
            c.sh("id -u outsider >/dev/null 2>&1 || useradd -M -s /bin/sh outsider; "
                 "id -u member >/dev/null 2>&1 || useradd -M -s /bin/sh member; "
                 "usermod -aG ringfeed member")
            st = os.stat(sock)
            log(f"#   {SOCK_IN}: mode {oct(st.st_mode & 0o7777)}, "
                f"group {c.sh(f'stat -c %G {SOCK_IN}').stdout.strip()}")
            r = c.exec("runuser", "-u", "outsider", "--", ctl_in, "ping", check=False)
            assert r.returncode != 0, f"outsider: ringfeedctl ping succeeded: {r.stdout}"
            log(f"#   outsider through the 0660 socket file: {r.stderr.strip()}")
            r = c.exec("runuser", "-u", "member", "--", read_in, "--dataset", "fmnist",
                       "--batch", "256", "--epochs", "1", "--json", check=False, timeout=120)
            assert r.returncode == 0, f"member: ringfeed-read exited {r.returncode}: {r.stderr}"
            out = json.loads(r.stdout.strip().splitlines()[-1])
            assert out["digest"] == digest_one, \
                f"member's digest {out['digest']} != bare run {digest_one}"
            log(f"#   member (runuser, inside): ringfeed-read digest {out['digest']}")
            # the daemon's own fence: the socket file opened to everyone
            c.ctl("stop", "ringfeedd.service", "ringfeedd.socket")
            c.write("/etc/systemd/system/ringfeedd.socket.d/50-mode.conf",
                    "[Socket]\nSocketMode=0666\n")
            try:
                c.ctl("daemon-reload")
                c.ctl("start", "ringfeedd.socket")
                r = c.exec("runuser", "-u", "outsider", "--", ctl_in, "ping", check=False,
                           timeout=90)
                log(f"#   outsider through a 0666 socket file: exit {r.returncode}: "
                    f"{(r.stdout + r.stderr).strip()}")
                assert r.returncode == 1 and r.stderr.strip().endswith("(denied)"), \
                    f"outsider was not answered ERR denied: {r.stdout}{r.stderr}"
                # the same refusal on the wire, from the host as outsider's uid
                uid, gid = c.sh("id -u outsider; id -g outsider").stdout.split()
                r = run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                         sys.executable, "-c", RAW_PING, sock], check=False)
                log(f"#   outsider's uid from the host, raw PING: {r.stdout.strip()}")
                assert r.stdout.startswith("ERR denied"), \
                    f"raw PING as uid {uid}: {r.stdout!r} {r.stderr}"
                denied = stats(sock).get("connections.denied")
                assert denied and int(denied) >= 1, f"connections.denied {denied}"
                r = c.exec("runuser", "-u", "member", "--", ctl_in, "ping", check=False)
                assert r.returncode == 0, f"member refused: {r.stdout}{r.stderr}"
            finally:
                os.unlink(root + "/etc/systemd/system/ringfeedd.socket.d/50-mode.conf")
                c.ctl("stop", "ringfeedd.service", "ringfeedd.socket", check=False)
                c.ctl("daemon-reload", check=False)
                c.ctl("start", "ringfeedd.socket", check=False)

        # ---- 7. the journal's priorities ----
        with checks.check("journalctl -u ringfeedd carries the daemon's lines with their "
                          "priorities"):
            out = c.exec("journalctl", "-b", "--no-pager", "-u", "ringfeedd", "-o", "json",
                         timeout=60).stdout
            # lines whose level is known: journald takes a stderr line's
            # priority from its "<N>" prefix (sd-daemon(3)), and the daemon
            # leaves out what the journal adds itself (name, pid, level word)
            known = [("info", "6", re.compile(r"reads with mmap")),
                     ("error", "3", re.compile(r"reload refused")),
                     ("info", "6", re.compile(r"^(ready: |listening on )"))]
            seen, wrong, doubled = {}, [], []
            for line in out.splitlines():
                e = json.loads(line)
                msg = e.get("MESSAGE")
                if not isinstance(msg, str) or e.get("_COMM") not in ("ringfeedd", None):
                    continue
                if re.match(r"(ringfeedd\[\d+\]: |<\d>)", msg):
                    doubled.append(msg)
                for level, prio, pat in known:
                    if pat.search(msg):
                        seen[level] = seen.get(level, 0) + 1
                        if e.get("PRIORITY") != prio:
                            wrong.append(f"PRIORITY={e.get('PRIORITY')} (want {prio}): {msg}")
            log(f"#   daemon lines by level: {seen}")
            assert seen.get("info"), f"no daemon info lines in the journal:\n{out[-2000:]}"
            # (mmap is a choice, logged at info; the refused reload is an error)
            assert seen.get("error"), \
                f"expected info lines (mmap chosen) and error lines (the refused reload): {seen}"
            assert not wrong, (f"{len(wrong)} daemon line(s) with the wrong priority, e.g.\n" +
                               "\n".join(wrong[:3]))
            assert not doubled, ("daemon lines carry a prefix the journal adds itself or did "
                                 "not parse, e.g.\n" + "\n".join(doubled[:3]))

        # ---- 8. systemd-analyze security, running vs offline ----
        with checks.check("systemd-analyze security: the running unit's exposure equals "
                          "--offline on the unit file"):
            r = c.exec("systemd-analyze", "security", "--no-pager", "ringfeedd.service",
                       check=False, timeout=60)
            live = exposure(r.stdout)
            assert live, f"systemd-analyze security inside: {r.stdout[-1500:]}{r.stderr}"
            r = run(["systemd-analyze", "security", "--no-pager", "--offline=true",
                     f"--root={root}", unit_path], check=False)
            offline = exposure(r.stdout)
            assert offline, f"systemd-analyze security --offline: {r.stdout[-1500:]}{r.stderr}"
            doc = re.search(r"^# Exposure \(.*\): ([0-9.]+)", unit, re.M)
            log(f"#   running: {' '.join(live)}; offline: {' '.join(offline)}; "
                f"documented in the unit: {doc.group(1) if doc else 'none'}")
            assert live == offline, f"running {live} != offline {offline}"
            assert doc and doc.group(1) == live[0], \
                f"the unit's comment documents {doc.group(1) if doc else 'nothing'}, " \
                f"systemd says {live[0]}"

        # ---- 9. an upgrade to the next build under a reading trainer ----
        with checks.check("apt-get install of the next build while a trainer reads: the "
                          "daemon restarted on the new build, the trainer's digest equal, the "
                          "edited config kept"):
            c.ctl("start", "ringfeedd.socket", "ringfeedd.service")
            s0 = wait_running("the service before the upgrade")
            rev0 = build_revision(sock)
            reader = Reader(read_tool, sock, *LONG, extra=["--reconnect-ms", "90000"])
            cleanup.append(reader.kill)
            wait_attached()
            since = c.exec("date", "+%Y-%m-%d %H:%M:%S").stdout.strip()
            t = time.monotonic()
            r = c.exec("apt-get", "install", "-y", "--no-install-recommends", *debs_in[1],
                       check=False, timeout=600)
            took = time.monotonic() - t
            assert r.returncode == 0, f"apt-get install (upgrade) exited {r.returncode}:\n" \
                f"{r.stdout[-3000:]}{r.stderr[-2000:]}"
            upgraded = [ln for ln in r.stdout.splitlines() if ln.startswith(("Unpacking",
                                                                              "Setting up"))]
            s1 = wait_running("the service on the new build",
                              pred=lambda s: s["MainPID"] not in ("0", s0["MainPID"]))
            rev1 = build_revision(sock)
            assert rev1 != rev0 and rev1.endswith(f"+deb{versions[1]}"), \
                f"the running daemon's revision {rev1!r} (before: {rev0!r})"
            out = reader.json(timeout=300)
            assert out["digest"] == digest_long, \
                f"digest across the upgrade {out['digest']} != bare run {digest_long}"
            with open(root + conf_in) as f:
                assert f.read() == good_conf, f"the upgrade changed the edited {conf_in}"
            journal = c.exec("journalctl", "--no-pager", "-u", "ringfeedd", "--since",
                             since).stdout
            assert not re.search(r"bad DONE|build .* refused|another build", journal), \
                f"the journal shows builds mixed:\n{journal[-2500:]}"
            log("#   transcript:\n" + "\n".join(f"#     {ln}" for ln in upgraded))
            log(f"#   apt-get install took {took:.1f} s; MainPID {s0['MainPID']} -> "
                f"{s1['MainPID']}; revision {rev0} -> {rev1}\n"
                f"#   trainer: digest {out['digest']} (bare run {digest_long}), "
                f"{out['reconnects']} reconnect(s); {conf_in} kept as edited")

        # ---- 10. remove, then purge ----
        with checks.check("apt-get remove stops everything and keeps the edited config; purge "
                          "leaves no unit, user or file"):
            files = [f for f in c.exec("dpkg", "-L", *OURS).stdout.split()
                     if not os.path.isdir(root + f)]
            c.exec("rm", "-rf", data_in)  # the operator's data goes first
            r = c.exec("apt-get", "remove", "-y", *OURS, check=False, timeout=300)
            assert r.returncode == 0, f"apt-get remove: {r.stdout[-2000:]}{r.stderr[-2000:]}"
            assert not c.procs(exe_in), f"daemon processes after remove: {c.procs(exe_in)}"
            with open(root + conf_in) as f:
                assert f.read() == good_conf, f"remove changed the edited {conf_in}"
            # (dpkg: apt has no lists here, and a removed package without
            # conffiles is gone already)
            r = c.exec("dpkg", "--purge", *OURS, check=False, timeout=300)
            assert r.returncode == 0, f"dpkg --purge: {r.stdout[-2000:]}{r.stderr[-2000:]}"
            c.ctl("daemon-reload")
            left = [f for f in files if os.path.lexists(root + f)]
            left += [p for p in ("/etc/ringfeed", "/var/lib/ringfeed", "/var/cache/ringfeed")
                     if os.path.lexists(root + p)]
            # (exit 1 when nothing matches)
            units = c.ctl("list-unit-files", "--no-legend", "ringfeed*", check=False).stdout.strip()
            links = c.sh("find /etc/systemd/system -name 'ringfeed*' -not -path '*.d'",
                         check=False).stdout.split()
            user = c.sh("getent passwd ringfeed; getent group ringfeed", check=False).stdout
            sockdir = os.listdir(hostdir)
            log(f"#   after purge: {len(files)} packaged files gone; units {units!r}; "
                f"links {links}; user/group {user.strip()!r}; /run/ringfeed {sockdir}")
            assert not left, f"left after purge: {left}"
            assert not units and not links, f"units left: {units} {links}"
            assert not user.strip(), f"the ringfeed user or group is left: {user}"
            assert not sockdir, f"/run/ringfeed holds {sockdir} after purge"
    finally:
        for f in cleanup:
            with contextlib.suppress(Exception):
                f()
    log(f"{stamp()} {checks.n - len(checks.failed)}/{checks.n} checks passed")
    return 1 if checks.failed else 0


def ppid(pid):
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    return None


if __name__ == "__main__":
    def on_term(sig, frame):
        raise SystemExit(f"signal {sig}: tearing down")
    signal.signal(signal.SIGTERM, on_term)
    if len(sys.argv) != 2:
        sys.exit("usage: test_systemd.py BUILD_DIR")
    try:
        sys.exit(main(sys.argv[1]))
    except Skip as e:
        log(f"SKIP: {e}")
        sys.exit(SKIP)
    except (Fatal, AssertionError, OSError, subprocess.TimeoutExpired) as e:
        log(f"FAIL: {e}")
        sys.exit(1)
