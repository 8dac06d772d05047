#!/usr/bin/env python3
"""The tables of scripts/upstream-e2e.sh, from ginkgo JSON reports.

    upstream-e2e-report.py table REPORT.json
        the markdown table of one run (report.md)
    upstream-e2e-report.py doc REPORT.json [REPORT.json ...]
        the body of docs/conformance.md's section "Upstream's end-to-end suite": the runs, the
        documented skip list, the table and the reasons of the failures left. When several
        reports are given, a spec's result is the one of the last report that ran it (a full
        run first, then focused re-runs after fixes); every run is listed with its command.
    upstream-e2e-report.py write-doc DOC.md REPORT.json [REPORT.json ...]
        replaces that body in DOC.md between the markers
        "<!-- upstream-e2e: begin -->" and "<!-- upstream-e2e: end -->".

Each REPORT.json may have a meta.json beside it (written by scripts/upstream-e2e.sh: the
command, the feature gates, the version). The documented skip list and the reasons of known
failures are read from the environment (UPSTREAM_E2E_SKIP_LIST, UPSTREAM_E2E_KNOWN_FAILURES: one
"REGEX<TAB>reason" a line), which scripts/upstream-e2e.sh sets from its own lists.
"""
import json
import os
import re
import sys

BEGIN = "<!-- upstream-e2e: begin -->"
END = "<!-- upstream-e2e: end -->"


def esc(s):
    return s.replace("|", "\\|").replace("\n", " ").strip()


def one_line(msg):
    # A gomega message on one line, cut at 300 characters; paths into the Go module cache are
    # shortened to the module-relative path.
    msg = re.sub(r"\S*/sigs\.k8s\.io/karpenter@[^/\s]+/", "", msg)
    lines = [line.strip() for line in msg.splitlines() if line.strip()]
    out = " ".join(lines)
    return out[:300] + ("…" if len(out) > 300 else "")


def pairs(var):
    # "REGEX<TAB>reason" lines of an environment variable.
    out = []
    for line in os.environ.get(var, "").splitlines():
        if not line.strip():
            continue
        regex, _, reason = line.partition("\t")
        out.append((re.compile(regex), reason.strip()))
    return out


def first_match(rules, name):
    for regex, reason in rules:
        if regex.search(name):
            return reason
    return None


def load(path):
    with open(path) as f:
        suites = json.load(f)
    meta_path = os.path.join(os.path.dirname(os.path.abspath(path)), "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    return suites, meta


def specs(suites):
    """(name, state, seconds, failure) of every spec node of a report, in run order.

    Suite-level nodes (BeforeSuite, AfterSuite, ...) are listed only when they failed. A spec
    that neither ran nor failed (skipped by -ginkgo.focus / -ginkgo.skip) has state "skipped".
    """
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            kind = spec.get("LeafNodeType", "")
            state = spec.get("State", "")
            name = " ".join(spec.get("ContainerHierarchyTexts") or [])
            leaf = spec.get("LeafNodeText", "")
            if kind == "It":
                name = (name + " " + leaf).strip()
            else:
                name = f"[{kind}] {name} {leaf}".strip()
            failure = spec.get("Failure") or {}
            msg = failure.get("Message", "")
            if kind != "It" and state == "passed":
                continue
            why = ""
            if state not in ("passed", "skipped") or msg:
                loc = failure.get("Location") or {}
                where = ""
                if loc.get("FileName"):
                    fn = loc["FileName"]
                    fn = fn[fn.find("test/"):] if "test/" in fn else fn.rsplit("/", 1)[-1]
                    where = f" ({fn}:{loc.get('LineNumber')})"
                node = failure.get("FailureNodeType", "")
                node = f"[{node}] " if node and node != "It" else ""
                why = node + one_line(msg) + where
            yield name, state, (spec.get("RunTime") or 0) / 1e9, why, bool(msg)


def table(path):
    suites, _ = load(path)
    skip_list = pairs("UPSTREAM_E2E_SKIP_LIST")
    # A documented skip is listed when the run's focus selects it (ginkgo matches the focus
    # against the suite's description and the spec's text; searching the text is close).
    focus = [re.compile(f) for s in suites for f in (s.get("SuiteConfig") or {}).get("FocusStrings") or []]
    rows, counts, unselected = [], {}, 0
    for name, state, secs, why, has_msg in specs(suites):
        if state == "skipped" and not has_msg:
            reason = first_match(skip_list, name)
            if focus and not any(f.search(name) for f in focus):
                reason = None
            if reason is None:
                unselected += 1
                continue
            why = "documented skip: " + reason
        counts[state] = counts.get(state, 0) + 1
        rows.append((name, state, secs, why))
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"{sum(counts.values())} specs: {summary or 'none'}; {unselected} not selected.\n")
    print("| spec | result | time (s) | first failure |")
    print("| --- | --- | ---: | --- |")
    for name, state, secs, why in rows:
        print(f"| {esc(name)} | {state} | {secs:.1f} | {esc(why)} |")


