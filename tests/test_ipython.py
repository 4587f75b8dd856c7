"""``%load_ext torchlint`` in a real IPython shell: each cell is checked before it runs,
with the cells executed before it as context, and only its own findings are shown."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import ExecutionInfo, InteractiveShell
from traitlets.config import Config

import torchlint
from conftest import ROOT
from torchlint import ipython as extension_module
from torchlint.datatypes import Finding
from torchlint.engine import lint_source, with_fix_edits
from torchlint.ipython import CellLinter, TorchlintExtension
from torchlint.notebook import Notebook
from torchlint.settings import Settings, resolve_rules
from torchlint.slicing import relevant

SETUP = "import torch\nw = torch.zeros(3, requires_grad=True)\n(w * 2).sum().backward()\n"
UPDATE = "w -= 0.1 * w.grad"
TL002_FIX = "+ 1 | w.data.sub_(0.1 * w.grad)"


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: the default settings
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.InteractiveShell.colors = "NoColor"
    shell = InteractiveShell(config=config)
    run(shell, "%load_ext torchlint")
    yield shell
    torchlint.unload_ipython_extension(shell)


def run(shell: InteractiveShell, cell: str, cell_id: str | None = None) -> str:
    """Run a cell as the user would; what it printed, stdout and stderr in the order written."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        shell.run_cell(cell, store_history=True, cell_id=cell_id)
    return out.getvalue()


def extension(shell: InteractiveShell) -> TorchlintExtension:
    return extension_module._EXTENSIONS[id(shell)]


# ---------------------------------------------------------------- cells as one program
def test_a_mistake_across_cells_is_shown_with_its_fix_before_the_cell_runs(shell: InteractiveShell) -> None:
    assert run(shell, SETUP) == ""
    output = run(shell, f"print('running')\n{UPDATE}\n")
    report, _, rest = output.partition("running")
    assert report.startswith(f"In[3]:2:1: TL002 [*] in-place update on `w`")
    assert "2 | w -= 0.1 * w.grad" in report and "= fix (safe): update `w.data` in place" in report
    assert "+ 2 | w.data.sub_(0.1 * w.grad)" in report
    assert "RuntimeError" in rest and "a leaf Variable that requires grad" in rest  # then the cell ran


def test_only_the_new_cells_findings_are_shown(shell: InteractiveShell) -> None:
    first = run(shell, SETUP + "b = torch.zeros(1)\nb.require_grad = True\n")
    assert "TL012" in first
    second = run(shell, UPDATE)
    assert "TL002" in second and "TL012" not in second


def test_a_cell_without_torch_names_known_from_earlier_cells_is_quiet(shell: InteractiveShell) -> None:
    run(shell, "import torch\nw = torch.zeros(3)\n")
    assert run(shell, "w -= 0.1 * w\nprint(w.sum().item())") == "0.0\n"


def test_cells_run_before_the_extension_was_loaded_are_context() -> None:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell(config=config)
    run(shell, SETUP)
    run(shell, "%load_ext torchlint")
    try:
        assert "TL002" in run(shell, UPDATE)
    finally:
        torchlint.unload_ipython_extension(shell)


