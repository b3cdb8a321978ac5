"""test_plugin.py - the operator's own ops as C plugins end to end
(daemon/plugin/ringfeed_transform.h, plugin.NAME in ringfeedd.conf,
augment=Plugin:name=NAME:params=TEXT).

contrib's sepia through the daemon equals a numpy reference, the same for
any worker count; a plugin whose init refuses refuses the ATTACH with its
message; one whose apply fails makes bad samples that are counted and
replaced while the stream goes on; one that crashes kills workers, which
the daemon survives and whose sample it quarantines; a spec naming a
plugin the config lacks is refused listing those it has; a config naming
a file that does not load, or has another ABI, stops the daemon at start
naming the file.
"""
import os
import signal
import subprocess

import numpy as np
import pytest
import torch

import ringfeed
from ringfeed import transforms as T
from conftest import BUILD, Daemon, ringfeedd, wait_for

N = 40
CRASH_AT = 13          # its first bytes are AB CD: the crash plugin aborts on it
FAIL_AT = (6, 22)      # first byte EE: the failapply plugin fails on them


def so(name):
    path = (os.path.join(BUILD, "contrib", "plugins", "sepia.so") if name == "sepia"
            else os.path.join(BUILD, "tests", f"rfplugin_{name}.so"))
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built (RINGFEED_BUILD_DIR={BUILD})", pytrace=False)
    return path


def _write(root):
    rng = np.random.default_rng(7)
    xs = rng.integers(0, 256, (N, 3, 9, 7), dtype=np.uint8)
    for i in range(N):  # the markers only where they are meant
        if xs[i, 0, 0, 0] in (0xAB, 0xEE):
            xs[i, 0, 0, 0] = 0
    xs[CRASH_AT, 0, 0, :2] = (0xAB, 0xCD)
    for i in FAIL_AT:
        xs[i, 0, 0, 0] = 0xEE
    with ringfeed.Writer(str(root / "cifar"), {"x": ringfeed.Tensor("uint8", (3, 9, 7)),
                                               "label": ringfeed.Scalar("int64")},
                         classes=N) as w:
        for i, x in enumerate(xs):  # the label is the index: which sample came
            w.write((x, i))
    return xs


def conf_text(names):
    return "".join(f"plugin.{n} = {so(n)}\n" for n in names)


