"""IPython and Jupyter: ``%load_ext torchlint`` checks every cell just before it runs.

The cells executed so far are one program, as in a notebook file
(``torchlint.notebook``): a name defined in an earlier cell is known in later ones,
and IPython syntax is masked the same way.  Only the findings in the new cell are
shown, in the ``full`` format, on stderr (where Python's warnings go: Jupyter shows
them highlighted above the cell's output); then the cell runs as usual.

Speed: each cell is parsed once, when it runs.  Checking a new cell builds one
module from the cached statements of the earlier cells that may matter to it
(``torchlint.slicing``) and the new cell's, runs the analysis on it, and positions
only the new cell's nodes (in its own lines).

Re-running: the latest execution of a cell is what later cells see.  A cell is
the same cell when Jupyter gives it the same id, or when its text is the same
(terminal IPython has no ids); its earlier copy leaves the context.

Nothing here may break a user's cell: an internal error is reported once and the
cell runs.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import libcst as cst

from torchlint.analysis.positions import node_positions
from torchlint.config import ConfigError, find_config, load_config
from torchlint.datatypes import FileReport, Finding
from torchlint.engine import (
    LintResult,
    SourceError,
    _analyse,
    _gc_paused,
    _position,
    _with_fix_style,
    active_rules,
    parse,
    with_fix_edits,
)
from torchlint.noqa import NoqaAudit, NoqaLines, Use, file_exempt_codes, file_is_exempt, run_audits
from torchlint.notebook import Notebook
from torchlint.output import format_full
from torchlint.rule import Rule, RuleOptions
from torchlint.settings import Settings, SettingsError, resolve_rules, validate_selectors
from torchlint.slicing import Facts, cell_facts, relevant

MAGIC = "torchlint"
USAGE = "%torchlint [on | off | select CODE,... | select default]; %%torchlint checks a cell without running it"


def cell_notebook(text: str) -> Notebook:
    """A notebook of this one cell: its program is the cell as Python, exactly as in notebook
    files (IPython syntax masked, same line count, dedented as IPython runs it), and it maps
    positions back into the cell.  No cells: a cell magic whose body is not Python (``%%bash``)."""
    document = {"cells": [{"cell_type": "code", "source": text, "metadata": {}}], "metadata": {}}
    return Notebook(json.dumps(document))


def cell_program(text: str) -> str | None:
    """The cell as Python (see ``cell_notebook``); None for a cell that is not Python."""
    if not text.strip():
        return ""
    notebook = cell_notebook(text)
    return notebook.cells[0].program_text if notebook.cells else None


@dataclass
class _Cell:
    """An executed cell: its text, its text as Python, and (once parsed) its statements."""

    key: str | None  # Jupyter's cell id; None in terminal IPython
    text: str
    program: str
    statements: Sequence[cst.BaseStatement] | None = None  # None: not parsed yet
    facts: list[Facts] | None = None  # one per statement, computed when first needed

    def statement_facts(self) -> list[Facts]:
        if self.facts is None:
            self.facts = cell_facts(self.program, self.statements or ())
        return self.facts


@dataclass
class CellCheck:
    findings: list[Finding] = field(default_factory=list)
    program: str = ""  # the cell as linted (IPython syntax masked)
    error: SourceError | None = None  # the cell does not parse


class CellLinter:
    """The executed cells of a session, and checks of a new cell against them."""

    def __init__(self) -> None:
        self.cells: list[_Cell] = []

    def remember(self, text: str, key: str | None = None) -> _Cell | None:
        """Record an executed cell (parsed later, when a check needs it); it replaces its
        earlier copy.  None for a cell that is not Python."""
        program = cell_program(text)
        if program is None:
            return None
        self.cells = [cell for cell in self.cells if not _same_cell(cell, text, key)]
        cell = _Cell(key, text, program)
        self.cells.append(cell)
        return cell

    def run(self, text: str, key: str | None, rules: Sequence[type[Rule]], options: RuleOptions) -> CellCheck:
        """Check a cell about to run against the cells before it, and record it."""
        cell = self.remember(text, key)
        if cell is None:
            return CellCheck()
        return self._check(cell, self.cells[:-1], rules, options)

    def check(self, text: str, rules: Sequence[type[Rule]], options: RuleOptions) -> CellCheck:
        """Check a cell against every executed cell, without recording it (``%%torchlint``)."""
        program = cell_program(text)
        if program is None:
            return CellCheck()
        cell = _Cell(None, text, program)
        return self._check(cell, [c for c in self.cells if not _same_cell(c, text, None)], rules, options)

    def _check(self, cell: _Cell, context: Sequence[_Cell], rules: Sequence[type[Rule]], options: RuleOptions) -> CellCheck:
        try:
            with _gc_paused():  # as in the engine: the trees have no cycles
                return self._lint(cell, context, rules, options)
        except SourceError as error:
            cell.statements = ()  # not part of the program: Python will not run it either
            return CellCheck(program=cell.program, error=error)
        except RecursionError:
            cell.statements = ()
            return CellCheck(program=cell.program, error=SourceError("too deeply nested to analyse"))
        except Exception:
            cell.statements = ()  # a bug this cell sets off is not set off again by every later cell
            raise

    def _lint(self, cell: _Cell, context: Sequence[_Cell], rules: Sequence[type[Rule]], options: RuleOptions) -> CellCheck:
        module = parse(cell.program)
        cell.statements = module.body
        # As the engine's lint_source does for a file, with the cell as the file.
        if file_is_exempt(cell.program):
            return CellCheck(program=cell.program)
        options = _with_fix_style(options, rules)
        exempt = file_exempt_codes(cell.program)
        if exempt:
            rules = [r for r in rules if not any(r.code.startswith(code) for code in exempt)]
        earlier = [c for c in context if _parsed(c)]
        source = "".join(c.program for c in earlier) + cell.program
        audits = active_rules(cell.program, [r for r in rules if issubclass(r, NoqaAudit)])
        checks = active_rules(source, [r for r in rules if not issubclass(r, NoqaAudit)])
        statements = [s for c in earlier for s in c.statements or ()]
        facts = [f for c in earlier for f in c.statement_facts()]
        kept = relevant(facts, cell_facts(cell.program, module.body))
        program = module.with_changes(body=[*(s for s, keep in zip(statements, kept) if keep), *module.body])
        diagnostics = _analyse(program, source, checks, options) if checks else []
        if not diagnostics and not audits:
            return CellCheck(program=cell.program)
        # Positions of the new cell's nodes only, counted in its lines; the rest are earlier cells'.
        positions = node_positions(module)
        in_cell = [d for d in diagnostics if d.node in positions and (d.statement is None or d.statement in positions)]
        lines = NoqaLines(cell.program)
        used: set[Use] = set()
        findings = _position(in_cell, positions, lines, used)
        if audits:
            audit_diagnostics = run_audits(audits, module, positions, used, {r.code for r in rules}, options)
            findings += _position(audit_diagnostics, positions, lines, set())
        findings.sort(key=lambda f: (f.line, f.col, f.code))
        findings = with_fix_edits(LintResult(findings, module, parsed=True), cell.program)
        # A fix that changes an earlier cell too cannot be shown as an edit of this one (as in
        # notebook files): its description stays, without the diff.
        findings = [f if _fix_within(f, positions) else dataclasses.replace(f, edits=()) for f in findings]
        return CellCheck(_in_cell_as_written(findings, cell.text), cell.program)


def _fix_within(finding: Finding, positions: Mapping[cst.CSTNode, object]) -> bool:
    return finding.fix is None or all(old in positions for old, _ in finding.fix.replacements)


def _in_cell_as_written(findings: Sequence[Finding], text: str) -> list[Finding]:
    """Columns (and fixes) counted in the cell as written: a cell whose first line is
    indented runs dedented."""
    if not text[:1].isspace():
        return list(findings)
    notebook = cell_notebook(text)
    return [dataclasses.replace(notebook.to_cells(finding), cell=None) for finding in findings]


def _same_cell(cell: _Cell, text: str, key: str | None) -> bool:
    return cell.text == text or (key is not None and cell.key == key)


def _parsed(cell: _Cell) -> bool:
    """Whether the cell is part of the program (parsed now if it was not yet)."""
    if cell.statements is None:
        try:
            cell.statements = parse(cell.program).body
        except (SourceError, RecursionError):
            cell.statements = ()
        except Exception:
            cell.statements = ()  # reported once by the caller; the cell leaves the program
            raise
    return bool(cell.statements)


def render(findings: Sequence[Finding], text: str, name: str, out: TextIO) -> None:
    """The findings as the ``full`` format shows them, positions named like ``In[3]:2:5``."""
    format_full([FileReport(name, findings=list(findings), source=text)], out)


# ---------------------------------------------------------------- the extension
class TorchlintExtension:
    """Checks each cell before it runs (``pre_run_cell``) and provides the ``%torchlint`` magics."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.enabled = True
        self.select: tuple[str, ...] | None = None  # %torchlint select: replaces the configured selection
        self.linter = CellLinter()
        self._reported: set[str] = set()  # internal errors already shown
        self._settings_cache: tuple[str, Settings, Path | None] | None = None
        self._rules_cache: tuple[object, list[type[Rule]]] | None = None
        self._seed_from_history()

    # ------------------------------------------------------------ events
    def pre_run_cell(self, info: Any) -> None:
        text = getattr(info, "raw_cell", "") or ""
        key = getattr(info, "cell_id", None)
        try:
            if not self.enabled or _first_line(text).startswith(f"%%{MAGIC}"):
                self.linter.remember(text, key)
                return
            settings, rules = self._current_rules()
            result = self.linter.run(text, key, rules, settings.rule_options)
            self._show(result, text)
        except Exception as error:  # noqa: BLE001 - never break a user's cell
            self._internal_error(error)

    def _show(self, result: CellCheck, text: str) -> None:
        if result.error is not None:
            # Python reports its own syntax errors; a cell only libcst rejects gets a short note.
            if not str(result.error).startswith("syntax error"):
                _write(f"torchlint: this cell is not analysed: {result.error}\n")
            return
        if result.findings:
            out = io.StringIO()
            render(result.findings, text, self._cell_name(), out)
            _write(out.getvalue())

    def _cell_name(self) -> str:
        return f"In[{getattr(self.shell, 'execution_count', '?')}]"

    def _internal_error(self, error: Exception) -> None:
        signature = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        if signature in self._reported:
            return
        self._reported.add(signature)
        _write(f"torchlint: internal error ({signature}); the cell runs as usual. "
               "This is shown once; please report this torchlint bug.\n")

    # ------------------------------------------------------------ settings
    def _settings(self) -> tuple[Settings, Path | None]:
        """``[tool.torchlint]`` of the nearest pyproject.toml of the working directory (read
        again when the directory changes)."""
        cwd = os.getcwd()
        if self._settings_cache is None or self._settings_cache[0] != cwd:
            path = find_config(Path(cwd))
            try:
                settings = load_config(path) if path is not None else Settings()
            except ConfigError as error:
                _write(f"torchlint: {error}; using the default settings\n")
                settings = Settings()
            self._settings_cache = (cwd, settings, path)
        return self._settings_cache[1], self._settings_cache[2]

    def _current_rules(self) -> tuple[Settings, list[type[Rule]]]:
        settings, _ = self._settings()
        if self.select is not None:
            settings = dataclasses.replace(settings, select=self.select, extend_select=())
        if self._rules_cache is None or self._rules_cache[0] != settings:
            self._rules_cache = (settings, resolve_rules(settings))
        return settings, self._rules_cache[1]

    def _seed_from_history(self) -> None:
        """The cells run before the extension was loaded are context too."""
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None) or []
        for text in history[1:]:  # index 0 is a placeholder: cells count from 1
            if isinstance(text, str) and not _first_line(text).startswith(f"%%{MAGIC}"):
                self.linter.remember(text)

    # ------------------------------------------------------------ magics
    def magic(self, line: str, cell: str | None = None) -> None:
        """``%torchlint on|off|select CODES``; ``%%torchlint`` checks the cell without running it."""
        from IPython.core.error import UsageError

        if cell is not None:
            if line.strip():
                raise UsageError(f"%%{MAGIC} takes no arguments; usage: {USAGE}")
            self._check_only(cell)
            return
        words = line.split(maxsplit=1)
        command = words[0] if words else ""
        if command in ("on", "off"):
            self.enabled = command == "on"
            print(f"torchlint: {'on' if self.enabled else 'off'}")
        elif command == "select":
            self._select(words[1] if len(words) > 1 else "")
        elif command == "":
            print(self.status())
        else:
            raise UsageError(f"unknown %{MAGIC} command {command!r}; usage: {USAGE}")

    def _select(self, argument: str) -> None:
        from IPython.core.error import UsageError

        codes = tuple(code.strip().upper() for code in argument.replace(" ", ",").split(",") if code.strip())
        if not codes:
            raise UsageError(f"%{MAGIC} select needs rule codes (TL001,TL002) or `default`")
        if codes == ("DEFAULT",):
            self.select = None
        else:
            try:
                validate_selectors(codes)
            except SettingsError as error:
                raise UsageError(str(error)) from None
            self.select = codes
        print(self.status())

    def _check_only(self, cell: str) -> None:
        try:
            settings, rules = self._current_rules()
            result = self.linter.check(cell, rules, settings.rule_options)
        except Exception as error:  # noqa: BLE001 - a bug in torchlint is not the user's
            self._internal_error(error)
            return
        if result.error is not None:
            where = f"line {result.error.line + 1}: " if result.error.line is not None else ""
            _write(f"torchlint: this cell does not parse: {where}{result.error}\n")
        elif result.findings:
            # Lines count in the cell as written, whose first line is `%%torchlint`.
            findings = [_moved_down(finding) for finding in result.findings]
            self._show(CellCheck(findings, result.program), f"%%{MAGIC}\n{cell}")
        else:
            print("torchlint: no findings")

    def status(self) -> str:
        settings, path = self._settings()
        _, rules = self._current_rules()
        source = "%torchlint select" if self.select is not None else (str(path) if path else "default settings")
        state = "on" if self.enabled else "off"
        return f"torchlint: {state}; rules {', '.join(rule.code for rule in rules) or '(none)'} (from {source})"


