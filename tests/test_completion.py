#!/usr/bin/python3
"""test_completion.py - the bash completions in contrib/bash-completion/:
each file sources in a plain bash and registers its command; completing
offers the subcommands, every option the built tool's --help lists, the
words an option takes, files and folders where an option takes a path, and
the dataset names a daemon serves (the built ringfeedctl asks a fake
control server that answers DATASETS as ringfeedd does).

    test_completion.py --dir contrib/bash-completion --tools TOOL...   (prints TAP)
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from fake_ctl import Fake  # tests/fake_ctl.py
from tap import done, ok  # tests/tap.py

FUNCS = {
    "ringfeedd": "_ringfeedd",
    "ringfeedctl": "_ringfeedctl",
    "ringfeed-pack": "_ringfeed_pack",
    "ringfeed-read": "_ringfeed_read",
    "ringfeed-train": "_ringfeed_train",
}
DATASETS = ("OK 2\nfmnist-train samples=60000 kind=tensor shape=1x28x28 classes=10\n"
            "fmnist-test samples=10000 kind=tensor shape=1x28x28 classes=10\n")


def complete(files, cmd, words, env=None, cwd=None):
    """COMPREPLY after sourcing the completion of cmd with COMP_WORDS=words
    (the last word being completed), as a list; None when bash failed."""
    script = (f". {shlex.quote(files[cmd])} || exit 3\n"
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              f"{FUNCS[cmd]} || exit 4\n"
              "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, env=env, cwd=cwd, timeout=60)
    if r.returncode != 0:
        return None
    return [w for w in r.stdout.split("\n") if w]


def help_options(tool, sub=None):
    r = subprocess.run([tool] + ([sub] if sub else []) + ["--help"], capture_output=True,
                       text=True, timeout=60)
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r.stdout)))


def help_commands(tool):
    r = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
    m = re.search(r"^commands:\n((?:  \S.*\n?)+)", r.stdout, re.M)
    return [line.split()[0] for line in m.group(1).splitlines()] if m else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tools", nargs="+", required=True)
    a = ap.parse_args()
    if not shutil.which("bash"):
        print("1..0 # SKIP bash is not installed")
        return 0
    tools = {os.path.basename(t): os.path.abspath(t) for t in a.tools}
    files = {c: os.path.join(os.path.abspath(a.dir), c) for c in FUNCS}
    env = {k: v for k, v in os.environ.items()
           if k not in ("RINGFEED_SOCKET", "XDG_RUNTIME_DIR")}

    for cmd, path in sorted(files.items()):
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                            f". {shlex.quote(path)} && complete -p {cmd}"],
                           capture_output=True, text=True)
        ok(r.returncode == 0 and FUNCS[cmd] in r.stdout and r.stderr == "",
           f"{cmd}: the completion sources and registers {FUNCS[cmd]}", r.stderr)

    # every option of every --help is offered after "--"
    for cmd, subs in [("ringfeedd", [None]), ("ringfeedctl", [None]),
                      ("ringfeed-read", [None]), ("ringfeed-train", [None]),
                      ("ringfeed-pack", ["idx", "imagefolder", "tokens", "verify", "info"])]:
        for sub in subs:
            want = help_options(tools[cmd], sub)
            got = complete(files, cmd, [cmd] + ([sub] if sub else []) + ["--"], env) or []
            if cmd == "ringfeedctl":
                # the options a command takes after it (top, metrics)
                for after in ("top", "metrics"):
                    got += complete(files, cmd, [cmd, after, "--"], env) or []
            missing = [o for o in want if o not in got]
            label = cmd + (" " + sub if sub else "")
            ok(want and not missing, f"{label} --: every option of --help ({len(want)})",
               f"missing: {missing}; offered: {got}")

    c = lambda cmd, *words, **kw: complete(files, cmd, [cmd] + list(words), env, **kw)
    # ringfeedctl: its commands, top's options, a socket path
    want = help_commands(tools["ringfeedctl"])
    got = c("ringfeedctl", "") or []
    ok(want and all(w in got for w in want) and "top" in got,
       "ringfeedctl: every command of --help, and top", f"want {want}, got {got}")
    ok(c("ringfeedctl", "wo") == ["workers"], "ringfeedctl wo -> workers")
    ok(c("ringfeedctl", "--socket", "/tmp/x", "st") == ["status", "stats"],
       "ringfeedctl --socket PATH st -> status stats")
    ok(c("ringfeedctl", "--json", "d") == ["datasets"], "ringfeedctl --json d -> datasets")
    ok(c("ringfeedctl", "top", "--") == ["--once", "--interval", "--help"],
       "ringfeedctl top -- -> --once --interval --help")
    ok(c("ringfeedctl", "metrics", "--o") == ["--output"], "ringfeedctl metrics --o -> --output")
    ok(c("ringfeedctl", "workers", "") == ["auto"], "ringfeedctl workers: auto offered")
    ok(c("ringfeedctl", "workers", "auto", "") == [], "ringfeedctl workers auto: nothing more")
    ok(c("ringfeedd", "--workers", "a") == ["auto"], "ringfeedd --workers a -> auto")
    # ringfeed-pack: subcommands, the codec, files and folders
    ok(c("ringfeed-pack", "i") == ["idx", "imagefolder", "info"],
       "ringfeed-pack i -> idx imagefolder info")
    ok(c("ringfeed-pack", "idx", "--codec", "") == ["zstd", "none"],
       "ringfeed-pack idx --codec -> zstd none")
    # ringfeed-read and ringfeed-train: the words their options take
    ok(c("ringfeed-read", "--transform", "") == ["raw", "train", "eval", "none", "tokens"],
       "ringfeed-read --transform -> raw train eval none tokens")
    ok(c("ringfeed-train", "--backend", "c") == ["cpu", "cuda"],
       "ringfeed-train --backend c -> cpu cuda")
    ok(c("ringfeed-train", "--precision", "") == ["fp32", "bf16"],
       "ringfeed-train --precision -> fp32 bf16")
    ok(c("ringfeedd", "--log-level", "") == ["error", "warn", "info", "debug"],
       "ringfeedd --log-level -> error warn info debug")

    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "fmnist"))
        open(os.path.join(tmp, "fmnist.conf"), "w").close()
        open(os.path.join(tmp, "images.idx.gz"), "w").close()
        ok(sorted(c("ringfeedd", "--config", "fm", cwd=tmp) or []) == ["fmnist", "fmnist.conf"],
           "ringfeedd --config: file names")
        ok(c("ringfeedd", "--dataset", "train", "=", "fm", cwd=tmp) == ["fmnist"],
           "ringfeedd --dataset NAME=DIR: folders after the '='")
        ok(c("ringfeedd", "--dataset", "train=fm", cwd=tmp) == ["train=fmnist"],
           "ringfeedd --dataset NAME=DIR, one word: folders after the '='")
        ok(c("ringfeed-pack", "idx", "--images", "im", cwd=tmp) == ["images.idx.gz"],
           "ringfeed-pack idx --images: file names")
        ok(c("ringfeed-pack", "verify", "f", cwd=tmp) == ["fmnist"],
           "ringfeed-pack verify: folders")
        ok(c("ringfeed-read", "--dump-indices", "fmnist.", cwd=tmp) == ["fmnist.conf"],
           "ringfeed-read --dump-indices: file names")

        # dataset names from the daemon, through the built ringfeedctl
        sock = os.path.join(tmp, "rf.sock")
        fake = Fake(sock, {"DATASETS": DATASETS})
        try:
            read = tools["ringfeed-read"]
            got = complete(files, "ringfeed-read", [read, "--socket", sock, "--dataset", "fm"],
                           env)
            ok(got == ["fmnist-train", "fmnist-test"],
               "ringfeed-read --socket PATH --dataset fm -> the daemon's datasets", got)
            got = complete(files, "ringfeed-read", [read, "--dataset", "fmnist-te"],
                           dict(env, RINGFEED_SOCKET=sock))
            ok(got == ["fmnist-test"], "ringfeed-read --dataset, $RINGFEED_SOCKET", got)
            train = tools["ringfeed-train"]
            got = complete(files, "ringfeed-train", [train, "--socket", sock, "--eval", ""],
                           env)
            ok(got == ["fmnist-train", "fmnist-test"],
               "ringfeed-train --eval -> the daemon's datasets (ringfeedctl from ../tools)",
               got)
        finally:
            fake.close()
            os.unlink(sock)
        got = complete(files, "ringfeed-read",
                       [tools["ringfeed-read"], "--socket", sock, "--dataset", ""], env, cwd=tmp)
        ok(got == ["fmnist"], "--dataset with no daemon: only folders (packs served on demand), "
           "no error", got)

    return done()


if __name__ == "__main__":
    sys.exit(main())
