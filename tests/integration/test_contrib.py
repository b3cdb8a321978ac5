"""test_contrib.py - contrib/kubernetes/ringfeed.yaml, the DaemonSet and
trainer pod docs/operating.md describes: it parses (three objects: the
config, the DaemonSet, the pod), its parts agree (the socket folder both
mount and the config's socket in it, the trainer's RINGFEED_SOCKET, the
socket group the pod joins, IPC_LOCK for locked rings, the ring budget
under the daemon's memory limit), and its ringfeedd.conf passes
ringfeedd --check-config (its dataset folder, absent here, a warning).
"""
import os
import re
import subprocess

import yaml

from conftest import ringfeedd

SRC = os.path.join(os.path.dirname(__file__), "..", "..")
K8S = os.path.join(SRC, "contrib", "kubernetes", "ringfeed.yaml")


def size(text):
    m = re.fullmatch(r"(\d+)(Gi|G|Mi|M)?", text)
    assert m, text
    unit = {"Gi": 1 << 30, "G": 1 << 30, "Mi": 1 << 20, "M": 1 << 20, None: 1}[m.group(2)]
    return int(m.group(1)) * unit


def test_kubernetes_example(tmp_path):
    with open(K8S) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ConfigMap", "DaemonSet", "Pod"}, list(kinds)
    conf_text = kinds["ConfigMap"]["data"]["ringfeedd.conf"]
    conf = dict(re.findall(r"^([\w.-]+)\s*=\s*(.*)$", conf_text, re.M))

    ds = kinds["DaemonSet"]["spec"]["template"]["spec"]
    (daemon,) = ds["containers"]
    pod = kinds["Pod"]["spec"]
    (trainer,) = pod["containers"]
    vols = {v["name"]: v for v in ds["volumes"]}
    mounts = {m["name"]: m for m in daemon["volumeMounts"]}
    sock_dir = mounts["socket-dir"]["mountPath"]
    assert vols["socket-dir"]["hostPath"]["path"] == sock_dir
    assert os.path.dirname(conf["socket"]) == sock_dir, conf["socket"]
    pod_vols = {v["name"]: v for v in pod["volumes"]}
    assert pod_vols["socket-dir"]["hostPath"]["path"] == vols["socket-dir"]["hostPath"]["path"]
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert env["RINGFEED_SOCKET"] == conf["socket"], env
    assert int(conf["socket-group"]) in pod["securityContext"]["supplementalGroups"]
    assert "IPC_LOCK" in daemon["securityContext"]["capabilities"]["add"]
    assert size(conf["memory-budget"]) < size(daemon["resources"]["limits"]["memory"])
    assert daemon["command"][:2] == ["ringfeedd", "--config"]
    assert daemon["command"][2].startswith(mounts["config"]["mountPath"] + "/")

    path = tmp_path / "ringfeedd.conf"
    path.write_text(conf_text)
    r = subprocess.run([ringfeedd(), "--check-config", "--config", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning: dataset.imagenet" in r.stderr, r.stderr
