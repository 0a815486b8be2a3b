#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every relative link in README.md and docs/*.md leads to a file that exists (and, with a
#fragment, to a heading of that file), and README.md links every page in docs/.
  check_links.py <repository root>"""
import pathlib
import re
import sys

LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def outside_fences(text):
    """The lines outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def anchors(path):
    """GitHub's anchors for the headings of a markdown file."""
    seen, out = {}, set()
    for line in outside_fences(path.read_text()):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    errors, readme_targets = [], set()
    for page in pages:
        prose = "\n".join(re.sub(r"`[^`]*`", "", line) for line in outside_fences(page.read_text()))
        for m in LINK.finditer(prose):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file_part, _, frag = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(root)}: ({target})"
            if not dest.exists():
                errors.append(f"{where}: no file {dest}")
                continue
            if page.name == "README.md" and page.parent == root:
                readme_targets.add(dest)
            if frag and dest.suffix == ".md" and frag not in anchors(dest):
                errors.append(f"{where}: no heading '#{frag}' in {dest.relative_to(root)}")
    for doc in sorted((root / "docs").iterdir()):
        if doc.is_file() and doc not in readme_targets:
            errors.append(f"README.md does not link docs/{doc.name}")
    for e in errors:
        print(e)
    print(f"{len(pages)} pages checked, {len(errors)} broken or missing links")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