def _moved_down(finding: Finding) -> Finding:
    """The finding one line further down."""
    edits = tuple(dataclasses.replace(edit, line=edit.line + 1, end_line=edit.end_line + 1) for edit in finding.edits)
    return dataclasses.replace(finding, line=finding.line + 1, end_line=finding.end_line + 1, edits=edits,
                               noqa_lines=tuple(n + 1 for n in finding.noqa_lines))


def _first_line(text: str) -> str:
    return text.lstrip().split("\n", 1)[0]


def _write(text: str) -> None:
    """To stderr as it is now (Jupyter's kernel replaces it for each cell)."""
    sys.stderr.write(text)
    sys.stderr.flush()


# ---------------------------------------------------------------- IPython's entry points
_EXTENSIONS: dict[int, TorchlintExtension] = {}  # by id(shell)


def load_ipython_extension(ipython: Any) -> None:
    if id(ipython) in _EXTENSIONS:
        return
    extension = TorchlintExtension(ipython)
    _EXTENSIONS[id(ipython)] = extension
    ipython.events.register("pre_run_cell", extension.pre_run_cell)
    ipython.register_magic_function(extension.magic, "line_cell", MAGIC)


def unload_ipython_extension(ipython: Any) -> None:
    extension = _EXTENSIONS.pop(id(ipython), None)
    if extension is None:
        return
    ipython.events.unregister("pre_run_cell", extension.pre_run_cell)
    for kind in ("line", "cell"):
        ipython.magics_manager.magics[kind].pop(MAGIC, None)
