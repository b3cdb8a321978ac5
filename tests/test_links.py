#!/usr/bin/python3
"""test_links.py - every link in the documentation is live (TAP output; exit
1 when one is not).

    test_links.py SOURCE_ROOT

What it checks, in every tracked Markdown file (git ls-files, or a walk of
the tree without build folders when SOURCE_ROOT is not a git checkout):

- a relative link ([text](path), ![alt](path), [ref]: path) names a file or
  folder inside the repository, and its #anchor a heading of that Markdown
  file by GitHub's rule (the heading's text, lower-cased, everything but
  letters, digits, '_', '-' and spaces dropped, spaces made '-', a repeated
  heading numbered -1, -2, ...);
- no link leaves the repository: no URL (scheme://, mailto:, www.), no
  absolute path; and no URL in a man page either;
- every man reference name(N) in the Markdown files (outside code) and in
  docs/man/*.scd names a page in docs/man/, except the pages of other
  projects in OTHER_PAGES, which the system provides.

Before the tree, it runs the same checks on a small made-up tree with one
fault of each kind and wants each reported, so a checker that finds
nothing cannot pass.
"""
import os
import re
import subprocess
import sys
import tempfile

# man pages of other projects that the docs may name (installed by the
# system, not links): a ringfeed page must be in docs/man
OTHER_PAGES = {
    "chmod(1)", "fork(2)", "nproc(1)", "pkg-config(1)", "sched_getaffinity(2)",
    "sd_notify(3)", "socat(1)", "systemd.service(5)", "systemd.socket(5)", "top(1)",
}

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
AUTOLINK = re.compile(r"<((?:[a-z][a-z0-9+.-]*:|www\.)[^>\s]*)>", re.I)
URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|mailto:|www\.)\S+", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
MAN_REF = re.compile(r"(?<![\w.-])([a-z][a-z0-9_.+-]*[a-z0-9_])\(([1-9])\)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def tracked(root, suffix):
    """Paths (relative to root) of the tracked files ending in suffix."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                             check=True).stdout.decode()
        files = [f for f in out.split("\0") if f.endswith(suffix)]
        if files:
            return sorted(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for folder, dirs, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if not d.startswith((".", "build", "subprojects"))]
        found += [os.path.normpath(os.path.join(rel, n)) for n in names if n.endswith(suffix)]
    return sorted(found)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for i, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield i, line


def slug(heading):
    """GitHub's anchor for a heading's source text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)                            # inline HTML
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor the headings of a Markdown text give."""
    seen, out = {}, set()
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(line):
    """The link targets of one prose line (code spans left out)."""
    bare = CODE_SPAN.sub("", line)
    found = [m.group(1) for m in INLINE_LINK.finditer(bare)]
    m = REF_DEF.match(bare)
    if m:
        found.append(m.group(1))
    found += [m.group(1) for m in AUTOLINK.finditer(bare)]
    return found


def man_refs_md(line):
    """name(N) references of a Markdown prose line: in the prose, and code
    spans that are nothing else (`ringfeedd(8)`)."""
    refs = []
    for m in CODE_SPAN.finditer(line):
        whole = MAN_REF.fullmatch(m.group(2).strip())
        if whole:
            refs.append(whole.group(0))
    refs += [m.group(0) for m in MAN_REF.finditer(CODE_SPAN.sub("", line))]
    return refs


def check_md(root, rel, cache):
    """Problems of one Markdown file, as strings."""
    problems = []
    path = os.path.join(root, rel)
    text = open(path, encoding="utf-8").read()
    for n, line in prose_lines(text):
        where = f"{rel}:{n}"
        for target in links(line):
            if URL.match(target) or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                problems.append(f"{where}: {target}: a link out of the repository")
                continue
            file_part, _, anchor = target.partition("#")
            if file_part.startswith("/"):
                problems.append(f"{where}: {target}: an absolute path; link relative to the file")
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if os.path.relpath(dest, root).startswith(".."):
                problems.append(f"{where}: {target}: outside the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{where}: {target}: no such file "
                                f"({os.path.relpath(dest, root)})")
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    problems.append(f"{where}: {target}: an anchor into a file that is not "
                                    "Markdown")
                    continue
                if dest not in cache:
                    cache[dest] = anchors(open(dest, encoding="utf-8").read())
                if anchor not in cache[dest]:
                    problems.append(f"{where}: {target}: no heading '#{anchor}' in "
                                    f"{os.path.relpath(dest, root)}")
        bare = AUTOLINK.sub("", INLINE_LINK.sub("", CODE_SPAN.sub("", line)))
        for url in URL.findall(bare):  # a bare URL; links were judged above
            problems.append(f"{where}: {url}: a URL; the docs point only inside the repository")
        for ref in man_refs_md(line):
            problems += check_man_ref(root, where, ref)
    return problems


def check_scd(root, rel):
    """Problems of one man page source."""
    problems = []
    text = open(os.path.join(root, rel), encoding="utf-8").read()
    for n, line in prose_lines(text):
        where = f"{rel}:{n}"
        plain = line.replace("\\", "").replace("*", "")
        for url in URL.findall(plain):
            problems.append(f"{where}: {url}: a URL; the docs point only inside the repository")
        for m in MAN_REF.finditer(plain):
            problems += check_man_ref(root, where, m.group(0))
    return problems


def check_man_ref(root, where, ref):
    name, section = ref[:-3], ref[-2]
    if os.path.exists(os.path.join(root, "docs", "man", f"{name}.{section}.scd")):
        return []
    if ref in OTHER_PAGES:
        return []
    return [f"{where}: {ref}: no such page in docs/man (nor one of the system's pages this "
            "test knows)"]


def check_tree(root):
    problems, cache = [], {}
    mds = tracked(root, ".md")
    for rel in mds:
        problems += check_md(root, rel, cache)
    scds = [f for f in tracked(root, ".scd") if f.startswith("docs/man/")]
    for rel in scds:
        problems += check_scd(root, rel)
    return mds, scds, problems


BROKEN = {
    "README.md": "# Top\n\n## Two words\n\n[ok](docs/a.md#a-heading) [ok2](#two-words)\n"
                 "[missing](docs/nothing.md) [bad anchor](docs/a.md#no-such)\n"
                 "[out](https://example.org/x) [up](../outside.md) see ringfeed-nope(1)\n"
                 "```sh\n[in code](not/checked.md) range(3)\n```\n",
    "docs/a.md": "# A heading\n\nringfeedd(8) and `top(1)` and O(1).\n",
    "docs/man/ringfeedd.8.scd": "ringfeedd(8)\n\n# SEE ALSO\n\n*ringfeedd*(9), *top*(1), "
                                "https://example.org\n",
}
WANT = ["docs/nothing.md: no such file", "#no-such", "https://example.org/x: a link out",
        "../outside.md: outside the repository", "ringfeed-nope(1): no such page",
        "ringfeedd(9): no such page", "https://example.org: a URL"]


def self_test():
    """The checks on a made-up tree: (found every planted fault, problems)."""
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in BROKEN.items():
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        _, _, problems = check_tree(tmp)
    joined = "\n".join(problems)
    missed = [w for w in WANT if w not in joined]
    return not missed and len(problems) == len(WANT), missed, problems


def main():
    if len(sys.argv) != 2:
        print("usage: test_links.py SOURCE_ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    failed = 0

    good, missed, planted = self_test()
    print("1..2")
    if good:
        print(f"ok 1 - the checker reports each of {len(WANT)} planted faults, and nothing else")
    else:
        failed += 1
        print("not ok 1 - the checker misses planted faults or reports others")
        for m in missed:
            print(f"#   missed: {m}")
        for p in planted:
            print(f"#   reported: {p}")

    mds, scds, problems = check_tree(root)
    if problems or not mds:
        failed += 1
        print(f"not ok 2 - every link of {len(mds)} Markdown files and {len(scds)} man pages "
              "is live")
        for p in problems or ["no Markdown file found"]:
            print(f"#   {p}")
    else:
        print(f"ok 2 - every link of {len(mds)} Markdown files and {len(scds)} man pages is live")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
