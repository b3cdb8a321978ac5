#!/usr/bin/env python3
"""test_wheel.py SRC VERSION - the wheel end to end, as a user installs it.

Builds the wheel from the source tree SRC with Debian's python3-build and
python3-mesonpy, offline (python3 -m build --wheel --no-isolation; the
pyproject's -Dwheel=true -Dcuda=disabled), then:

1. installs it with pip (--no-index) into a fresh venv of /usr/bin/python3
   with --system-site-packages (Debian's torch and numpy visible) and
   checks ringfeed.__version__ is VERSION (meson's), that ringfeedd,
   ringfeed-pack, ringfeed-read and ringfeedctl are the venv's commands
   and run, and that the venv's ringfeed-pack packs Fashion-MNIST's test
   split, the venv's ringfeedd serves it, ringfeed-read reads it and
   ringfeed.Loader (torch) delivers the IDX file's labels and pixels;
   then the Python suite's tests/integration/test_python.py runs on the
   venv's interpreter, its daemons and tools the venv's commands;
2. installs the same wheel into a venv of another CPython of the same
   version (pyenv's; $RINGFEED_OTHER_PYTHON names one), which has neither
   torch nor numpy, and reads the same stream through the buffer protocol
   (the Loader's output="buffer", its default there).

Exits 77 (SKIP) only when python3-build or python3-mesonpy is missing;
everything else that goes wrong is a failure.
"""
import glob
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC, VERSION = sys.argv[1], sys.argv[2]
FMNIST = "/usr/share/datasets/fashion-mnist"
COMMANDS = ("ringfeedd", "ringfeed-pack", "ringfeed-read", "ringfeedctl")
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def run(cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(cmd, env=kw.pop("env", ENV), text=True, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL: {cmd} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def other_python():
    """A CPython of /usr/bin/python3's version that is not Debian's."""
    if os.environ.get("RINGFEED_OTHER_PYTHON"):
        return os.environ["RINGFEED_OTHER_PYTHON"]
    want = "%d.%d." % sys.version_info[:2]
    pyenv = shutil.which("pyenv")
    root = (subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
            if pyenv else os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", want + "*", "bin", "python3")))
    if not found:
        sys.exit(f"FAIL: no other CPython {want}x under {root}/versions (pyenv install one, "
                 "or name one in RINGFEED_OTHER_PYTHON)")
    return found[-1]


def idx(path, magic, header):
    with gzip.open(path, "rb") as f:
        data = f.read()
    assert int.from_bytes(data[0:4], "big") == magic, path
    return data[header:]


def serve(venv, dataset, tmp):
    """The venv's ringfeedd serving dataset as "fm" on a socket in tmp."""
    sock = os.path.join(tmp, "rf.sock")
    log = open(os.path.join(tmp, "ringfeedd.log"), "wb")
    proc = subprocess.Popen([os.path.join(venv, "bin", "ringfeedd"), "--socket", sock,
                             "--workers", "2", "--dataset", f"fm={dataset}"],
                            stdout=log, stderr=log, env=ENV, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"FAIL: ringfeedd exited {proc.returncode}: "
                     + open(log.name, errors="replace").read())
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(sock)
                s.sendall(b"PING\n")
                if s.recv(64).startswith(b"OK pong"):
                    return proc, sock
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    sys.exit("FAIL: ringfeedd did not come up: " + open(log.name, errors="replace").read())


# Run inside each venv: the labels and pixels of one epoch in order, as the
# Loader delivers them with the output that venv gets by default.
READER = r'''
import sys, ringfeed
sock, want_output = sys.argv[1], sys.argv[2]
for mod in ("torch", "numpy"):
    try:
        __import__(mod)
        have = True
    except ImportError:
        have = False
    if want_output == "buffer" and have:
        sys.exit(f"{mod} imports here: not the interpreter without torch and numpy")
if want_output == "buffer":  # what needs numpy or torch says so
    for kw, says in ((dict(output="numpy"), 'output="buffer"'),
                     (dict(dtype="float32"), 'output="torch" or "numpy"')):
        try:
            ringfeed.Loader("fm", socket=sock, **kw)
            sys.exit(f"{kw} accepted without torch and numpy")
        except ringfeed.Error as e:
            assert says in str(e), str(e)
loader = ringfeed.Loader("fm", batch_size=1000, shuffle=False, socket=sock)
assert loader.output == want_output, loader.output
labels, pixels = bytearray(), bytearray()
for images, lab in loader:
    if want_output == "torch":
        import torch
        assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
        assert tuple(images.shape[1:]) == (1, 28, 28)
        labels += lab.to(torch.uint8).numpy().tobytes()
        pixels += images.numpy().tobytes()
    else:
        m, ml = memoryview(images), memoryview(lab)
        assert m.format == "B" and m.shape[1:] == (1, 28, 28), (m.format, m.shape)
        assert ml.format == "q" and ml.shape == (m.shape[0],), (ml.format, ml.shape)
        labels += bytes(ml.tolist())
        pixels += m.tobytes()
        assert list(loader.last.labels) == ml.tolist()
    del images, lab
loader.close()
sys.stdout.buffer.write(bytes([len(labels) >> 16 & 255, len(labels) >> 8 & 255,
                               len(labels) & 255]) + labels + pixels)
'''


def check_stream(venv, sock, output, labels, pixels):
    py = os.path.join(venv, "bin", "python")
    r = subprocess.run([py, "-c", READER, sock, output], env=ENV, capture_output=True,
                       cwd="/", timeout=300)
    if r.returncode != 0:
        sys.exit(f"FAIL: Loader in {venv} (output={output}):\n{r.stderr.decode()}")
    n = int.from_bytes(r.stdout[:3], "big")
    got_labels, got_pixels = r.stdout[3:3 + n], r.stdout[3 + n:]
    if got_labels != labels or got_pixels != pixels:
        sys.exit(f"FAIL: {venv}: the Loader's epoch ({n} labels) is not the IDX files' "
                 f"({len(labels)}): labels equal {got_labels == labels}, pixels equal "
                 f"{got_pixels == pixels}")
    print(f"ok: {output} Loader in {venv}: {n} labels and their pixels are the IDX files'")


def install(python, venv, wheel, system_site):
    run([python, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [venv])
    run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--no-index",
         "--no-deps", wheel])
    py = os.path.join(venv, "bin", "python")
    out = run([py, "-c", "import ringfeed; print(ringfeed.__version__); print(ringfeed.__file__)"],
              cwd="/")
    version, where = out.split()
    if version != VERSION or not where.startswith(venv + "/"):
        sys.exit(f"FAIL: {venv}: ringfeed {version} from {where}, want {VERSION} from the venv")
    print(f"ok: {venv}: ringfeed.__version__ {version}, imported from {where}")
    path = os.path.join(venv, "bin") + os.pathsep + ENV.get("PATH", "")
    for cmd in COMMANDS:
        exe = shutil.which(cmd, path=path)
        if exe != os.path.join(venv, "bin", cmd):
            sys.exit(f"FAIL: {cmd} on the venv's PATH is {exe}")
        run([exe, "--version" if cmd == "ringfeedd" else "--help"])
    print(f"ok: {venv}: {', '.join(COMMANDS)} are its commands and run")


def python_suite(venv, tmp):
    """tests/integration/test_python.py on the venv's python, its
    RINGFEED_BUILD_DIR a tree of links to the venv's commands (conftest.py
    finds daemon/ringfeedd and tools/* there), ringfeed the venv's."""
    tree = os.path.join(tmp, "venv-tree")
    for rel in ("daemon/ringfeedd", "tools/ringfeed-pack", "tools/ringfeedctl",
                "tools/ringfeed-read"):
        os.makedirs(os.path.join(tree, os.path.dirname(rel)), exist_ok=True)
        os.symlink(os.path.join(venv, "bin", os.path.basename(rel)), os.path.join(tree, rel))
    env = dict(ENV, RINGFEED_BUILD_DIR=tree, PYTHONDONTWRITEBYTECODE="1")
    env.pop("RINGFEED_PACK", None)
    py = os.path.join(venv, "bin", "python")
    run([py, "-c", "import ringfeed, sys; assert ringfeed.__file__.startswith(sys.prefix)"],
        env=env, cwd=SRC)
    print(run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "tests/integration/test_python.py"], env=env, cwd=SRC).splitlines()[-1])
    print(f"ok: tests/integration/test_python.py passed on {venv}")


