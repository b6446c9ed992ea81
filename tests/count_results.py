#!/usr/bin/python3
"""Counts the test cases of one `bazel test` run, honestly.

Usage: count_results.py BEP_JSON LABELS_FILE

BEP_JSON is the run's build event file (bazel test --build_event_json_file);
LABELS_FILE lists every test target of the tree, one label a line (bazel
query 'tests(//...)'). Only the reports that build events of this run name
are read, so a report left behind by an earlier run (a target that no longer
builds, say) is never counted.

Each target's cases come from its XML report (GoogleTest's, or the one Bazel
writes for a binary that wrote none):
  - a case with one or more <failure> or <error> elements counts once as
    failed, whatever the number of failed assertions;
  - a case marked skipped counts as skipped;
  - a binary that crashed or timed out before writing its report is read
    from its log: the cases that printed OK pass, the one running when it
    died fails, named, with the reason;
  - a target whose run failed but whose report names no failing case counts
    one failure (a sanitizer report at exit, say);
  - a target with no result in this run (it did not build, or the run
    stopped first), or whose result has no report, counts one failure.
Prints "FAIL: <label> ..." for every failure, then one last line
"PASSED FAILED SKIPPED" (three numbers) for the caller.
"""

import json
import re
import sys
import urllib.parse
import xml.etree.ElementTree as ElementTree


def path_of(uri):
    if not uri.startswith("file://"):
        return None
    return urllib.parse.unquote(uri[len("file://"):])


def read_results(bep_path):
    """{label: [(status, xml_path, log_path)]}: the last attempt of each run/shard."""
    last = {}
    try:
        with open(bep_path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError:
        return {}
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        key = event.get("id", {}).get("testResult")
        result = event.get("testResult")
        if key is None or result is None:
            continue
        outputs = {o.get("name"): path_of(o.get("uri", ""))
                   for o in result.get("testActionOutput", [])}
        slot = (key["label"], key.get("run", 1), key.get("shard", 1))
        attempt = key.get("attempt", 1)
        if slot not in last or last[slot][0] <= attempt:
            last[slot] = (attempt, result.get("status", "NO_STATUS"),
                          outputs.get("test.xml"), outputs.get("test.log"))
    by_label = {}
    for (label, _, _), (_, status, xml, log) in sorted(last.items()):
        by_label.setdefault(label, []).append((status, xml, log))
    return by_label


def cases_from_xml(xml_path):
    """[(name, outcome, reason)] with outcome "pass", "fail" or "skip"."""
    root = ElementTree.parse(xml_path).getroot()
    cases = []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        if case.get("classname"):
            name = case.get("classname") + "." + name
        bad = case.findall("failure") + case.findall("error")
        if bad:
            lines = [l.strip() for l in (bad[0].get("message") or "").splitlines() if l.strip()]
            cases.append((name, "fail", " ".join(lines[:2]) if lines else "failed"))
        elif case.get("result") == "skipped" or case.findall("skipped"):
            cases.append((name, "skip", ""))
        else:
            cases.append((name, "pass", ""))
    return cases


RUN = re.compile(r"^\[ RUN      \] (\S+)")
DONE = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+) \(")


def cases_from_log(log_path, reason):
    """The GoogleTest cases a log shows, for a binary that died mid-run."""
    cases = []
    running = None
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = RUN.match(line)
                if m:
                    running = m.group(1)
                    continue
                m = DONE.match(line)
                if m and m.group(2) == running:
                    outcome = {"OK": "pass", "FAILED": "fail", "SKIPPED": "skip"}[m.group(1)]
                    cases.append((running, outcome, "failed"))
                    running = None
    except OSError:
        return []
    if running is not None:
        cases.append((running, "fail", reason))
    return cases


def count(bep_path, labels_path):
    with open(labels_path, encoding="utf-8") as f:
        labels = [l.strip() for l in f if l.strip()]
    results = read_results(bep_path)
    passed = failed = skipped = 0
    for label in labels:
        runs = results.get(label)
        if not runs:
            print(f"FAIL: {label}: no result in this run (it did not build, or the run "
                  f"stopped before it)")
            failed += 1
            continue
        for status, xml, log in runs:
            try:
                cases = cases_from_xml(xml) if xml else None
            except (OSError, ElementTree.ParseError) as e:
                print(f"FAIL: {label}: its report {xml} cannot be read ({e})")
                failed += 1
                continue
            if cases is None:
                print(f"FAIL: {label}: {status} with no report")
                failed += 1
                continue
            # A report Bazel wrote for a binary that wrote none: one case named
            # after the target, holding an <error>. Its log tells the cases.
            generated = (len(cases) == 1 and cases[0][1] == "fail" and
                         cases[0][0] == label.lstrip("/").replace(":", "/"))
            if generated:
                reason = "timed out" if status == "TIMEOUT" else cases[0][2]
                from_log = cases_from_log(log, reason) if log else []
                if any(outcome == "fail" for _, outcome, _ in from_log):
                    cases = from_log
                else:
                    cases = from_log + [(label, "fail", reason)]
            if status not in ("PASSED", "FLAKY") and not any(o == "fail" for _, o, _ in cases):
                cases.append((label, "fail", f"{status} though no case failed"))
            if not cases:
                cases.append((label, "fail", "ran no test case"))
            for name, outcome, reason in cases:
                if outcome == "pass":
                    passed += 1
                elif outcome == "skip":
                    skipped += 1
                else:
                    failed += 1
                    where = label if name == label else f"{label} {name}"
                    print(f"FAIL: {where}: {reason}")
    print(passed, failed, skipped)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: count_results.py BEP_JSON LABELS_FILE")
    count(sys.argv[1], sys.argv[2])