def doc(paths):
    skip_list = pairs("UPSTREAM_E2E_SKIP_LIST")
    known = pairs("UPSTREAM_E2E_KNOWN_FAILURES")
    results, order, runs = {}, [], []
    for path in paths:
        suites, meta = load(path)
        start = (suites[0].get("StartTime") or "")[:16].replace("T", " ") if suites else ""
        ran = 0
        for name, state, secs, why, has_msg in specs(suites):
            if name.startswith("["):
                continue  # a failed suite-level node is its run's, not a spec's (see the run's report.md)
            if name not in results:
                order.append(name)
            if state == "skipped" and not has_msg:
                results.setdefault(name, None)
                continue
            ran += 1
            results[name] = (state, secs, why)
        runs.append((start, meta, ran))
    out = []
    version = next((m.get("version") for _, m, _ in runs if m.get("version")), "?")
    out.append(f"Suite: `sigs.k8s.io/karpenter@{version}` `test/suites/regression`, against "
               "`karpenter controller --cloud-provider kwok` on the loopback control plane. "
               "Regenerate this section with `scripts/upstream-e2e.sh --write-doc "
               "REPORT.json...` (the reports of the runs below, in this order).")
    out.append("")
    out.append("Runs (a spec's result is that of the last run that ran it):")
    out.append("")
    for start, meta, ran in runs:
        cmd = meta.get("command", "scripts/upstream-e2e.sh")
        gates = meta.get("feature_gates", "?")
        out.append(f"- {start} UTC, {ran} specs: `{cmd}` (`FEATURE_GATES={gates}`)")
    out.append("")
    out.append("The documented skip list (`scripts/upstream-e2e.sh` passes it to ginkgo as "
               "`-ginkgo.skip`; `--no-skip-list` runs everything):")
    out.append("")
    for regex, reason in skip_list:
        out.append(f"- `{regex.pattern}`: {reason}")
    out.append("")
    counts, rows = {}, []
    for name in order:
        res = results.get(name)
        if res is None:
            reason = first_match(skip_list, name)
            if reason is None:
                continue  # never selected by any run
            state, secs, why = "skipped", 0.0, "documented skip: " + reason
        else:
            state, secs, why = res
            if state != "passed":
                reason = first_match(known, name)
                if reason:
                    why = f"{why} — **why**: {reason}" if why else f"**why**: {reason}"
        counts[state] = counts.get(state, 0) + 1
        rows.append((name, state, secs, why))
    passed = counts.get("passed", 0)
    outside = sum(v for k, v in counts.items() if k != "skipped")
    pct = f"{100.0 * passed / outside:.1f} %" if outside else "n/a"
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    out.append(f"{len(rows)} specs: {summary}. Outside the skip list {passed} of {outside} "
               f"pass ({pct}).")
    out.append("")
    out.append("| spec | result | time (s) | first failing assertion |")
    out.append("| --- | --- | ---: | --- |")
    for name, state, secs, why in rows:
        out.append(f"| {esc(name)} | {state} | {secs:.1f} | {esc(why)} |")
    return "\n".join(out) + "\n"


def write_doc(doc_path, paths):
    with open(doc_path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{doc_path}: no {BEGIN} ... {END} markers to write between")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(doc_path, "w") as f:
        f.write(head + BEGIN + "\n" + doc(paths) + END + tail)


def main(argv):
    if len(argv) >= 3 and argv[1] == "table":
        table(argv[2])
    elif len(argv) >= 3 and argv[1] == "doc":
        sys.stdout.write(doc(argv[2:]))
    elif len(argv) >= 4 and argv[1] == "write-doc":
        write_doc(argv[2], argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
