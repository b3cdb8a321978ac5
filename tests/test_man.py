#!/usr/bin/python3
"""test_man.py - the man pages built from docs/man/*.scd: each renders with
man (or groff) without a warning and holds no stray roff request or scdoc
markup; each tool's page names every option and command its --help lists
(the built binaries are run for it); ringfeedd.conf(5) documents every key
of proto/conf.h with its default and what a reload does; libringfeed(3)
names every function of ringfeed.h, and its C example compiles and links
against the built library.

    test_man.py --conf-h proto/conf.h --header client/ringfeed.h
                --scd-dir docs/man --lib LIBRINGFEED.so
                --pages PAGE... --tools TOOL...             (prints TAP)

With no pages (scdoc was not found, -Dman=auto) the plan is a skip.
"""
import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

from tap import done, ok  # tests/tap.py

# tool binary -> its page and the subcommands whose own --help to read too
TOOLS = {
    "ringfeedd": ("ringfeedd.8", []),
    "ringfeedctl": ("ringfeedctl.1", []),
    "ringfeed-pack": ("ringfeed-pack.1", ["idx", "imagefolder", "tokens", "verify", "info", "show"]),
    "ringfeed-read": ("ringfeed-read.1", []),
    "ringfeed-train": ("ringfeed-train.1", []),
}
# sections every page has, and those a command's page has as well
SECTIONS_ALL = ["NAME", "DESCRIPTION", "ENVIRONMENT", "FILES", "SEE ALSO"]
SECTIONS_TOOL = ["SYNOPSIS", "OPTIONS", "EXIT STATUS", "EXAMPLES"]
# the requests and macros scdoc writes; any other line starting with '.' or
# "'" is text that roff would take for a request (and drop)
ROFF_OK = {"TH", "SH", "SS", "P", "PP", "LP", "RS", "RE", "nf", "fi", "IP", "TS",
           "TE", "T{", "T}", "ie", "el", "ds", "nh", "ad", "br", "sp", "in", "ti",
           "B", "I", "\\\"", "\\}", "na", "ft", "ll"}