@pytest.fixture(scope="module")
def served(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("plugin")
    xs = _write(root)
    conf = root / "ringfeedd.conf"
    conf.write_text(conf_text(["sepia", "failinit", "failapply", "crash"]))
    daemons = []
    for workers in (1, 3):
        d = Daemon({"cifar": str(root / "cifar")}, workers=workers,
                   extra=["--config", str(conf)]).start()
        request.addfinalizer(d.cleanup)
        daemons.append(d)
    return root, conf, xs, daemons


def batches(sock, augment=None, epochs=1):
    loader = ringfeed.Loader("cifar", batch_size=8, socket=sock, shuffle=False,
                             augment=augment)
    out = []
    for _ in range(epochs):
        for x, y in loader:
            out.append((x.clone(), y.clone()))
    loader.close()
    return out


def sepia(x, strength):
    """contrib/plugins/sepia.c's formula on a CHW uint8 array, in numpy."""
    v = x.astype(np.int64)
    r, g, b = v[0], v[1], v[2]
    k = ((393, 769, 189), (349, 686, 168), (272, 534, 131))
    t = [np.minimum(255, (a * r + bb * g + c * b) // 1000) for a, bb, c in k]
    return np.stack([(v[ch] * (100 - strength) + t[ch] * strength + 50) // 100
                     for ch in range(3)]).astype(np.uint8)


def test_sepia_equals_numpy(served):
    _, _, xs, (d, _) = served
    got = batches(d.sock, "Plugin:name=sepia:params=strength=60;p=1")
    objs = batches(d.sock, [T.Plugin("sepia", {"strength": 60, "p": 1})])
    assert str(T.Plugin("sepia", {"strength": 60, "p": 1})) == \
        "Plugin:name=sepia:params=strength=60;p=1"
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(got, objs))
    n = 0
    for x, y in got:
        for xi, yi in zip(x.numpy(), y.numpy()):
            assert np.array_equal(xi, sepia(xs[yi], 60)), int(yi)
            n += 1
    assert n == N
    st = d.stats()
    assert int(st["augment.plugin_images"]) >= N, st
    assert "augment.plugin_ns" in st


def test_deterministic_for_any_worker_count(served):
    _, _, xs, (d1, d3) = served
    spec = "Plugin:name=sepia:params=p=0.5,RandomHorizontalFlip"
    a, b = batches(d1.sock, spec, epochs=2), batches(d3.sock, spec, epochs=2)
    assert len(a) == len(b) == 10
    toned = 0
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
        for xi, yi in zip(xa.numpy(), ya.numpy()):
            plain, full = xs[yi], sepia(xs[yi], 100)
            cands = [plain, full, plain[:, :, ::-1], full[:, :, ::-1]]
            hit = [i for i, c in enumerate(cands) if np.array_equal(xi, c)]
            assert hit, int(yi)
            toned += hit[0] % 2
    assert 0 < toned < 2 * N, "p=0.5 toned every sample or none"


def test_init_failure_refuses_attach(served):
    d = served[3][0]
    with pytest.raises(ringfeed.Error) as e:
        ringfeed.Loader("cifar", batch_size=8, socket=d.sock,
                        augment="Plugin:name=failinit:params=k=v")
    assert 'failinit refuses params "k=v"' in str(e.value), str(e.value)
    # the contrib plugin's own checks refuse in the same way
    with pytest.raises(ringfeed.Error, match="strength takes an integer percent"):
        ringfeed.Loader("cifar", batch_size=8, socket=d.sock,
                        augment="Plugin:name=sepia:params=strength=500")


def test_unknown_plugin_lists_the_configured(served):
    d = served[3][0]
    with pytest.raises(ringfeed.Error) as e:
        ringfeed.Loader("cifar", batch_size=8, socket=d.sock, augment="Plugin:name=nosuch")
    msg = str(e.value)
    assert "no plugin named nosuch" in msg, msg
    assert "sepia failinit failapply crash" in msg, msg
    # a path is never a name: the spec's grammar refuses it
    with pytest.raises(ringfeed.Error, match="name"):
        ringfeed.Loader("cifar", batch_size=8, socket=d.sock, augment="Plugin:name=/tmp/x.so")


def test_apply_failure_is_a_bad_sample(served):
    _, _, xs, (d, _) = served
    before = d.stats()
    got = batches(d.sock, "Plugin:name=failapply")
    after = d.stats()
    labels = [int(v) for _, y in got for v in y]
    assert len(labels) == N
    for i in FAIL_AT:
        assert i not in labels and i + 1 in labels
    for x, y in got:
        for xi, yi in zip(x.numpy(), y.numpy()):
            assert np.array_equal(xi, xs[yi])
    bad = int(after["errors.bad.shape"]) - int(before["errors.bad.shape"])
    assert bad >= len(FAIL_AT), (before, after)
    assert int(after["errors.substituted"]) - int(before["errors.substituted"]) >= len(FAIL_AT)
    assert "failapply fails on a first byte of 0xEE" in d.read_log()
    assert int(after["workers.deaths"]) == int(before["workers.deaths"])


def test_crash_is_survived_and_quarantined(served):
    root, conf, xs, _ = served
    d = Daemon({"cifar": str(root / "cifar")}, workers=2,
               extra=["--config", str(conf)]).start()
    try:
        got = batches(d.sock, "Plugin:name=crash")
        labels = [int(v) for _, y in got for v in y]
        assert len(labels) == N and CRASH_AT not in labels
        st = d.stats()
        assert int(st["workers.deaths"]) >= 2, st
        assert int(st["errors.quarantined"]) >= 1, st
        assert "quarantined" in d.read_log()
        # still serving, the sample stays quarantined
        again = [int(v) for _, y in batches(d.sock, "Plugin:name=crash") for v in y]
        assert len(again) == N and CRASH_AT not in again
        assert d.proc.poll() is None
    finally:
        d.cleanup()


@pytest.mark.parametrize("line,words", [
    ("plugin.gone = /nonexistent/gone.so", ["plugin.gone", "/nonexistent/gone.so",
                                            "cannot load"]),
    ("plugin.wrongabi = {wrongabi}", ["plugin.wrongabi", "rfplugin_wrongabi.so",
                                      "ABI version", "it says 2"]),
    ("plugin.other = {failinit}", ["plugin.other", "rfplugin_failinit.so",
                                   'calls itself "failinit"']),
    ("plugin.rel = lib/x.so", ["plugin.rel", "absolute"]),
])
def test_bad_config_refused_at_start(tmp_path, line, words):
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(line.format(wrongabi=so("wrongabi"), failinit=so("failinit")) + "\n")
    p = subprocess.run([ringfeedd(), "--socket", str(tmp_path / "rf.sock"), "--workers", "1",
                        "--config", str(conf)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    for w in words:
        assert w in p.stderr + p.stdout, (w, p.stderr)


def test_reload_checks_plugins(served):
    """A reload naming a bad file is refused naming it (the running plugins
    stay); one adding a plugin restarts the workers, which then run it."""
    root, _, xs, _ = served
    conf = root / "reload.conf"
    conf.write_text(conf_text(["sepia"]))
    d = Daemon({"cifar": str(root / "cifar")}, workers=1,
               extra=["--config", str(conf)]).start()
    try:
        def reload():
            n = int(d.stats()["reloads"])
            d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: int(d.stats()["reloads"]) > n, "the reload")
            return d.stats()

        conf.write_text(conf_text(["sepia"]) + f"plugin.wrongabi = {so('wrongabi')}\n")
        st = reload()
        assert st["reloads.failed"] == "1", st
        log = d.read_log()
        assert "reload refused" in log and "rfplugin_wrongabi.so" in log, log[-2000:]
        got = batches(d.sock, "Plugin:name=sepia:params=strength=100")
        assert np.array_equal(got[0][0][0].numpy(), sepia(xs[0], 100))
        with pytest.raises(ringfeed.Error, match="its plugins: sepia "):
            ringfeed.Loader("cifar", batch_size=8, socket=d.sock,
                            augment="Plugin:name=failapply")
        conf.write_text(conf_text(["sepia", "failapply"]))
        st = reload()
        assert st["reloads.failed"] == "1", st
        assert "reload done: plugins" in d.read_log()
        wait_for(lambda: int(d.stats().get("workers.alive", 0)) >= 1, "the new worker")
        labels = [int(v) for _, y in batches(d.sock, "Plugin:name=failapply") for v in y]
        assert len(labels) == N and not set(FAIL_AT) & set(labels)
    finally:
        d.cleanup()


def test_plugin_refused_where_boxes_or_masks_would_not_follow(tmp_path):
    """A plugin's geometry is its own: on an image whose boxes follow it,
    a Plugin op is refused at ATTACH naming the field (the geometric ops
    of the table are followed: test_aug_targets.py)."""
    with ringfeed.Writer(str(tmp_path / "det"), {
            "image": ringfeed.Image(),
            "boxes": ringfeed.Ragged("float32", (4,), boxes="image")}) as w:
        for i in range(4):
            w.write({"image": np.full((12, 10, 3), i, np.uint8),
                     "boxes": np.array([[1, 1, 5, 6]], np.float32)})
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(conf_text(["sepia"]))
    d = Daemon({"det": str(tmp_path / "det")}, extra=["--config", str(conf)]).start()
    try:
        with pytest.raises(ringfeed.Error, match="field boxes"):
            ringfeed.Loader("det", batch_size=2, socket=d.sock, transform="none",
                            augment=[T.Plugin("sepia", {"strength": 50})])
        ok = ringfeed.Loader("det", batch_size=2, socket=d.sock, transform="none",
                             augment=[T.RandomHorizontalFlip(p=1)])  # followed: accepted
        assert len(ok) == 2
        ok.close()
    finally:
        d.cleanup()
