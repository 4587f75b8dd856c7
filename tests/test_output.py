"""Output formats: flake8, full, json, sarif, github, and --statistics."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from torchlint.engine import Finding, fix_source, lint_source, with_fix_edits
from torchlint.output import FORMATS, OutputOptions, format_statistics, sarif_log, use_colour
from torchlint.rule import FixStyle, RuleOptions
from torchlint.rulebook import page_for
from torchlint.rules import all_rules, rule_by_code
from torchlint.runner import FileReport, check_file
from torchlint.settings import Settings, resolve_rules
from conftest import BAD

# Pinned: other rules may also fire on these samples as the catalogue grows.
RULES = resolve_rules(Settings(select=("TL001", "TL012")))
WITH_EDITS = Settings(fix_edits=True)


def nb_json(*cells: tuple[str, str]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True),
                 **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                for kind, source in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    ) + "\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(BAD)
    (tmp_path / "nb.ipynb").write_text(
        nb_json(("markdown", "# Training\n"), ("code", "import torch\nw = torch.zeros(3, requires_grad=True)\n"),
                ("code", "for step in range(3):\n    (w * 2).sum().backward()\n    w = w - 0.1 * w.grad"))
    )
    return tmp_path


def render(name: str, reports: list[FileReport]) -> str:
    out = io.StringIO()
    FORMATS[name](reports, out)
    return out.getvalue()


def reports(*paths: str, settings: Settings = WITH_EDITS) -> list[FileReport]:
    return [check_file(path, RULES, settings) for path in paths]


def apply_edits(text: str, edits: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(location: dict) -> int:
        return offsets[location["row"] - 1] + location["column"] - 1

    for edit in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        text = text[: offset(edit["location"])] + edit["content"] + text[offset(edit["end_location"]):]
    return text


# ---------------------------------------------------------------- flake8
def test_flake8_format(project: Path) -> None:
    text = render("flake8", reports("pkg/train.py", "nb.ipynb"))
    assert text.splitlines() == [
        "pkg/train.py:5:1: TL012 " + check_file("pkg/train.py", RULES, Settings()).findings[0].message,
        "pkg/train.py:9:5: TL001 " + check_file("pkg/train.py", RULES, Settings()).findings[1].message,
        "nb.ipynb:cell 3:3:5: TL001 " + check_file("pkg/train.py", RULES, Settings()).findings[1].message,
    ]


# ---------------------------------------------------------------- json
def test_json_schema(project: Path) -> None:
    data = json.loads(render("json", reports("pkg/train.py")))
    assert [item["code"] for item in data] == ["TL012", "TL001"]
    typo = data[0]
    assert set(typo) == {"code", "name", "message", "filename", "cell", "location", "end_location", "fix", "url"}
    assert typo["name"] == "requires-grad-typo" and typo["filename"] == "pkg/train.py" and typo["cell"] is None
    assert typo["location"] == {"row": 5, "column": 1} and typo["end_location"] == {"row": 5, "column": 15}
    assert typo["url"] == page_for("TL012").url
    assert typo["fix"]["applicability"] == "safe" and typo["fix"]["message"]
    assert set(typo["fix"]["edits"][0]) == {"content", "location", "end_location"}


def test_json_fix_edits_reproduce_the_fix(project: Path) -> None:
    for item in json.loads(render("json", reports("pkg/train.py"))):
        fixed = fix_source(BAD, [rule_by_code(item["code"])]).source
        assert apply_edits(BAD, item["fix"]["edits"]) == fixed


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
@pytest.mark.parametrize("style", list(FixStyle))
def test_fix_edits_count_every_python_line_break(style: FixStyle, newline: str) -> None:
    source = BAD.replace("\n", newline)
    options = RuleOptions(fix_style=style)
    result = lint_source(source, RULES, options)
    findings = [f for f in with_fix_edits(result, source) if f.edits]
    assert findings
    for finding in findings:
        edits = [
            {"location": {"row": e.line, "column": e.col}, "end_location": {"row": e.end_line, "column": e.end_col},
             "content": e.content}
            for e in finding.edits
        ]
        fixed = fix_source(source, [rule_by_code(finding.code)], options).source
        assert apply_edits(source, edits) == fixed
        lines = re.split(r"\r\n|\r|\n", source)
        for edit in finding.edits:  # each position is on its line (or just past its end)
            assert edit.col - 1 <= len(lines[edit.line - 1]) and edit.end_col - 1 <= len(lines[edit.end_line - 1])
        assert fixed.count(newline) == fixed.count("\r") == fixed.count("\n") or newline == "\r"


def test_json_without_fix_is_null_and_edits_are_only_computed_on_request(project: Path) -> None:
    finding = Finding("TL999", "made-up", "message", 1, 1, 1, 2)
    data = json.loads(render("json", [FileReport("x.py", [finding])]))
    assert data[0]["fix"] is None and data[0]["url"] is None
    plain = check_file("pkg/train.py", RULES, Settings())
    assert all(not finding.edits for finding in plain.findings)


def test_json_in_notebooks_counts_in_the_cell(project: Path) -> None:
    [item] = json.loads(render("json", reports("nb.ipynb")))
    assert item["cell"] == 3 and item["location"] == {"row": 3, "column": 5}
    cell = "for step in range(3):\n    (w * 2).sum().backward()\n    w = w - 0.1 * w.grad"
    assert apply_edits(cell, item["fix"]["edits"]).endswith("    w.data.sub_(0.1 * w.grad)")


# ---------------------------------------------------------------- sarif
def assert_valid_for_github(log: dict) -> None:
    """The parts of SARIF 2.1.0 that GitHub code scanning requires or reads."""
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "torchlint" and driver["version"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert len(ids) == len(set(ids))
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["name"]
        assert rule["defaultConfiguration"]["level"] in {"none", "note", "warning", "error"}
    for result in run["results"]:
        assert result["ruleId"] in ids and ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in {"none", "note", "warning", "error"} and result["message"]["text"]
        for location in result["locations"]:
            physical = location["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert uri and "\\" not in uri and not uri.startswith("/")
            region = physical["region"]
            assert 1 <= region["startLine"] <= region["endLine"] and region["startColumn"] >= 1
            assert region["endLine"] > region["startLine"] or region["endColumn"] > region["startColumn"]
    json.dumps(log)


def test_sarif_is_valid_for_github_code_scanning(project: Path) -> None:
    log = json.loads(render("sarif", reports("pkg/train.py", "nb.ipynb")))
    assert_valid_for_github(log)
    run = log["runs"][0]
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == {rule.code for rule in all_rules()}
    tl001 = next(rule for rule in run["tool"]["driver"]["rules"] if rule["id"] == "TL001")
    page = page_for("TL001")
    assert tl001["helpUri"] == page.url == page.path.as_uri() and Path(page.path).is_file()
    assert tl001["name"] == "rebind-update" and tl001["shortDescription"]["text"].startswith("Checks for a trainable leaf")
    assert "help" not in tl001 and "fullDescription" not in tl001  # the page is linked, not embedded
    first = run["results"][0]
    assert first["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 5, "startColumn": 1, "endLine": 5, "endColumn": 15}
    notebook = run["results"][-1]
    assert notebook["properties"] == {"cell": 3} and notebook["message"]["text"].startswith("cell 3: ")
    assert run["invocations"][0]["executionSuccessful"] is True


def test_sarif_reports_files_that_could_not_be_checked(project: Path) -> None:
    log = sarif_log([FileReport("broken.py", error="3:1: syntax error")])
    assert_valid_for_github(log)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "broken.py" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_sarif_uris_are_percent_encoded(project: Path) -> None:
    finding = Finding("TL001", "rebind-update", "m", 1, 1, 1, 2)
    log = sarif_log([FileReport("dir with space/a#b.py", [finding])])
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "dir%20with%20space/a%23b.py"


# ---------------------------------------------------------------- github
def test_github_annotations(project: Path) -> None:
    lines = render("github", reports("pkg/train.py")).splitlines()
    assert lines[0].startswith("::error file=pkg/train.py,line=5,col=1,endLine=5,endColumn=15,title=TL012::TL012 ")


def test_github_escaping() -> None:
    finding = Finding("TL001", "rebind-update", "100% sure\nsecond: line, really", 2, 3, 2, 9)
    [line] = render("github", [FileReport("odd,name:x%.py", [finding])]).splitlines()
    assert line == (
        "::error file=odd%2Cname%3Ax%25.py,line=2,col=3,endLine=2,endColumn=9,title=TL001"
        "::TL001 100%25 sure%0Asecond: line, really"
    )


# ---------------------------------------------------------------- full
def test_full_shows_the_line_a_caret_and_the_fix(project: Path) -> None:
    text = render("full", reports("pkg/train.py"))
    assert "\x1b[" not in text  # not a terminal
    block = text.split("\n\n")[1].splitlines()
    assert block[0].startswith("pkg/train.py:9:5: TL001 [*] ")
    assert block[2] == "9 |     w = w - 0.1 * w.grad"
    assert block[3] == "  |     " + "^" * len("w = w - 0.1 * w.grad") + " TL001"
    assert block[5].startswith("  = fix (safe): ")
    assert block[6:] == ["  - 9 |     w = w - 0.1 * w.grad", "  + 9 |     w.data.sub_(0.1 * w.grad)"]


def test_full_in_notebooks_shows_the_cell_source(project: Path) -> None:
    text = render("full", reports("nb.ipynb"))
    assert text.splitlines()[0].startswith("nb.ipynb:cell 3:3:5: TL001")
    assert "3 |     w = w - 0.1 * w.grad" in text and "+ 3 |     w.data.sub_(0.1 * w.grad)" in text


def test_full_aligns_the_caret_under_tabs() -> None:
    finding = Finding("TL001", "rebind-update", "m", 1, 2, 1, 3)
    text = render("full", [FileReport("t.py", [finding], source="\tx = 1\n")])
    assert "1 |     x = 1" in text and "  |     ^ TL001" in text


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "env", "coloured"),
    [
        (io.StringIO, {}, False),
        (FakeTerminal, {}, True),
        (FakeTerminal, {"NO_COLOR": "1"}, False),
        (io.StringIO, {"FORCE_COLOR": "1"}, True),
        (FakeTerminal, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
    ],
)
def test_colour_only_on_a_terminal_and_never_with_no_color(
    project: Path, monkeypatch: pytest.MonkeyPatch, stream, env: dict, coloured: bool
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = stream()
    assert use_colour(out) is coloured
    FORMATS["full"](reports("pkg/train.py"), out)
    assert ("\x1b[" in out.getvalue()) is coloured


# ---------------------------------------------------------------- statistics
def test_statistics(project: Path) -> None:
    (project / "pkg" / "more.py").write_text(BAD)
    found = reports("pkg/train.py", "pkg/more.py", "nb.ipynb", settings=Settings())
    out = io.StringIO()
    format_statistics(found, out)
    assert out.getvalue().splitlines() == ["3\tTL001\t[*] rebind-update", "2\tTL012\t[*] requires-grad-typo"]
    out = io.StringIO()
    format_statistics(found, out, as_json=True)
    assert json.loads(out.getvalue())[0] == {"code": "TL001", "name": "rebind-update", "count": 3, "fixable": 3}


# ---------------------------------------------------------------- ruff's other formats
def test_concise_is_flake8_and_show_fixes_marks_them(project: Path) -> None:
    found = reports("pkg/train.py")
    assert render("concise", found) == render("flake8", found)
    out = io.StringIO()
    FORMATS["concise"](found, out, OutputOptions(show_fixes=True))
    assert [line.split(" ")[1:3] for line in out.getvalue().splitlines()] == [["TL012", "[*]"], ["TL001", "[*]"]]


def test_colour_option_overrides_the_terminal(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    for name in ("concise", "grouped", "full"):
        out = io.StringIO()
        FORMATS[name](reports("pkg/train.py"), out, OutputOptions(colour=False))
        assert "\x1b[" not in out.getvalue()
        out = FakeTerminal()
        FORMATS[name](reports("pkg/train.py"), out, OutputOptions(colour=True))
        assert "\x1b[1;31mTL001\x1b[0m" in out.getvalue()


def test_grouped_lists_findings_under_their_file(project: Path) -> None:
    text = render("grouped", reports("pkg/train.py", "nb.ipynb"))
    blocks = text.rstrip("\n").split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == ["pkg/train.py:", "nb.ipynb:"]
    assert [line.split()[:2] for line in blocks[0].splitlines()[1:]] == [["5:1", "TL012"], ["9:5", "TL001"]]
    assert blocks[1].splitlines()[1].split()[:3] == ["cell", "3:3:5", "TL001"]


def test_pylint_lines(project: Path) -> None:
    lines = render("pylint", reports("pkg/train.py", "nb.ipynb")).splitlines()
    assert [re.match(r"^(\S+):(\d+): \[(TL\d{3})\] (.+)$", line).groups()[:3] for line in lines] == [
        ("pkg/train.py", "5", "TL012"), ("pkg/train.py", "9", "TL001"), ("nb.ipynb", "3", "TL001")]
    assert lines[2].split("] ", 1)[1].startswith("cell 3: ")


def test_azure_logging_commands_are_escaped() -> None:
    finding = Finding("TL001", "rebind-update", "100% sure; really]\nsecond", 2, 3, 2, 9)
    [line] = render("azure", [FileReport("odd;name].py", [finding])]).splitlines()
    assert line == ("##vso[task.logissue type=error;sourcepath=odd%3Bname%5D.py;linenumber=2;columnnumber=3;"
                    "code=TL001;]100%AZP25 sure; really]%0Asecond")


def test_json_lines_are_the_json_objects(project: Path) -> None:
    found = reports("pkg/train.py", "nb.ipynb")
    lines = render("json-lines", found).splitlines()
    assert [json.loads(line) for line in lines] == json.loads(render("json", found)) and len(lines) == 3


def test_junit_xml_parses_and_counts(project: Path) -> None:
    import xml.etree.ElementTree as ET

    found = [*reports("pkg/train.py", "nb.ipynb"), FileReport("broken.py", error="1:5: syntax error")]
    root = ET.fromstring(render("junit", found))
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "3", "1")
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert set(suites) == {"pkg/train.py", "nb.ipynb", "broken.py"}
    cases = suites["pkg/train.py"].findall("testcase")
    assert [(c.get("name"), c.get("line"), c.get("column")) for c in cases] == [
        ("torchlint.TL012", "5", "1"), ("torchlint.TL001", "9", "5")]
    assert all(case.find("failure").get("message") for case in cases)
    assert suites["broken.py"].find("testcase/error").get("message") == "1:5: syntax error"
    clean = ET.fromstring(render("junit", [FileReport("ok.py")]))
    assert clean.get("failures") == "0" and [c.get("name") for c in clean.iter("testcase")] == ["No errors found"]


def assert_gitlab_code_quality(issues: list) -> None:
    """The fields GitLab's Code Quality report schema requires."""
    assert isinstance(issues, list)
    for issue in issues:
        assert isinstance(issue["description"], str) and issue["description"]
        assert isinstance(issue["check_name"], str) and issue["check_name"]
        assert isinstance(issue["fingerprint"], str) and issue["fingerprint"]
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        location = issue["location"]
        assert isinstance(location["path"], str) and not location["path"].startswith("/")
        begin = location["positions"]["begin"] if "positions" in location else location["lines"]
        assert isinstance(begin["line"], int) and begin["line"] >= 1
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)