def render(page, width=80):
    """The page as text, and what the formatter said on stderr."""
    env = dict(os.environ, MANWIDTH=str(width), MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
    if shutil.which("man"):
        cmd = ["man", "-l", "--warnings", page]
    else:
        cmd = ["groff", "-man", "-Tutf8", "-ww", "-rLL=%dn" % width, page]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    # plain text: no overstrike, and the hyphens groff may print as U+2010
    text = re.sub(r".\x08", "", r.stdout)
    text = text.replace("\u2010", "-").replace("\u2212", "-").replace("\u00ad", "")
    return r.returncode, text, r.stderr


def flat(text):
    """Text with lines joined where the formatter hyphenated a word."""
    return re.sub(r"-\n\s+", "-", re.sub(r"(\w)\u2010?-\n\s+(\w)", r"\1-\2", text))


def help_text(tool, sub=None):
    args = [tool] + ([sub] if sub else []) + ["--help"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def options_in(text):
    """Every --long and -x flag a --help text shows."""
    longs = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
    shorts = set(re.findall(r"(?<![\w-])(-[A-Za-z])(?![\w-])", text))
    return sorted(longs | shorts)


def commands_in(text):
    """The command names listed under a "commands:" header of --help."""
    m = re.search(r"^commands:\n((?:  \S.*\n?)+)", text, re.M)
    return [line.split()[0] for line in m.group(1).splitlines()] if m else []


def has_word(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def sections(text):
    return set(re.findall(r"^([A-Z][A-Z ]+[A-Z])$", text, re.M))


def conf_keys(conf_h):
    """The keys of proto/conf.h: from enum conf_key (every key there is)
    and from the file-top Keys list (which names them as the file does)."""
    src = open(conf_h).read()
    enum = re.search(r"enum conf_key \{(.*?)\};", src, re.S).group(1)
    names = [k for k in re.findall(r"CONF_([A-Z0-9_]+)", enum) if k != "KEY_COUNT"]
    per_name = {"DATASET": "dataset.NAME", "RECIPE": "recipe.NAME", "PLUGIN": "plugin.NAME",
                "MIXTURE": "mixture.NAME"}  # one line per NAME
    from_enum = [per_name.get(k, k.lower().replace("_", "-")) for k in names]
    listed = re.findall(r"^ \*   ([a-z][a-z0-9.A-Z-]*) = ", src, re.M)
    return from_enum, listed


def check_page_text(name, path, scd):
    dots = [f"{i}: {line}" for i, line in enumerate(open(scd).read().splitlines(), 1)
            if re.match(r"\s*[.']", line)]
    ok(not dots, f"{name}: no source line starts with '.' or \"'\" (scdoc drops it)",
       "\n".join(dots))
    rc, text, err = render(path)
    ok(rc == 0 and err == "" and "\n" in text, f"{name}: renders without a warning",
       err or f"exit {rc}")
    roff = open(path).read().splitlines()
    bad = [line for line in roff
           if line[:1] in ".'" and re.match(r"[.'](\S+)", line)
           and re.match(r"[.'](\S+)", line).group(1) not in ROFF_OK]
    ok(not bad, f"{name}: no text line that roff reads as a request", "\n".join(bad))
    # an underscore that opens a word or ends one (the prefix "rf_" aside),
    # or a backslash before * or _: scdoc markup that did not close
    stray = [line.strip() for line in text.splitlines()
             if re.search(r"(?:^|[\s(\[+,=])_[A-Za-z]|[A-Za-z0-9]_(?:\s|$)|\\[*_]",
                          re.sub(r"\b[rR][fF]_(?=[\s.,)]|$)", "rf", line))]
    ok(not stray, f"{name}: no scdoc markup left in the text", "\n".join(stray))
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conf-h", required=True)
    ap.add_argument("--header", required=True)
    ap.add_argument("--scd-dir", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--aug-table", required=True)
    ap.add_argument("--pages", nargs="*", default=[])
    ap.add_argument("--tools", nargs="*", default=[])
    a = ap.parse_args()

    if not a.pages:
        print("1..0 # SKIP the man pages were not built (scdoc not found)")
        return 0
    if not shutil.which("man") and not shutil.which("groff"):
        print("1..0 # SKIP neither man nor groff is installed")
        return 0

    pages = {os.path.basename(p): p for p in a.pages}
    texts = {}
    for name in sorted(pages):
        text = check_page_text(name, pages[name], os.path.join(a.scd_dir, name + ".scd"))
        texts[name] = flat(text)
        want = SECTIONS_ALL + (SECTIONS_TOOL if name.endswith((".1", ".8")) else [])
        missing = [s for s in want if s not in sections(text)]
        ok(not missing, f"{name}: has {', '.join(want)}", f"missing: {missing}")
    ok(sorted(pages) == sorted([p for p, _ in TOOLS.values()] +
                               ["ringfeedd.conf.5", "ringfeed.7", "libringfeed.3"]),
       "every page is built", sorted(pages))

    # every option and command of every tool's --help is in its page
    tools = {os.path.basename(t): t for t in a.tools}
    ok(sorted(tools) == sorted(TOOLS), "every tool is given", sorted(tools))
    for tool, (page, subs) in sorted(TOOLS.items()):
        if tool not in tools or page not in texts:
            continue
        for sub in [None] + subs:
            label = tool + (" " + sub if sub else "")
            rc, text = help_text(tools[tool], sub)
            opts = options_in(text)
            ok(rc == 0 and opts, f"{label} --help: exit 0, lists options", text)
            missing = [o for o in opts if not has_word(texts[page], o)]
            ok(not missing, f"{page}: every option of {label} --help ({len(opts)})",
               f"missing: {missing}")
            cmds = commands_in(text)
            if cmds:
                missing = [c for c in cmds if not re.search(
                    r"^\s+" + re.escape(c) + r"\b", texts[page], re.M)]
                ok(not missing, f"{page}: every command of {label} --help ({len(cmds)})",
                   f"missing: {missing}")
            if sub:
                ok(has_word(texts[page], sub), f"{page}: names the {sub} command")

    # ringfeed(7): the augmentation ops, each key with its default and range,
    # exactly as proto/aug_spec.h's table gives them (tests/aug_table)
    if "ringfeed.7" in texts:
        r = subprocess.run([a.aug_table], capture_output=True, text=True)
        scd = open(os.path.join(a.scd_dir, "ringfeed.7.scd")).read()
        ops = re.findall(r"^\*(\w+)\* \(", r.stdout, re.M)
        ok(r.returncode == 0 and len(ops) > 10, f"aug_table: the table's {len(ops)} ops",
           r.stdout + r.stderr)
        ok(r.stdout in scd, "ringfeed.7: the augmentation ops as proto/aug_spec.h's table "
           "gives them (paste tests/aug_table's output after a change to the table)",
           "\n".join(difflib.unified_diff(
               scd.split("\n\n*ColorJitter*")[-1].splitlines(),
               ("*ColorJitter*" + r.stdout.split("*ColorJitter*", 1)[-1]).splitlines(),
               "page", "table", lineterm=""))[:3000])
        missing = [o for o in ops if not has_word(texts["ringfeed.7"], o)]
        ok(not missing, "ringfeed.7: every op in the rendered page", f"missing: {missing}")

    # ringfeedd.conf(5): every key, each with its default and its reload rule
    conf = texts.get("ringfeedd.conf.5")
    if conf:
        from_enum, listed = conf_keys(a.conf_h)
        ok(len(from_enum) >= 15 and sorted(from_enum) == sorted(listed),
           f"proto/conf.h: enum conf_key and the Keys list agree ({len(from_enum)} keys)",
           f"enum: {sorted(from_enum)}\nlisted: {sorted(listed)}")
        keys_part = conf.split("\nKEYS\n", 1)[-1].split("\nENVIRONMENT\n", 1)[0]
        heads = [(m.start(), m.group(1)) for m in
                 re.finditer(r"^ {7}([a-z][a-z0-9A-Z.-]*) = \S+$", keys_part, re.M)]
        documented = [k for _, k in heads]
        missing = [k for k in from_enum if k not in documented]
        ok(not missing, "ringfeedd.conf.5: every key of proto/conf.h", f"missing: {missing}")
        extra = [k for k in documented if k not in from_enum]
        ok(not extra, "ringfeedd.conf.5: no key proto/conf.h lacks", f"extra: {extra}")
        blocks = {}
        for i, (start, key) in enumerate(heads):
            end = heads[i + 1][0] if i + 1 < len(heads) else len(keys_part)
            blocks[key] = keys_part[start:end]
        # two headings may share one text (allow-uid and allow-gid): a
        # heading with no text under it takes the next one's
        keys = list(blocks)
        bare = []
        for i, key in enumerate(keys):
            body = next((blocks[k] for k in keys[i:]
                         if blocks[k].split("\n", 1)[-1].strip()), "")
            if "Default:" not in body or "Reload:" not in body:
                bare.append(key)
        ok(not bare, "ringfeedd.conf.5: every key says its default and what a reload does",
           f"without: {bare}")

    # libringfeed(3): every function of ringfeed.h, and an example that builds
    lib = texts.get("libringfeed.3")
    if lib:
        header = open(a.header).read()
        funcs = sorted(set(re.findall(r"^[a-z].*?\b(rf_[a-z_]+)\(", header, re.M)))
        missing = [f for f in funcs if not has_word(lib, f)]
        ok(funcs and not missing, f"libringfeed.3: every function of ringfeed.h ({len(funcs)})",
           f"missing: {missing}")
        src = open(os.path.join(a.scd_dir, "libringfeed.3.scd")).read()
        blocks = re.findall(r"^```\n(.*?)^```", src, re.M | re.S)
        example = next((b for b in blocks if "int main" in b), None)
        ok(example is not None, "libringfeed.3: has a C example with main")
        cc = os.environ.get("CC", "cc").split()
        if example and shutil.which(cc[0]):
            code = re.sub(r"\\(.)", r"\1", example)
            with tempfile.TemporaryDirectory() as tmp:
                c = os.path.join(tmp, "example.c")
                open(c, "w").write(code)
                libdir = os.path.dirname(os.path.abspath(a.lib))
                r = subprocess.run(cc + ["-std=c11", "-Wall", "-Wextra", "-Werror",
                                         "-I" + os.path.dirname(os.path.abspath(a.header)),
                                         c, "-o", os.path.join(tmp, "example"),
                                         "-L" + libdir, "-lringfeed"],
                                   capture_output=True, text=True)
                ok(r.returncode == 0, "libringfeed.3: the example compiles and links",
                   r.stderr)

    return done()


if __name__ == "__main__":
    sys.exit(main())
