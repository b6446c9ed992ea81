#!/usr/bin/env python3
"""The image's build context holds no key, certificate or token: the
repository's .dockerignore, applied as the engines apply it
(deploy/build_context.py), to a tree with the sources, build outputs and the
secrets deploy/make_certs.sh writes, leaves the sources and nothing secret.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "pstrain")
sys.path.insert(0, os.path.join(RUNFILES, "deploy"))
import build_context  # noqa: E402


def make_certs(tree, out):
    subprocess.run([os.path.join(RUNFILES, "deploy/make_certs.sh"), out, "pstrain"], cwd=tree,
                   check=True, stdout=subprocess.DEVNULL)


class BuildContextTest(unittest.TestCase):
    def setUp(self):
        self.tree = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        for rel in ["WORKSPACE", "cli/main.cc", "deploy/Dockerfile", "configs/a.pbtxt",
                    "bazel-bin/pstrain", "output/run/final_metrics.json", ".git/config",
                    "deploy/token_bucket.h", "docs/tokens.md"]:
            path = os.path.join(self.tree, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(rel + "\n")

    def tearDown(self):
        shutil.rmtree(self.tree)

    def use_dockerignore(self, text=None):
        dst = os.path.join(self.tree, ".dockerignore")
        if text is None:
            shutil.copy(os.path.join(RUNFILES, ".dockerignore"), dst)
        else:
            with open(dst, "w") as f:
                f.write(text)

    def test_secrets_made_as_the_readme_says_stay_out(self):
        self.use_dockerignore()
        make_certs(self.tree, "certs")          # the README's command
        make_certs(self.tree, "deploy/tls")     # anywhere else in the tree
        files = build_context.context_files(self.tree)
        secrets = [f for f in files if build_context.holds_secret(self.tree, f)]
        self.assertEqual(secrets, [])
        self.assertFalse([f for f in files if f.endswith(".pem") or "/tls/" in f], files)
        for kept in ["WORKSPACE", "cli/main.cc", "deploy/Dockerfile", "configs/a.pbtxt",
                     ".dockerignore", "deploy/token_bucket.h", "docs/tokens.md"]:
            self.assertIn(kept, files)
        for left_out in ["bazel-bin/pstrain", "output/run/final_metrics.json", ".git/config"]:
            self.assertNotIn(left_out, files)

    def test_the_check_finds_secrets_that_a_weaker_dockerignore_lets_in(self):
        self.use_dockerignore(".git\nbazel-*\n")
        make_certs(self.tree, "certs")
        found = subprocess.run([sys.executable, os.path.join(RUNFILES, "deploy/build_context.py"),
                                "--secrets", self.tree], stdout=subprocess.PIPE, text=True)
        self.assertEqual(found.returncode, 1)
        self.assertIn("build context holds a secret: certs/key.pem", found.stdout)
        self.assertIn("build context holds a secret: certs/token", found.stdout)
        self.assertIn("build context holds a secret: certs/ca.key", found.stdout)

    def test_patterns_match_as_the_engines_match_them(self):
        patterns = build_context.read_patterns
        self.use_dockerignore("bazel-*\n**/*.pem\n/output\ndocs/*.md\n!docs/keep.md\n"
                              "a/**/b\n# comment\n./certs/\n")
        p = patterns(os.path.join(self.tree, ".dockerignore"))
        cases = {
            "bazel-bin/x": True, "src/bazel-bin/x": False,          # anchored at the root
            "x.pem": True, "a/b/x.pem": True, "x.pem.txt": False,   # ** is any depth, even none
            "output/a/b": True, "src/output": False,               # a directory takes its files
            "docs/a.md": True, "docs/keep.md": False, "docs/sub/a.md": False,  # ! re-includes
            "a/b": True, "a/x/y/b": True, "a/x/b/c": True, "b": False,
            "certs/key.pem": True, "certsx": False,                # cleaned like a path
        }
        for path, want in cases.items():
            self.assertEqual(build_context.excluded(path, p), want, path)


if __name__ == "__main__":
    unittest.main()
