#!/usr/bin/env python3
"""check-doc-refs.py - every reference to a Markdown document resolves: `docs/NAME.md §N[.M]` and
`NAME.md §N` need the file in the repository and a heading `## N.` / `### N.M` in it (lists such as
`§1, §3.8` and ranges such as `§3-4` check each number), `§9 (table stake N)` needs item N in that
section, and a bare `NAME.md` or `path/NAME.md` needs the file.

    check-doc-refs.py [SOURCE_ROOT]

Scans the tracked source, build, script and Markdown files (`git ls-files` when SOURCE_ROOT is a
git checkout's top, else a walk of SOURCE_ROOT that leaves out build folders). Prints
file:line: problem for each broken reference and exits 1 when there is one.
"""
import os
import re
import subprocess
import sys

# Source, build, script and Markdown files: where a reference can be written.
SUFFIXES = (".c", ".h", ".cc", ".cu", ".inc", ".py", ".sh", ".md", ".sql", ".ui", ".xml", ".in",
            ".css", ".txt")
NAMES = ("meson.build", "meson_options.txt", "run.sh", "run")

# docs/runs/ are dated logs of past runs: they cite documents and sections as they were that day
# (some since renamed or renumbered) and are kept as written, so they are not checked.
SKIP_DIRS = ("docs/runs/",)

# Files a tool reads from or writes into a training run's folder, not files of this repository:
# tools/model_card.py reads a run's examples.md and notes.md.
RUN_FILES = {"examples.md", "notes.md"}
# The placeholder that descriptions of this check itself write (`path/NAME.md §N`).
PLACEHOLDER = "NAME.md"

# `path/NAME.md` optionally in backticks, then optionally ` §N[.M]` with more numbers after
# `,` / `-` / `–` / `and`; the name may not continue a longer word or URL.
NUM = r"\d+(?:\.\d+)*"
REF = re.compile(r"(?<![\w./-])((?:\.{1,2}/|[\w-]+/)*[\w-]+\.md)\b`?"
                 r"(?:'s)?(\s*§\s*(" + NUM + r")((?:\s*(?:,|-|–|and)\s*§?\s*" + NUM +
                 r"(?![\w.]*\.md))*)(\s*\(table stakes?\s+(\d+)\))?)?")
MORE = re.compile(NUM)
HEADING = re.compile(r"^#{2,4}\s+(" + NUM + r")\.?(?:\s|$)")
ITEM = re.compile(r"^\s*(\d+)\.\s")


def tracked_files(root):
    """Paths relative to root, '/'-separated."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(root):
            out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                                 check=True).stdout
            return [p for p in out.decode("utf-8", "replace").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        # a meson build folder holds meson-private/; hidden folders are VCS and editor state
        # (.ci/ is the project's own)
        dirs[:] = sorted(x for x in dirs
                         if (not x.startswith(".") or x == ".ci")
                         and not os.path.isdir(os.path.join(d, x, "meson-private")))
        for n in names:
            files.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return files


def wanted(path):
    if any(path.startswith(s) for s in SKIP_DIRS):
        return False
    base = path.rsplit("/", 1)[-1]
    return base in NAMES or base.endswith(SUFFIXES)


class Doc:
    """A Markdown file's section numbers and, per section, its numbered list items."""

    def __init__(self, text):
        self.sections = {}
        current = None
        for line in text.splitlines():
            m = HEADING.match(line)
            if m:
                current = m.group(1)
                self.sections[current] = set()
                continue
            m = ITEM.match(line)
            if m and current is not None:
                # an item belongs to its section and to the section's parents (§9 holds 9.2's)
                parts = current.split(".")
                for k in range(1, len(parts) + 1):
                    self.sections.setdefault(".".join(parts[:k]), set()).add(int(m.group(1)))


def resolve(root, files, referrer, name):
    """The repository path `name` means when written in `referrer`, or None."""
    if "/" in name:
        for base in (os.path.dirname(referrer), ""):
            p = os.path.normpath(os.path.join(base, name)).replace(os.sep, "/")
            if p in files:
                return p
        return None
    # a bare name: beside the referrer, at the top, in docs/, else the one file of that name
    for base in (os.path.dirname(referrer), "", "docs"):
        p = os.path.join(base, name).replace(os.sep, "/").lstrip("/")
        if p in files:
            return p
    same = sorted(p for p in files if p.rsplit("/", 1)[-1] == name)
    return same[0] if len(same) == 1 else None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    all_files = tracked_files(root)
    files = set(all_files)
    docs = {}
    problems = []
    n_refs = 0
    for path in sorted(p for p in all_files if wanted(p)):
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue  # binary or unreadable: no references in it
        for i, line in enumerate(lines, 1):
            for m in REF.finditer(line):
                name = m.group(1)
                if name in RUN_FILES or name.rsplit("/", 1)[-1] == PLACEHOLDER:
                    continue
                n_refs += 1
                target = resolve(root, files, path, name)
                if target is None:
                    problems.append(f"{path}:{i}: {name} is not in the repository")
                    continue
                if not m.group(2):
                    continue
                if target not in docs:
                    with open(os.path.join(root, target), encoding="utf-8") as f:
                        docs[target] = Doc(f.read())
                doc = docs[target]
                numbers = [m.group(3)] + MORE.findall(m.group(4) or "")
                for n in numbers:
                    if n not in doc.sections:
                        problems.append(f"{path}:{i}: {name} has no section {n} "
                                        f"(no heading '## {n}.' or '### {n}' in {target})")
                if m.group(6):
                    stake = int(m.group(6))
                    if stake not in doc.sections.get(m.group(3), set()):
                        problems.append(f"{path}:{i}: {name} §{m.group(3)} has no item {stake}")
    for p in problems:
        print(p)
    print(f"check-doc-refs: {n_refs} references checked, {len(problems)} broken"
          + ("" if not problems else " (docs/runs/ is not checked: dated run logs)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
