#!/usr/bin/env python3
"""Lists the files an image build of DIR receives: DIR's tree less what
DIR/.dockerignore excludes, matched as Docker and Podman match it (each
pattern cleaned like a path, "*" and "?" within one path element, "**" any
number of elements, "!" re-including; the last pattern that matches a path
or one of its parent directories decides).

    deploy/build_context.py [DIR]          one path per line
    deploy/build_context.py --secrets DIR  the paths that hold a private key
                                           or a token; exit 1 when any does
"""
import os
import posixpath
import re
import sys


def _pattern_regex(pattern):
    """The regular expression a cleaned .dockerignore pattern stands for."""
    out = "^"
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if i + 1 < len(pattern) and pattern[i + 1] == "*":
                i += 1
                if i + 1 < len(pattern) and pattern[i + 1] == "/":
                    i += 1
                if i + 1 >= len(pattern):
                    out += ".*"
                else:
                    out += "(.*/)?"
            else:
                out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                raise ValueError("unterminated [ in .dockerignore pattern %r" % pattern)
            body = pattern[i + 1:end]
            if body.startswith("^") or body.startswith("!"):
                body = "^" + body[1:]
            out += "[" + body.replace("\\", "\\\\") + "]"
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + "$")


def read_patterns(path):
    """[(regex, exclusion)] from a .dockerignore file, in order."""
    patterns = []
    if not os.path.exists(path):
        return patterns
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            exclusion = line.startswith("!")
            if exclusion:
                line = line[1:].strip()
            line = posixpath.normpath(line).lstrip("/")
            if line in ("", "."):
                continue
            patterns.append((_pattern_regex(line), exclusion))
    return patterns


def excluded(path, patterns):
    """Whether `path` (relative, "/"-separated) is left out of the context."""
    parents = path.split("/")[:-1]
    matched = False
    for regex, exclusion in patterns:
        if exclusion != matched:
            continue
        match = regex.match(path) is not None
        for i in range(len(parents)):
            if match:
                break
            match = regex.match("/".join(parents[: i + 1])) is not None
        if match:
            matched = not exclusion
    return matched


def context_files(root):
    patterns = read_patterns(os.path.join(root, ".dockerignore"))
    files = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames + [d for d in dirnames
                                        if os.path.islink(os.path.join(dirpath, d))]):
            rel = name if rel_dir == "." else rel_dir + "/" + name
            if not excluded(rel, patterns):
                files.append(rel)
        dirnames.sort()
    return sorted(files)


def holds_secret(root, rel):
    """Whether the file reads as a private key or is named like a token."""
    if os.path.basename(rel) in ("token", "ca.key", "key.pem"):
        return True
    path = os.path.join(root, rel)
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        # PEM's private-key armour, spelt in two parts so that this file
        # does not read as one.
        return b"PRIVATE " + b"KEY-----" in f.read(1 << 20)


def main(argv):
    secrets = "--secrets" in argv
    args = [a for a in argv[1:] if a != "--secrets"]
    root = args[0] if args else "."
    files = context_files(root)
    if not secrets:
        print("\n".join(files))
        return 0
    found = [f for f in files if holds_secret(root, f)]
    for f in found:
        print("build context holds a secret: %s" % f)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
