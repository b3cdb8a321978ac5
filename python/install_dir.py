"""Prints where `meson install` puts the ringfeed package for this
interpreter and install prefix (argv[1]): a directory it searches.

Debian's interpreter searches /usr/local/lib/python3.X/dist-packages (its
posix_local scheme, for the /usr/local prefix) and
/usr/lib/python3/dist-packages (deb_system, for /usr); elsewhere, and on
other systems, it is the prefix's lib/python3.X/site-packages."""
import sys
import sysconfig

prefix = sys.argv[1].rstrip("/") or "/"
schemes = sysconfig.get_scheme_names()
if prefix == "/usr/local" and "posix_local" in schemes:
    path = sysconfig.get_path("platlib", "posix_local", vars={"base": "/usr", "platbase": "/usr"})
elif prefix == "/usr" and "deb_system" in schemes:
    path = sysconfig.get_path("platlib", "deb_system", vars={"base": "/usr", "platbase": "/usr"})
else:
    path = sysconfig.get_path("platlib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
print(path)