def test_gitlab_code_quality_with_stable_fingerprints(project: Path) -> None:
    issues = json.loads(render("gitlab", reports("pkg/train.py", "nb.ipynb")))
    assert_gitlab_code_quality(issues)
    assert [(i["check_name"], i["location"]["path"]) for i in issues] == [
        ("TL012", "pkg/train.py"), ("TL001", "pkg/train.py"), ("TL001", "nb.ipynb")]
    # Code moved down by two lines, and the same mistake twice: old issues keep their fingerprints.
    (project / "pkg" / "train.py").write_text("# a comment\n\n" + BAD + "    w = w - 0.1 * w.grad\n")
    moved = json.loads(render("gitlab", reports("pkg/train.py")))
    assert_gitlab_code_quality(moved)
    assert [i["fingerprint"] for i in moved][:2] == [i["fingerprint"] for i in issues][:2]
    assert moved[0]["location"]["positions"]["begin"]["line"] == 7


def assert_rdjson(result: dict) -> None:
    """reviewdog's DiagnosticResult: the fields its schema requires and the enums it allows."""
    severities = {"UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"}
    assert result["source"]["name"] and result.get("severity", "ERROR") in severities

    def assert_range(span: dict) -> None:
        assert span["start"]["line"] >= 1 and span["start"].get("column", 1) >= 1
        assert (span["end"]["line"], span["end"]["column"]) >= (span["start"]["line"], span["start"]["column"])

    for diagnostic in result["diagnostics"]:
        assert isinstance(diagnostic["message"], str) and diagnostic["message"]
        assert isinstance(diagnostic["location"]["path"], str)
        assert_range(diagnostic["location"]["range"])
        assert diagnostic.get("severity", "ERROR") in severities and diagnostic["code"]["value"]
        for suggestion in diagnostic.get("suggestions", []):
            assert_range(suggestion["range"])
            assert isinstance(suggestion["text"], str)


