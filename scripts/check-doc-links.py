#!/usr/bin/python3
"""Check the relative links of README.md and docs/*.md.

Every markdown link [text](target) and image ![alt](target) whose target is not
http(s) or mailto must name a file or folder that exists, relative to the page;
a #anchor into a markdown file (or into the page itself) must name one of its
headings, slugged as GitHub does: lowercase, spaces to '-', punctuation other
than '-' and '_' dropped, a repeated heading getting -1, -2, ...

  scripts/check-doc-links.py [ROOT]    ROOT: the repository (default: this script's ../)
  scripts/check-doc-links.py --self-test

Exit 0 with one summary line when every link is found; exit 1 with one line per
dead link, "FILE:LINE: dead link TARGET".
"""

import os
import re
import sys
import tempfile

# [text](target) or ![alt](target), with an optional "title" after the target.
# Text may hold one level of brackets ([`a[0]`](x)); the target may be <bracketed>.
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)')
FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
INLINE_CODE = re.compile(r'`+[^`]*`+')
EXTERNAL = ('http://', 'https://', 'mailto:')


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link keeps its text
    text = text.lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def markdown_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    fenced = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        for _, line in markdown_lines(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else '%s-%d' % (base, n))
        cache[path] = found
    return cache[path]


def links(path):
    """(line number, target) of every link of a page, code spans left out."""
    for number, line in markdown_lines(path):
        for m in LINK.finditer(INLINE_CODE.sub('', line)):
            target = m.group(1)
            if target.startswith('<') and target.endswith('>'):
                target = target[1:-1]
            yield number, target


def dead(page, target):
    """Whether a link target of page names nothing."""
    if target.lower().startswith(EXTERNAL):
        return False
    file_part, _, anchor = target.partition('#')
    if file_part:
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), file_part))
        if not os.path.exists(resolved):
            return True
    else:
        resolved = page
    if anchor and resolved.endswith('.md') and os.path.isfile(resolved):
        return anchor.lower() not in anchors(resolved)
    return False


def pages(root):
    found = [os.path.join(root, 'README.md')]
    docs = os.path.join(root, 'docs')
    if os.path.isdir(docs):
        found += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith('.md'))
    return [p for p in found if os.path.isfile(p)]


def check(root, out=sys.stdout, err=sys.stderr):
    checked, failures = 0, []
    files = pages(root)
    for page in files:
        for number, target in links(page):
            checked += 1
            if dead(page, target):
                failures.append('%s:%d: dead link %s' % (os.path.relpath(page, root), number, target))
    for line in failures:
        print(line, file=err)
    if failures:
        return 1
    print('check-doc-links: %d links in %d files, all found' % (checked, len(files)), file=out)
    return 0


def self_test():
    """A tiny tree with one good link of each kind and one dead link of each kind."""
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, 'docs'))
        with open(os.path.join(root, 'README.md'), 'w') as f:
            f.write('# Top\n\n## Build options, and install\n\n'
                    '[ok](docs/a.md) [ok](docs/a.md#the-a_page-10) [ok](#build-options-and-install)\n'
                    '![ok](docs/a.md) [ok](https://example.com/x#y) `[no](code.md)`\n'
                    '```\n[no](fenced.md)\n```\n'
                    '[dead](docs/missing.md)\n'
                    '[dead](docs/a.md#nowhere)\n')
        with open(os.path.join(root, 'docs', 'a.md'), 'w') as f:
            f.write('# The `a_page` (1.0)\n\n[ok](../README.md#top) [dead](#top)\n')
        out, err = _Lines(), _Lines()
        status = check(root, out, err)
        want = ['README.md:10: dead link docs/missing.md',
                'README.md:11: dead link docs/a.md#nowhere',
                'docs/a.md:3: dead link #top']
        if status != 1 or err.lines != want:
            print('check-doc-links: self-test failed: exit %d, %r' % (status, err.lines), file=sys.stderr)
            return 1
        os.remove(os.path.join(root, 'docs', 'a.md'))
        with open(os.path.join(root, 'README.md'), 'w') as f:
            f.write('# Top\n\n[ok](#top)\n')
        out = _Lines()
        if check(root, out, _Lines()) != 0 or out.lines != ['check-doc-links: 1 links in 1 files, all found']:
            print('check-doc-links: self-test failed on a good tree: %r' % out.lines, file=sys.stderr)
            return 1
    print('check-doc-links: self-test passed')
    return 0


class _Lines:
    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines += [line for line in text.split('\n') if line]


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith('-')):
        print('usage: check-doc-links.py [ROOT] | --self-test', file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return check(os.path.abspath(root))


if __name__ == '__main__':
    sys.exit(main(sys.argv))