def main():
    for mod in ("build", "mesonpy"):
        r = subprocess.run(["/usr/bin/python3", "-c", f"import {mod}"], capture_output=True)
        if r.returncode != 0:
            print(f"SKIP: /usr/bin/python3 has no {mod} (apt-get install python3-build "
                  "python3-mesonpy)")
            return 77
    other = other_python()
    tmp = tempfile.mkdtemp(prefix="rf-wheel-")
    daemon = None
    try:
        run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation", "-o",
             os.path.join(tmp, "dist"), SRC], cwd=tmp)
        wheels = glob.glob(os.path.join(tmp, "dist", "ringfeed-*.whl"))
        tag = "cp%d%d-cp%d%d-linux" % (sys.version_info[:2] * 2)
        if len(wheels) != 1 or tag not in wheels[0]:
            sys.exit(f"FAIL: want one {tag} wheel, got {wheels}")
        wheel = wheels[0]
        print("ok: built", os.path.basename(wheel))

        v1 = os.path.join(tmp, "venv")
        install("/usr/bin/python3", v1, wheel, system_site=True)
        pack = os.path.join(tmp, "fm-test")
        run([os.path.join(v1, "bin", "ringfeed-pack"), "idx",
             "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
             "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", pack])
        labels = idx(f"{FMNIST}/t10k-labels-idx1-ubyte.gz", 0x801, 8)
        pixels = idx(f"{FMNIST}/t10k-images-idx3-ubyte.gz", 0x803, 16)
        daemon, sock = serve(v1, pack, tmp)
        run([os.path.join(v1, "bin", "ringfeedctl"), "--socket", sock, "datasets"])
        run([os.path.join(v1, "bin", "ringfeed-read"), "--socket", sock, "--dataset", "fm",
             "--batch", "1000", "--epochs", "1"])
        print("ok: the venv's ringfeed-pack, ringfeedd, ringfeedctl and ringfeed-read")
        check_stream(v1, sock, "torch", labels, pixels)
        python_suite(v1, tmp)

        v2 = os.path.join(tmp, "venv-bare")
        install(other, v2, wheel, system_site=False)
        check_stream(v2, sock, "buffer", labels, pixels)
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