def test_rdjson_suggestions_reproduce_the_fix(project: Path) -> None:
    result = json.loads(render("rdjson", reports("pkg/train.py", "nb.ipynb")))
    assert_rdjson(result)
    diagnostics = result["diagnostics"]
    assert [d["code"]["value"] for d in diagnostics] == ["TL012", "TL001", "TL001"]
    assert diagnostics[0]["code"]["url"] == page_for("TL012").url
    for diagnostic in diagnostics[:2]:
        edits = [{"location": {"row": s["range"]["start"]["line"], "column": s["range"]["start"]["column"]},
                  "end_location": {"row": s["range"]["end"]["line"], "column": s["range"]["end"]["column"]},
                  "content": s["text"]} for s in diagnostic["suggestions"]]
        assert apply_edits(BAD, edits) == fix_source(BAD, [rule_by_code(diagnostic["code"]["value"])]).source
    assert "suggestions" not in diagnostics[2] and diagnostics[2]["message"].startswith("cell 3: ")


def assert_sarif_structure(log: dict) -> None:
    """SARIF 2.1.0's required properties for what torchlint writes (the schema's `required` lists)."""
    assert log["version"] == "2.1.0" and isinstance(log["runs"], list)
    for run in log["runs"]:
        assert run["tool"]["driver"]["name"]
        for rule in run["tool"]["driver"].get("rules", []):
            assert rule["id"]
        for result in run["results"]:
            assert result["message"]["text"]
            for fix in result.get("fixes", []):
                assert fix["artifactChanges"]  # minItems 1
                for change in fix["artifactChanges"]:
                    assert change["artifactLocation"]["uri"] and change["replacements"]
                    for replacement in change["replacements"]:
                        region = replacement["deletedRegion"]
                        assert region["startLine"] >= 1 and region["startColumn"] >= 1
                        assert isinstance(replacement["insertedContent"]["text"], str)
        for invocation in run.get("invocations", []):
            assert isinstance(invocation["executionSuccessful"], bool)


