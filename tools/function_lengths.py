#!/usr/bin/env python3
"""Lists the longest functions in the project's C++ sources (tests aside).

A function is a definition whose body opens with a `{` ending its
signature; its length counts the lines from the signature's first line to
the closing brace. Lambdas count within their function. Usage:
  tools/function_lengths.py [--over N] [--top K] [paths...]
"""
import argparse
import os
import re
import sys

CONTROL = re.compile(r'^\s*(if|for|while|switch|do|else|catch|try)\b|^\s*}\s*(else|while)\b')
SKIP_DIRS = {'third_party', 'fuzz', 'tests'}


def strip(line, in_comment):
    """The line without comments and string contents; whether a block comment is open."""
    out, i = [], 0
    while i < len(line):
        if in_comment:
            end = line.find('*/', i)
            if end < 0:
                return ''.join(out), True
            i, in_comment = end + 2, False
            continue
        c = line[i]
        if line.startswith('//', i):
            break
        if line.startswith('/*', i):
            in_comment = True
            i += 2
            continue
        if c in '"\'':
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if line[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return ''.join(out), in_comment


def functions(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        raw = f.read().split('\n')
    lines, in_comment = [], False
    for line in raw:
        code, in_comment = strip(line, in_comment)
        lines.append(code)
    result = []
    i = 0
    while i < len(lines):
        code = lines[i].rstrip()
        # A signature: ends with `{` (possibly after const/override/...),
        # has a parameter list, and is not control flow or a lambda opener.
        if code.endswith('{') and not CONTROL.match(code) and '=' not in code.split('(')[0]:
            start = i
            # The signature may begin on earlier lines.
            while start > 0 and '(' not in lines[start] and lines[start - 1].strip() and \
                    not lines[start - 1].rstrip().endswith((';', '{', '}')):
                start -= 1
            sig = ' '.join(l.strip() for l in lines[start:i + 1])
            if '(' in sig and not re.search(r'\b(class|struct|namespace|enum)\b', sig) and \
                    not re.search(r'\]\s*\(', sig):
                depth, j = 0, i
                while j < len(lines):
                    depth += lines[j].count('{') - lines[j].count('}')
                    if depth <= 0:
                        break
                    j += 1
                name = re.search(r'([~\w:]+)\s*\(', sig)
                result.append((j - start + 1, path, start + 1, name.group(1) if name else sig[:40]))
                i += 1
                continue
        i += 1
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--over', type=int, default=0, help='only functions longer than this')
    p.add_argument('--top', type=int, default=10)
    p.add_argument('paths', nargs='*', default=['.'])
    args = p.parse_args()
    found = []
    for root in args.paths:
        for dirpath, dirnames, files in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(('bazel-', '.'))]
            for name in files:
                if name.endswith(('.cc', '.h', '.cu')) and not name.endswith(('_test.cc', '_bench.cc')):
                    found += functions(os.path.join(dirpath, name))
    found.sort(reverse=True)
    shown = [f for f in found if f[0] > args.over][:args.top] if args.over else found[:args.top]
    for n, path, line, name in shown:
        print('%4d  %s:%d  %s' % (n, os.path.relpath(path), line, name))
    return 0


if __name__ == '__main__':
    sys.exit(main())
