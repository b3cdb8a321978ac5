#!/usr/bin/env python3
"""test_debian.py SRC BUILD - the Debian packages, as lintian and a node see them.

Builds the packages of the source tree SRC with scripts/deb into BUILD/deb
(a no-op when they are fresh; scripts/test builds them first), then checks
what needs no running system (tests/system/test_systemd.py installs,
upgrades and purges them under a booted systemd):

1. lintian --pedantic over the build's .changes: no error and no warning
   (each accepted tag is an override in debian/ with its reason); the
   informational tags are printed;
2. the five packages, and that none depends on CUDA: no CUDA package in
   Depends and no CUDA library in the NEEDED list of any ELF file they
   ship (libringfeed, ringfeed-train and the Python extension load the
   driver and cuBLAS at run time);
3. libringfeed-dev: the headers under /usr/include/ringfeed/, and a client
   built from the unpacked tree with its pkg-config file and linked
   against the unpacked libringfeed0 (#include <ringfeed.h>);
4. ringfeedd: its one conffile, /etc/ringfeed/ringfeedd.conf, serves no
   dataset; the daemon's user is made (systemd-sysusers) before its folder
   (systemd-tmpfiles); the units are enabled and started; the daemon's
   --version names the commit and the package version.

Exits 77 (SKIP) only when dpkg-buildpackage, debhelper or lintian is
missing; everything else that goes wrong is a failure.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, BUILD = sys.argv[1], sys.argv[2]
OURS = {"ringfeedd", "libringfeed0", "libringfeed-dev", "python3-ringfeed", "ringfeed-train"}
CUDA = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|nccl|nvrtc)\.so|cuda", re.I)
SKIP = 77
failed = []


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def check(ok, what):
    print(("ok - " if ok else "not ok - ") + what, flush=True)
    if not ok:
        failed.append(what)


def main():
    if not shutil.which("lintian"):
        print("SKIP: lintian is not installed (scripts/install-deps installs it)")
        return SKIP
    out = os.path.join(BUILD, "deb")
    r = run([os.path.join(SRC, "scripts", "deb"), out])
    if r.returncode == SKIP:
        print(f"SKIP: {r.stderr.strip()}")
        return SKIP
    if r.returncode != 0:
        print(r.stdout[-3000:] + r.stderr[-2000:])
        print("not ok - scripts/deb failed")
        return 1
    debs = {os.path.basename(d).split("_")[0]: d for d in glob.glob(os.path.join(out, "*.deb"))
            if "-dbgsym_" not in d}
    check(set(debs) == OURS, f"the packages: {sorted(debs)}")
    changes = glob.glob(os.path.join(out, "*.changes"))

    # 1. lintian
    r = run(["lintian", "--pedantic", "--display-info", "--fail-on", "none"] + changes)
    tags = [ln for ln in r.stdout.splitlines() if re.match(r"^[EWIPX]: ", ln)]
    bad = [ln for ln in tags if ln[0] in "EW"]
    for ln in tags:
        print(f"#   {ln}")
    check(r.returncode == 0 and not bad,
          f"lintian --pedantic: {len(bad)} error(s) or warning(s), "
          f"{len(tags) - len(bad)} other tag(s) (exit {r.returncode} {r.stderr.strip()[-300:]})")

    tmp = tempfile.mkdtemp(prefix="rfdeb-")
    try:
        tree = os.path.join(tmp, "root")
        for name, deb in sorted(debs.items()):
            run(["dpkg-deb", "-x", deb, tree], check=True)

        # 2. no CUDA anywhere
        for name, deb in sorted(debs.items()):
            depends = run(["dpkg-deb", "-f", deb, "Depends"], check=True).stdout.strip()
            check(not CUDA.search(depends), f"{name} Depends has no CUDA: {depends}")
        elves = 0
        for dirpath, _, names in os.walk(tree):
            for n in names:
                p = os.path.join(dirpath, n)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                with open(p, "rb") as f:
                    if f.read(4) != b"\x7fELF":
                        continue
                elves += 1
                needed = re.findall(r"\(NEEDED\).*\[(.*)\]", run(["readelf", "-d", p]).stdout)
                cuda = [lib for lib in needed if CUDA.search(lib)]
                check(not cuda, f"{os.path.relpath(p, tree)}: no CUDA in NEEDED {cuda or ''}")
        check(elves >= 7, f"{elves} ELF files looked at")

        # 3. the development package builds a client
        inc = os.path.join(tree, "usr/include/ringfeed")
        check(sorted(os.listdir(inc)) == ["ringfeed.h", "ringfeed_transform.h"],
              f"/usr/include/ringfeed holds {sorted(os.listdir(inc))}")
        pcdir = glob.glob(os.path.join(tree, "usr/lib/*/pkgconfig"))
        env = dict(os.environ, PKG_CONFIG_PATH=pcdir[0] if pcdir else "",
                   PKG_CONFIG_SYSROOT_DIR=tree, PKG_CONFIG_LIBDIR="")
        flags = run(["pkg-config", "--cflags", "--libs", "ringfeed"], env=env)
        src = os.path.join(SRC, "tests", "pkgconfig_client.c")
        exe = os.path.join(tmp, "client")
        cc = run(["cc", src, "-o", exe] + flags.stdout.split())
        check(flags.returncode == 0 and cc.returncode == 0,
              f"a client from pkg-config ringfeed ({flags.stdout.strip()}) "
              f"{flags.stderr.strip()}{cc.stderr.strip()}")
        if cc.returncode == 0:
            libdir = os.path.dirname(glob.glob(os.path.join(tree, "usr/lib/*/libringfeed.so.0"))[0])
            r = run([exe], env=dict(os.environ, LD_LIBRARY_PATH=libdir))
            check(r.returncode == 0, f"the client runs against the packaged library {r.stderr}")

        # 4. the daemon's package
        ctl = os.path.join(tmp, "ctl")
        run(["dpkg-deb", "-e", debs["ringfeedd"], ctl], check=True)
        with open(os.path.join(ctl, "conffiles")) as f:
            conffiles = f.read().split()
        check(conffiles == ["/etc/ringfeed/ringfeedd.conf"], f"conffiles: {conffiles}")
        with open(tree + "/etc/ringfeed/ringfeedd.conf") as f:
            conf = f.read()
        check(not re.search(r"^\s*dataset\.", conf, re.M), "the shipped config serves no dataset")
        with open(os.path.join(ctl, "postinst")) as f:
            postinst = f.read()
        users = postinst.find("systemd-sysusers")
        folders = postinst.find("systemd-tmpfiles")
        check(0 <= users < folders, "postinst makes the user (sysusers) before its folder "
              "(tmpfiles)")
        for unit in ("ringfeedd.socket", "ringfeedd.service", "ringfeed-metrics.timer"):
            check(f"deb-systemd-helper enable '{unit}'" in postinst and
                  re.search(rf"deb-systemd-invoke \$_dh_action .*'{re.escape(unit)}'", postinst),
                  f"postinst enables and starts {unit}")
        version = run(["dpkg-deb", "-f", debs["ringfeedd"], "Version"]).stdout.strip()
        libdir = os.path.dirname(glob.glob(os.path.join(tree, "usr/lib/*/libringfeed.so.0"))[0])
        r = run([tree + "/usr/sbin/ringfeedd", "--version"])
        check(r.stdout.strip().endswith(f"+deb{version})"),
              f"ringfeedd --version: {r.stdout.strip()} (package {version})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'FAIL' if failed else 'PASS'}: {len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
