#!/usr/bin/python3
"""Tests of tests/count_results.py on build events and reports written here."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import count_results  # noqa: E402

GTEST_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1" name="AllTests">
  <testsuite name="S" tests="4" failures="1" skipped="1">
    <testcase name="Ok" status="run" result="completed" classname="S" />
    <testcase name="TwoAsserts" status="run" result="completed" classname="S">
      <failure message="a.cc:2&#x0A;Expected equality" type=""/>
      <failure message="a.cc:3&#x0A;Expected equality" type=""/>
    </testcase>
    <testcase name="Skipped" status="run" result="skipped" classname="S">
      <skipped message="no device"/>
    </testcase>
    <testcase name="AlsoOk" status="run" result="completed" classname="S" />
  </testsuite>
</testsuites>
"""

PASSING_XML = GTEST_XML.replace(
    '<failure message="a.cc:2&#x0A;Expected equality" type=""/>', "").replace(
    '<failure message="a.cc:3&#x0A;Expected equality" type=""/>', "")

BAZEL_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="pkg/crash_test" tests="1" failures="0" errors="1">
    <testcase name="pkg/crash_test" status="run"><error message="exited with error code 134"></error></testcase>
  </testsuite>
</testsuites>
"""

CRASH_LOG = """[ RUN      ] A.Fine
[       OK ] A.Fine (0 ms)
[ RUN      ] A.Skips
[  SKIPPED ] A.Skips (0 ms)
[ RUN      ] A.Crashes
"""


class CountResultsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.events = []

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def result(self, label, status, xml=None, log=None, attempt=1):
        outputs = []
        if xml is not None:
            outputs.append({"name": "test.xml", "uri": "file://" + xml})
        if log is not None:
            outputs.append({"name": "test.log", "uri": "file://" + log})
        self.events.append({"id": {"testResult": {"label": label, "run": 1, "shard": 1,
                                                  "attempt": attempt}},
                            "testResult": {"status": status, "testActionOutput": outputs}})

    def run_count(self, labels):
        bep = self.write("events.json", "\n".join(json.dumps(e) for e in self.events) + "\n")
        listing = self.write("labels", "\n".join(labels) + "\n")
        out = io.StringIO()
        with redirect_stdout(out):
            count_results.count(bep, listing)
        lines = out.getvalue().splitlines()
        return [int(n) for n in lines[-1].split()], lines[:-1]

    def expect_count(self, labels, counts, fails):
        got_counts, got_fails = self.run_count(labels)
        self.assertEqual(got_counts, counts)
        self.assertEqual(got_fails, fails)

    def test_a_case_with_several_failed_assertions_counts_once(self):
        self.result("//pkg:a_test", "FAILED", self.write("a.xml", GTEST_XML))
        self.expect_count(["//pkg:a_test"], [2, 1, 1],
                          ["FAIL: //pkg:a_test S.TwoAsserts: a.cc:2 Expected equality"])

    def test_a_crash_or_timeout_counts_the_cases_its_log_shows_and_names_the_one_that_died(self):
        for status, why in (("FAILED", "exited with error code 134"), ("TIMEOUT", "timed out")):
            with self.subTest(status=status):
                self.events = []
                self.result("//pkg:crash_test", status, self.write("c.xml", BAZEL_XML),
                            self.write("c.log", CRASH_LOG))
                self.expect_count(["//pkg:crash_test"], [1, 1, 1],
                                  ["FAIL: //pkg:crash_test A.Crashes: " + why])

    def test_a_crash_without_a_log_is_one_failure_named_by_target(self):
        self.result("//pkg:crash_test", "FAILED", self.write("c.xml", BAZEL_XML))
        self.expect_count(["//pkg:crash_test"], [0, 1, 0],
                          ["FAIL: //pkg:crash_test: exited with error code 134"])

    def test_a_target_without_a_result_in_this_run_fails_even_with_an_old_report(self):
        # An earlier run's report lies where Bazel keeps them; no event names it.
        self.write("old.xml", GTEST_XML)
        self.result("//pkg:a_test", "PASSED", self.write("a.xml", PASSING_XML))
        counts, fails = self.run_count(["//pkg:a_test", "//pkg:gone_test"])
        self.assertEqual(counts, [3, 1, 1])
        self.assertEqual(len(fails), 1)
        self.assertTrue(fails[0].startswith("FAIL: //pkg:gone_test: no result in this run"))

    def test_a_failed_run_whose_report_shows_no_failure_counts_one(self):
        self.result("//pkg:a_test", "FAILED", self.write("a.xml", PASSING_XML))
        self.expect_count(["//pkg:a_test"], [3, 1, 1],
                          ["FAIL: //pkg:a_test: FAILED though no case failed"])

    def test_a_result_without_a_report_fails(self):
        self.result("//pkg:a_test", "PASSED")
        self.expect_count(["//pkg:a_test"], [0, 1, 0],
                          ["FAIL: //pkg:a_test: PASSED with no report"])

    def test_the_last_attempt_of_a_flaky_target_counts(self):
        self.result("//pkg:crash_test", "FAILED", self.write("c.xml", BAZEL_XML), attempt=1)
        ok = self.write("ok.xml", PASSING_XML)
        self.result("//pkg:crash_test", "FLAKY", ok, attempt=2)
        self.expect_count(["//pkg:crash_test"], [3, 0, 1], [])


if __name__ == "__main__":
    unittest.main()