def test_sarif_fixes_reproduce_the_fix(project: Path) -> None:
    log = json.loads(render("sarif", reports("pkg/train.py", "nb.ipynb")))
    assert_sarif_structure(log)
    assert_valid_for_github(log)
    results = log["runs"][0]["results"]
    for result in results[:2]:
        [fix] = result["fixes"]
        assert fix["properties"]["applicability"] == "safe" and fix["description"]["text"]
        edits = [{"location": {"row": r["deletedRegion"]["startLine"], "column": r["deletedRegion"]["startColumn"]},
                  "end_location": {"row": r["deletedRegion"]["endLine"], "column": r["deletedRegion"]["endColumn"]},
                  "content": r["insertedContent"]["text"]} for r in fix["artifactChanges"][0]["replacements"]]
        assert apply_edits(BAD, edits) == fix_source(BAD, [rule_by_code(result["ruleId"])]).source
    assert "fixes" not in results[2]  # a notebook cell's positions are not the file's


def test_rule_links_use_the_configured_base(project: Path) -> None:
    found = reports("pkg/train.py")
    options = OutputOptions(rule_url="https://docs.example.org/rules/{code}.html")
    out = io.StringIO()
    FORMATS["json"](found, out, options)
    assert json.loads(out.getvalue())[0]["url"] == "https://docs.example.org/rules/TL012.html"
    log = sarif_log(found, OutputOptions(rule_url="https://docs.example.org/book/"))
    helps = {rule["id"]: rule["helpUri"] for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert helps["TL001"] == "https://docs.example.org/book/TL001-rebind-update.md"
    for link in (page_for(code).url for code in helps):  # default: the page shipped with the package
        assert link.startswith("file://") and Path(link[len("file://"):]).is_file()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_handles_no_findings_and_unknown_codes(name: str) -> None:
    text = render(name, [FileReport("ok.py")])
    assert "ok.py" not in text or name == "junit"
    made_up = render(name, [FileReport("x.py", [Finding("TL999", "made-up", "m", 1, 1, 1, 2)])])
    assert "TL999" in made_up