def test_ipython_syntax_is_masked_as_in_notebooks(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    output = run(shell, f"%%time\n{UPDATE}\n")
    assert output.startswith("In[3]:2:1: TL002")
    assert "TL002" not in run(shell, "%ls\n!echo hi\n")
    assert run(shell, f"%%writefile notes.txt\n{UPDATE}\n") == "Writing notes.txt\n"  # not Python: not checked


def test_noqa_comments_work_in_cells(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    assert "TL002 [*]" not in run(shell, f"{UPDATE}  # noqa: TL002")  # Python's traceback shows the comment
    assert "TL002 [*]" not in run(shell, f"# torchlint: noqa\n{UPDATE}")
    assert "TL002 [*]" in run(shell, f"{UPDATE}  # noqa: TL001")


def test_an_indented_cell_runs_dedented_and_columns_count_as_written(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    output = run(shell, f"    {UPDATE}\n    print('ran')\n")
    assert output.startswith("In[3]:1:5: TL002")
    assert "1 |     w -= 0.1 * w.grad" in output and "+ 1 |     w.data.sub_(0.1 * w.grad)" in output
    assert "RuntimeError" in output  # IPython ran it


# ---------------------------------------------------------------- magics
def test_off_and_on(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    assert run(shell, "%torchlint off") == "torchlint: off\n"
    assert "TL002" not in run(shell, UPDATE)
    run(shell, "%torchlint on")
    assert "TL002" in run(shell, "w -= 0.2 * w.grad")


def test_cells_run_while_off_are_still_context(shell: InteractiveShell) -> None:
    run(shell, "%torchlint off")
    run(shell, SETUP)
    run(shell, "%torchlint on")
    assert "TL002" in run(shell, UPDATE)


def test_select(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    assert "rules TL001 (from %torchlint select)" in run(shell, "%torchlint select TL001")
    assert "TL002" not in run(shell, UPDATE)
    assert "TL001" in run(shell, "w = w - 0.1 * w.grad")
    assert "from default settings" in run(shell, "%torchlint select default")
    run(shell, SETUP)
    assert "TL002" in run(shell, "w -= 0.3 * w.grad")
    error = run(shell, "%torchlint select TL9")
    assert "UsageError: unknown rule selector 'TL9'" in error
    assert "UsageError: unknown %torchlint command 'sideways'" in run(shell, "%torchlint sideways")


def test_the_cell_magic_checks_without_running(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    output = run(shell, f"%%torchlint\nv = w.detach()\n{UPDATE}\n")
    assert output.startswith("In[3]:3:1: TL002")  # lines count in the cell, `%%torchlint` is line 1
    assert "3 | w -= 0.1 * w.grad" in output and "+ 3 | w.data.sub_(0.1 * w.grad)" in output
    assert run(shell, "%%torchlint\nx = (\n").startswith("torchlint: this cell does not parse: line 2")
    assert "v" not in shell.user_ns and "RuntimeError" not in output
    assert run(shell, "%%torchlint\nprint(w)\n") == "torchlint: no findings\n"
    # What it checked is not context: `q` was never defined.
    run(shell, "%%torchlint\nq = torch.zeros(2, requires_grad=True)\n")
    assert "TL002" not in run(shell, "q = 1\nq -= 1\n")


def test_settings_come_from_the_nearest_pyproject(shell: InteractiveShell, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL001"]\n')
    monkeypatch.chdir(project / "notebooks")
    run(shell, SETUP)
    assert f"(from {project / 'pyproject.toml'})" in run(shell, "%torchlint")
    assert "TL002" not in run(shell, UPDATE)
    assert "TL001" in run(shell, "w = w - 0.1 * w.grad")


def test_a_broken_pyproject_is_reported_and_the_defaults_used(shell: InteractiveShell, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "pyproject.toml").write_text('[tool.torchlint]\nselect = "TL001"\n')
    monkeypatch.chdir(tmp_path / "broken")
    first = run(shell, SETUP)
    assert "must be a list of strings" in first and "using the default settings" in first
    output = run(shell, UPDATE)
    assert "TL002" in output and "must be a list" not in output  # reported once


# ---------------------------------------------------------------- cells that do not parse, re-runs, errors
def test_a_cell_that_does_not_parse_gets_only_pythons_error(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    output = run(shell, "def f(:\n    w -= w.grad\n")
    assert "SyntaxError" in output and "torchlint" not in output and "TL0" not in output
    assert "TL002" in run(shell, UPDATE)  # the next cells are checked as before


def test_a_rerun_cell_replaces_its_earlier_copy() -> None:
    setup = "import torch\nw = torch.ones(3, requires_grad=True)\n"
    cell = "print(w.grad)\nw = w * 2\n"
    rules = resolve_rules(Settings())
    linter = CellLinter()
    linter.run(setup, None, rules, Settings().rule_options)
    assert linter.run(cell, None, rules, Settings().rule_options).findings == []
    assert linter.run(cell, None, rules, Settings().rule_options).findings == []
    # With both copies, the second reads the grad of the first's non-leaf `w`.
    assert "TL004" in {f.code for f in lint_source(setup + cell + cell, rules).findings}
    assert [c.text for c in linter.cells] == [setup, cell]


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_rerun_cell_in_the_shell(shell: InteractiveShell) -> None:
    run(shell, "import torch\nw = torch.ones(3, requires_grad=True)\n")
    cell = "print(w.grad is None)\nw = w * 2\n"
    assert run(shell, cell) == "True\n"
    assert run(shell, cell) == "True\n"  # no TL004 from its own first copy
    assert "TL004" in run(shell, "print(w.grad)")  # a later cell sees `w` made non-leaf


def test_an_edited_jupyter_cell_replaces_its_earlier_version(shell: InteractiveShell) -> None:
    run(shell, "import torch\nv = torch.zeros(3, requires_grad=True)\n", cell_id="c1")
    run(shell, "import torch\nu = torch.zeros(3)\n", cell_id="c1")
    assert "TL002" not in run(shell, "v = 1.0\nv -= 1\n", cell_id="c2")
    assert [cell.key for cell in extension(shell).linter.cells][-2:] == ["c1", "c2"]


def test_an_internal_error_is_reported_once_and_the_cells_run(shell: InteractiveShell,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise ValueError("injected")

    monkeypatch.setattr(CellLinter, "_lint", broken)
    first = run(shell, "x = 1\nprint('first ran')")
    second = run(shell, "y = x + 1\nprint('second ran')")
    assert first.count("torchlint: internal error (ValueError: injected)") == 1 and "first ran" in first
    assert "internal error" not in second and "second ran" in second
    assert shell.user_ns["y"] == 2
    assert "internal error" not in run(shell, "%%torchlint\nz = 1\n")  # shown once, in the magic too


def test_a_cell_that_sets_off_a_bug_leaves_the_context(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    analyse = extension_module._analyse

    def fails_on_boom(program, source, *args):  # type: ignore[no-untyped-def]
        if "boom = 0.1" in program.code:
            raise KeyError("boom")
        return analyse(program, source, *args)

    monkeypatch.setattr(extension_module, "_analyse", fails_on_boom)
    run(shell, SETUP)
    assert "internal error (KeyError: 'boom')" in run(shell, "boom = 0.1")
    output = run(shell, "w -= boom * w.grad")  # would bring `boom = 0.1` in, had it stayed
    assert "TL002" in output and "internal error" not in output


def test_unload_and_reload(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    run(shell, "%unload_ext torchlint")
    assert "TL002" not in run(shell, UPDATE)
    assert "UsageError" in run(shell, "%torchlint")
    run(shell, "%load_ext torchlint")
    assert "TL002" in run(shell, "w -= 0.2 * w.grad")  # the history is context again


def test_importing_torchlint_stays_cheap() -> None:
    code = "import sys, torchlint\nprint(sorted(m for m in ('libcst', 'IPython', 'torchlint.ipython') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"
    assert callable(torchlint.load_ipython_extension) and callable(torchlint.unload_ipython_extension)


# ---------------------------------------------------------------- speed
TRAINING_CELL = '''\
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
history = []
for epoch in range(1, 4):
    model.train()
    running = 0.0
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if batch_idx % 10 == 0:
            print(f"epoch {epoch} batch {batch_idx}: {loss.item():.4f}")
    scheduler.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data.to(device))
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.to(device).view_as(pred)).sum().item()
    history.append(running / len(train_loader))
    print(f"epoch {epoch}: test accuracy {correct / len(test_loader.dataset):.3f}")
torch.save(model.state_dict(), "model.pt")
print(history)
print("done")
'''


def corpus_cells(count: int = 20, lines: int = 30) -> list[str]:
    """Cells of about ``lines`` lines each: the benchmark corpus cut at top-level statements."""
    cells: list[str] = []
    for path in sorted((ROOT / "benchmarks" / "corpus").glob("*.py")):
        source = path.read_text()
        text_lines = source.splitlines(keepends=True)
        starts = [node.lineno - 1 for node in ast.parse(source).body]
        chunk_start = 0
        for start in [*starts[1:], len(text_lines)]:
            if start - chunk_start >= lines:
                cells.append("".join(text_lines[chunk_start:start]))
                chunk_start = start
                if len(cells) == count:
                    return cells
    return cells


def median_check_seconds(earlier: list[str], cell: str, repeats: int = 15) -> float:
    shell_stub = type("Shell", (), {"execution_count": 21})()
    extension = TorchlintExtension(shell_stub)
    for text in earlier:
        extension.pre_run_cell(ExecutionInfo(text, True, False, True, None))  # as they ran: parsed once each
    times = []
    with contextlib.redirect_stderr(io.StringIO()):
        for _ in range(repeats):
            started = time.perf_counter()
            extension.pre_run_cell(ExecutionInfo(cell, True, False, True, None))
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_a_training_cell_after_twenty_cells_is_checked_fast() -> None:
    earlier = corpus_cells()
    assert len(earlier) == 20 and all(text.count("\n") >= 30 for text in earlier)
    assert TRAINING_CELL.count("\n") == 30
    median = median_check_seconds(earlier, TRAINING_CELL)
    assert median < 0.150, f"median {median * 1000:.1f} ms"  # generous for a loaded CI machine


def test_the_fast_path_finds_what_linting_the_whole_program_finds() -> None:
    """Cached statements of earlier cells + the new cell give the findings of the notebook model."""
    earlier = [SETUP, *corpus_cells()]
    cell = TRAINING_CELL.replace("        optimizer.zero_grad()\n", "") + UPDATE  # TL008, and TL002 on cell 1's `w`
    rules = resolve_rules(Settings())
    linter = CellLinter()
    for text in earlier:
        linter.run(text, None, rules, Settings().rule_options)
    fast = linter.run(cell, None, rules, Settings().rule_options).findings
    document = {"cells": [{"cell_type": "code", "source": text, "metadata": {}} for text in [*earlier, cell]],
                "metadata": {}}
    notebook = Notebook(json.dumps(document))
    whole = [notebook.to_cells(f) for f in lint_source(notebook.program, rules).findings]
    in_last_cell = [(f.code, f.line, f.col, f.message) for f in whole if f.cell == len(earlier) + 1]
    assert {code for code, *_ in in_last_cell} == {"TL002", "TL008"}
    assert [(f.code, f.line, f.col, f.message) for f in fast] == in_last_cell


# ---------------------------------------------------------------- only what the new cell needs
def cells_of(source: str, count: int) -> list[str]:
    """``source`` cut at top-level statements (decorators stay with their def) into about ``count`` cells."""
    lines = source.splitlines(keepends=True)
    starts = [min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))]) - 1
              for node in ast.parse(source).body]
    step = max(1, len(starts) // count)
    bounds = [0, *starts[step::step], len(lines)]
    return ["".join(lines[start:end]) for start, end in zip(bounds, bounds[1:]) if end > start]


def _comparable(finding: Finding, lines_before: int, last_line: int | None = None) -> tuple:
    """A finding and its fix, with lines counted from ``lines_before`` + 1; the fix's edits
    only if they all fall before ``last_line`` (as in notebooks: edits of earlier cells are not shown)."""
    edits = tuple((e.line - lines_before, e.col, e.end_line - lines_before, e.end_col, e.content) for e in finding.edits)
    if last_line is not None:
        after = (last_line - lines_before + 1, 1)  # where the next cell starts
        if any(line < 1 or (end_line, end_col) > after for line, _, end_line, end_col, _ in edits):
            edits = ()
    fix = (finding.fix.description, finding.fix.safety) if finding.fix else None
    return finding.code, finding.line - lines_before, finding.col, finding.message, fix, edits


def test_every_fixture_cut_into_cells_gives_the_findings_of_the_whole_file() -> None:
    """Each cell's findings and fixes, checked against the cells before it, are those that
    linting those cells as one file gives in that cell; statements are really left out."""
    rules = resolve_rules(Settings(select=("ALL",)))
    compared = left_out = 0
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.py")):
        cells = cells_of(path.read_text(), 4)
        linter = CellLinter()
        first_line = 1
        for index, cell in enumerate(cells):
            fast = linter.run(cell, None, rules, Settings().rule_options).findings
            last_line = first_line + cell.count("\n") - 1
            program = "".join(cells[: index + 1])
            whole = with_fix_edits(lint_source(program, rules), program)
            expected = [_comparable(f, first_line - 1, last_line) for f in whole if first_line <= f.line <= last_line]
            assert [_comparable(f, 0) for f in fast] == expected, (path.name, index)
            compared += len(expected)
            first_line = last_line + 1
        facts = [f for c in linter.cells[:-1] for f in c.statement_facts()]
        left_out += sum(not keep for keep in relevant(facts, linter.cells[-1].statement_facts()))
    assert compared > 200 and left_out > 20


def test_grad_mode_switches_and_mutations_in_earlier_cells_count(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    run(shell, "torch.set_grad_enabled(False)")
    assert "TL002" not in run(shell, UPDATE)  # grad mode is off: the update is fine
    run(shell, "torch.set_grad_enabled(True)\nv = torch.zeros(3)\n")
    run(shell, "unrelated = torch.ones(2)\n")
    run(shell, "v.requires_grad_()")  # changes `v` without binding it
    assert "TL002" in run(shell, "v -= 1")


def left_out(earlier: list[str], cell: str) -> list[str]:
    """The first lines of the earlier top-level statements the check of ``cell`` leaves out."""
    linter = CellLinter()
    rules = resolve_rules(Settings())
    for text in earlier:
        linter.run(text, None, rules, Settings().rule_options)
    facts = [f for c in linter.cells for f in c.statement_facts()]
    program = extension_module.cell_program(cell)
    kept = relevant(facts, extension_module.cell_facts(program, extension_module.parse(program).body))
    statements = [line for text in earlier for line in text.split("\n") if line and not line.startswith(" ")]
    return [statement for statement, keep in zip(statements, kept) if not keep]


def test_the_slice_keeps_what_the_cell_depends_on() -> None:
    earlier = [
        "import torch\nimport torch.nn as nn\n",
        "class Net(nn.Module):\n    def forward(self, x):\n        return helper(x)\n",
        "def helper(x):\n    return x * scale\n",
        "def unrelated():\n    return model\n",
        "scale = 2.0\nother = 3\n",
        "print('setup done')\n",
    ]
    assert left_out(earlier, "model = Net()\nout = model(torch.ones(2))\n") == ["def unrelated():", "other = 3"]


def test_the_slice_keeps_call_sites_of_what_the_cell_defines() -> None:
    earlier = ["import torch\nb = torch.zeros(3)\nc = 1\n", "def train():\n    update(b)\n", "def other():\n    pass\n"]
    assert left_out(earlier, "def update(p):\n    p.add_(1)\n") == ["c = 1", "def other():"]


def test_the_slice_keeps_the_classes_defining_a_method_whose_result_the_cell_unpacks() -> None:
    """``count, loss = member.evaluate()`` may be read as the call of the one class's ``evaluate``
    that returns 2-tuples (``analysis/method_candidates.py``): every class defining one is kept,
    with what its methods use; a method's result kept whole needs none."""
    earlier = [
        "import torch\ncriterion = torch.nn.MSELoss()\nother = 1\n",
        "class Member:\n    def evaluate(self):\n        return 1, criterion(self.x, self.y)\n",
        "class Federation:\n    def evaluate(self):\n        return 1, 2, 3\n",
        "class Unrelated:\n    def score(self):\n        return 1, 2\n",
    ]
    cell = "for member in members:\n    count, loss = member.evaluate()\n"
    assert left_out(earlier, cell) == ["other = 1", "class Unrelated:"]
    assert left_out(earlier, "results = [m.evaluate() for m in members]\n") == [
        "criterion = torch.nn.MSELoss()", "other = 1", "class Member:", "class Federation:", "class Unrelated:"]


# ---------------------------------------------------------------- in Jupyter
@pytest.mark.slow
def test_in_a_jupyter_kernel_findings_are_a_stderr_stream_before_the_cells_output(tmp_path: Path) -> None:
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(text) for text in ("%load_ext torchlint", SETUP, f"print('step')\n{UPDATE}")]
    client = nbclient.NotebookClient(notebook, kernel_name="python3", allow_errors=True, timeout=120,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})
    assert [cell.outputs for cell in notebook.cells[:2]] == [[], []]
    report, printed, error = notebook.cells[2].outputs
    assert (report.output_type, report.name) == ("stream", "stderr")
    assert report.text.startswith("In[3]:2:1: TL002 [*] in-place update on `w`") and "+ 2 | w.data.sub_(0.1 * w.grad)" in report.text
    assert (printed.name, printed.text) == ("stdout", "step\n")
    assert (error.output_type, error.ename) == ("error", "RuntimeError")
