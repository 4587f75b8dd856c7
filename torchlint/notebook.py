"""Jupyter notebooks (``*.ipynb``): linted and fixed as one program.

The Python code cells are concatenated in order (so a name defined in an earlier
cell is known in later ones), separated by a boundary line.  IPython syntax
(``%magic``, ``!shell``, ``x = !cmd``, ``obj?``, and the first line of a
``%%time``-like cell magic) is masked by a placeholder of the same line count, so
positions stay put; cells under any other cell magic (``%%bash``, ``%%html``...)
are not Python and are skipped.  A cell whose first line is indented is dedented
the way IPython runs it (its ``leading_indent`` transform), columns mapped back.
A cell that does not parse on its own can be left out of the program
(``Notebook(text, skip=...)``): the pipeline reports it and lints the others.

Findings name the cell like ruff does: ``cell N`` counts every cell of the
notebook (markdown and raw cells too), from 1, and lines and columns count within
the cell.  ``--fix`` rewrites only the ``source`` of the code cells it changes:
every other byte of the file (outputs, metadata, ids, indentation, key order,
escaping, trailing newline) is kept.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from json.decoder import scanstring  # type: ignore[attr-defined]

from torchlint.datatypes import Finding, TextEdit
from torchlint.engine import FixError

# Cell magics whose body is Python (as in ruff); other cell magics make the cell non-Python.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy", "writefile_py"})
_ASSIGNED_MAGIC = re.compile(r"^(?P<target>\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=)\s*[!%]")
_HELP = re.compile(r"^\s*[\w.]+(?:\(\))?\?{1,2}\s*$")
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class NotebookError(Exception):
    """The file is not a notebook torchlint can read (one line, names the problem)."""


@dataclass
class Cell:
    number: int  # 1-based, counting every cell of the notebook
    index: int  # position in the "cells" list
    text: str  # the cell's source as stored
    first_line: int = 0  # 1-based line of the program where the cell starts
    program_text: str = ""  # the cell as it appears in the program (dedented, IPython syntax masked)
    masked: dict[str, str] = field(default_factory=dict)  # placeholder tag -> original line
    indent: str = ""  # removed from the start of the lines in ``dedented`` (IPython's leading_indent)
    dedented: frozenset[int] = frozenset()  # 1-based cell lines that had ``indent`` removed

    def column_shift(self, line: int) -> int:
        """How many characters the program's text of cell ``line`` lacks at its start."""
        return len(self.indent) if line in self.dedented else 0

    @property
    def line_count(self) -> int:
        return len(_lines(self.text))


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _lines(text: str) -> list[str]:
    """Lines with their endings, broken where Python breaks them (not at form feeds)."""
    return _LINE.findall(text)


class Notebook:
    """A parsed notebook and the program made of its Python cells."""

    def __init__(self, text: str, skip: frozenset[int] = frozenset()) -> None:
        """``skip``: numbers of cells to leave out of the program (they stay in the file as they are)."""
        self.text = text
        self.skipped = skip
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise NotebookError(f"invalid notebook JSON: {error}") from None
        except RecursionError:  # json's decoder recurses once per nested array/object
            raise NotebookError("invalid notebook JSON: nested too deeply") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise NotebookError("not a Jupyter notebook (nbformat 4): no `cells` list")
        self.data = data
        self._tag = _unique_tag(text)
        self.cells = [cell for cell in self._code_cells(data) if cell.text.strip() and cell.number not in skip]
        self.program, self._line_map = self._build_program()

    def without(self, numbers: frozenset[int]) -> Notebook:
        """This notebook with the program leaving out these cells too."""
        return Notebook(self.text, self.skipped | numbers)

    # ------------------------------------------------------------ reading
    def _code_cells(self, data: dict) -> Iterator[Cell]:
        if not _is_python(data.get("metadata")):
            return
        for index, raw in enumerate(data["cells"]):
            if not isinstance(raw, dict) or raw.get("cell_type") != "code":
                continue
            source = raw.get("source", "")
            if isinstance(source, list) and all(isinstance(part, str) for part in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise NotebookError(f"cell {index + 1}: `source` is not a string or a list of strings")
            yield Cell(index + 1, index, source)

    def _build_program(self) -> tuple[str, list[tuple[int, int] | None]]:
        parts: list[str] = []
        line_map: list[tuple[int, int] | None] = [None]  # index 0 unused: lines are 1-based
        boundary = f"pass  # {self._tag}cell\n"
        python_cells: list[Cell] = []
        for cell in self.cells:
            masked = self._mask(cell)
            if masked is None:
                continue  # a cell magic whose body is not Python
            if python_cells:
                parts.append(boundary)
                line_map.append(None)
            cell.first_line = len(line_map)
            lines = _lines(masked)
            if lines and not lines[-1].endswith(("\n", "\r")):
                lines[-1] += "\n"
            parts.extend(lines)
            cell.program_text = "".join(lines)
            line_map.extend((cell.number, n) for n in range(1, len(lines) + 1))
            python_cells.append(cell)
        self.cells = python_cells
        return "".join(parts), line_map

    def _mask(self, cell: Cell) -> str | None:
        lines = _dedent(cell)
        first = next((line.strip() for line in lines if line.strip()), "")
        if first.startswith("%%"):
            name = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
            if name not in PYTHON_CELL_MAGICS:
                return None
            at = next(index for index, line in enumerate(lines) if line.strip())
            ranges = [(at, at + 1), *((start + at + 1, end + at + 1) for start, end in _magic_ranges(lines[at + 1:]))]
        else:
            ranges = list(_magic_ranges(lines))
        for start, end in ranges:
            for offset, number in enumerate(range(start, end)):
                key = f"{self._tag}{cell.number}.{number}"
                original = lines[number]
                ending = original[len(original.rstrip("\r\n")):]
                cell.masked[key] = original.rstrip("\r\n")
                if offset == 0:
                    assigned = _ASSIGNED_MAGIC.match(original)
                    indent = original[: len(original) - len(original.lstrip())]
                    statement = f"{assigned.group('target')} ..." if assigned else f"{indent}..."
                    lines[number] = f"{statement}  # {key}{ending}"
                else:
                    lines[number] = f"# {key}{ending}"
        return "".join(lines)

    # ------------------------------------------------------------ positions
    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line in the cell) of a program line; a boundary line belongs to the
        end of the cell before it."""
        if len(self._line_map) < 2:
            return 1, line
        line = min(max(line, 1), len(self._line_map) - 1)
        where = self._line_map[line]
        if where is not None:
            return where
        cell, last = self._line_map[line - 1]  # type: ignore[misc]  # a boundary follows a cell line
        return cell, last + 1

    def to_cells(self, finding: Finding) -> Finding:
        """The finding with lines (and columns, in a dedented cell) counted in its cell."""
        cell, line = self.locate(finding.line)
        end_cell, end_line = self.locate(finding.end_line)
        end_col = finding.end_col
        if end_cell != cell:  # cannot happen for a statement; keep the range inside the cell
            end_line, end_col = line, finding.col
        shift = self._cell(cell).column_shift if self._has_cell(cell) else (lambda _: 0)
        noqa_lines = tuple(n for c, n in map(self.locate, finding.noqa_lines) if c == cell)
        edits = tuple(self._edit_in_cell(edit, cell) for edit in finding.edits)
        return replace(finding, line=line, col=finding.col + shift(line), end_line=end_line,
                       end_col=end_col + shift(end_line), cell=cell, noqa_lines=noqa_lines,
                       edits=tuple(edit for edit in edits if edit is not None))

    def _edit_in_cell(self, edit: TextEdit, cell: int) -> TextEdit | None:
        start_cell, line = self.locate(edit.line)
        end_cell, end_line = self.locate(edit.end_line)
        if start_cell != cell or end_cell != cell:
            return None
        stored = self._cell(cell)
        if not stored.indent:
            return replace(edit, line=line, end_line=end_line)
        if line not in stored.dedented or end_line not in stored.dedented:
            return None  # a line IPython did not dedent: its columns are not shifted uniformly
        # A position at a line's start stays before the indentation; any other moves past it.
        # Each line of new text that starts a line gets the indentation back.
        indent = stored.indent
        content = _LINE_START.sub(lambda match: match.group() + indent, edit.content)
        if edit.col == 1 and content[:1] not in ("", "\n", "\r"):
            content = indent + content
        return replace(edit, line=line, col=edit.col + (len(indent) if edit.col > 1 else 0), end_line=end_line,
                       end_col=edit.end_col + (len(indent) if edit.end_col > 1 else 0), content=content)

    def position_in_cell(self, number: int, line: int, col: int) -> tuple[int, int]:
        """A (line, col) counted in a cell's program text, as counted in the cell itself."""
        return line, col + self._cell(number).column_shift(line)

    # ------------------------------------------------------------ writing
    def cell_sources(self, program: str) -> dict[int, str]:
        """The text of each Python cell in ``program`` (a fixed version of ``self.program``)."""
        boundary = f"# {self._tag}cell"
        chunks: list[list[str]] = [[]]
        for line in _lines(program):
            if line.startswith("pass") and boundary in line:
                chunks.append([])
            else:
                chunks[-1].append(line)
        if len(chunks) != len(self.cells):
            raise FixError("a fix moved code across notebook cells; nothing is written")
        sources: dict[int, str] = {}
        for cell, chunk in zip(self.cells, chunks):
            text = "".join(self._restore(cell, chunk))
            if not cell.text.endswith(("\n", "\r")) and text.endswith("\n"):
                text = text[:-1]
            sources[cell.number] = text
        return sources

    def _restore(self, cell: Cell, chunk: list[str]) -> Iterator[str]:
        """The cell's lines for its (possibly fixed) program lines: unchanged lines as
        stored, changed ones unmasked and given back the indentation IPython removed."""
        if chunk == _lines(cell.program_text) and not cell.indent:
            yield from (self._unmask(line) for line in chunk)
            return
        stored = _lines(cell.text)
        if stored and not stored[-1].endswith(("\n", "\r")):
            stored[-1] += "\n"
        matcher = difflib.SequenceMatcher(None, _lines(cell.program_text), chunk, autojunk=False)
        for tag, start, end, new_start, new_end in matcher.get_opcodes():
            if tag == "equal":
                yield from stored[start:end]
                continue
            for line in chunk[new_start:new_end]:
                line = self._unmask(line)
                yield cell.indent + line if cell.indent and line.strip() else line

    def _unmask(self, line: str) -> str:
        if self._tag not in line:
            return line
        match = re.search(re.escape(self._tag) + r"\d+\.\d+", line)
        for cell in self.cells:
            if match and match.group() in cell.masked:
                ending = line[len(line.rstrip("\r\n")):]
                return cell.masked[match.group()] + ending
        return line

    def render(self, program: str) -> str:
        """The notebook file's text with the cells of ``program`` that differ written back."""
        if program == self.program:
            return self.text
        changed = {number: text for number, text in self.cell_sources(program).items()
                   if text != self._cell(number).text}
        if not changed:
            return self.text
        spans = _source_spans(self.text)
        pieces: list[str] = []
        position = 0
        for number in sorted(changed):
            span = spans.get(self._cell(number).index)
            if span is None:
                raise FixError(f"cell {number}: cannot locate its source in the file; nothing is written")
            start, end = span
            pieces += [self.text[position:start], _json_source(self.text, start, end, changed[number])]
            position = end
        pieces.append(self.text[position:])
        return "".join(pieces)

    def _cell(self, number: int) -> Cell:
        return next(cell for cell in self.cells if cell.number == number)

    def _has_cell(self, number: int) -> bool:
        return any(cell.number == number for cell in self.cells)

    @property
    def cell_texts(self) -> dict[int, str]:
        """Each Python cell's source as stored, by cell number (the skipped ones too)."""
        return {cell.number: cell.text for cell in self._code_cells(self.data) if cell.text.strip()}


def _is_python(metadata: object) -> bool:
    if not isinstance(metadata, dict):
        return True
    for key in ("language_info", "kernelspec"):
        info = metadata.get(key)
        if isinstance(info, dict):
            language = info.get("name" if key == "language_info" else "language")
            if isinstance(language, str) and language:
                return language.lower().startswith("python")
    return True


def _unique_tag(text: str) -> str:
    tag, counter = "torchlint-masked-", 0
    while tag in text:
        counter += 1
        tag = f"torchlint-masked{counter}-"
    return tag


# ---------------------------------------------------------------- IPython syntax
_INDENT = re.compile(r"[ \t]+")
_LINE_START = re.compile(r"(?:\r\n|\r|\n)(?=[^\r\n])")


def _dedent(cell: Cell) -> list[str]:
    """The cell's lines as IPython runs them: when the first line that is not blank
    starts with spaces or tabs, that exact prefix is removed from every line starting
    with it (IPython's ``leading_empty_lines`` then ``leading_indent``; the blank lines
    before are kept here, Python ignores them).  Records what was removed on ``cell``."""
    lines = _lines(cell.text)
    first = next((line for line in lines if line.strip()), "")
    indent = _INDENT.match(first)
    if indent is None:
        return lines
    cell.indent = indent.group()
    dedented = {number for number, line in enumerate(lines, 1) if line.startswith(cell.indent)}
    cell.dedented = frozenset(dedented)
    return [line[len(cell.indent):] if number in dedented else line for number, line in enumerate(lines, 1)]


def _is_magic(line: str) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    return stripped[0] in "%!?" or bool(_ASSIGNED_MAGIC.match(line)) or bool(_HELP.match(line))


def _magic_ranges(lines: Sequence[str]) -> Iterator[tuple[int, int]]:
    """(start, end) line index ranges of IPython escapes that begin a logical line (with
    their backslash continuations); lines inside strings and brackets are never escapes."""
    scanner = _Scanner()
    index = 0
    while index < len(lines):
        if scanner.at_logical_start and _is_magic(lines[index]):
            end = index + 1
            while lines[end - 1].rstrip("\r\n").endswith("\\") and end < len(lines):
                end += 1
            yield index, end
            index = end
            continue
        scanner.feed(lines[index])
        index += 1


class _Scanner:
    """Just enough of Python's tokenizer to know where logical lines start."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # the open string's delimiter
        self.continued = False

    @property
    def at_logical_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        text = line.rstrip("\r\n")
        i, n = 0, len(text)
        self.continued = False
        while i < n:
            if self.quote is not None:
                if text[i] == "\\":
                    i += 2
                    continue
                if text.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
                i += 1
                continue
            char = text[i]
            if char == "#":
                return
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char in "\"'":
                self.quote = char * 3 if text.startswith(char * 3, i) else char
                i += len(self.quote)
                continue
            elif char == "\\" and i == n - 1:
                self.continued = True
            i += 1
        if self.quote is not None and len(self.quote) == 1 and not text.endswith("\\"):
            self.quote = None  # an unterminated one-line string ends at the line break


# ---------------------------------------------------------------- JSON splicing
def _ws(text: str, index: int) -> int:
    return _WS.match(text, index).end()  # type: ignore[union-attr]


def _value_end(text: str, index: int) -> int:
    return _DECODER.raw_decode(text, index)[1]


def _members(text: str, index: int) -> Iterator[tuple[str, int]]:
    """(key, value start) of the JSON object starting at ``index``."""
    index = _ws(text, index + 1)
    if text[index] == "}":
        return
    while True:
        key, index = scanstring(text, index + 1)
        index = _ws(text, _ws(text, index) + 1)  # past the colon
        yield key, index
        index = _ws(text, _value_end(text, index))
        if text[index] == "}":
            return
        index = _ws(text, index + 1)  # past the comma


def _elements(text: str, index: int) -> Iterator[int]:
    index = _ws(text, index + 1)
    if text[index] == "]":
        return
    while True:
        yield index
        index = _ws(text, _value_end(text, index))
        if text[index] == "]":
            return
        index = _ws(text, index + 1)


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Character span of each cell's ``source`` value, by cell index."""
    spans: dict[int, tuple[int, int]] = {}
    for key, start in _members(text, _ws(text, 0)):
        if key != "cells" or text[start] != "[":
            continue
        for index, cell_start in enumerate(_elements(text, start)):
            if text[cell_start] != "{":
                continue
            for cell_key, value_start in _members(text, cell_start):
                if cell_key == "source":
                    spans[index] = (value_start, _value_end(text, value_start))
    return spans


def _json_source(text: str, start: int, end: int, source: str) -> str:
    """``source`` as a JSON value written the way the original value at text[start:end] was."""
    ensure_ascii = _escapes_non_ascii(text)
    original = text[start:end]
    if original.startswith('"'):
        return json.dumps(source, ensure_ascii=ensure_ascii)
    items = [json.dumps(line, ensure_ascii=ensure_ascii) for line in _lines(source)]
    if not items:
        return "[]"
    prefix = text[text.rfind("\n", 0, start) + 1: start]  # `<indent>"source": `
    key_indent = prefix[: len(prefix) - len(prefix.lstrip())]
    inner = re.match(r"\[(\s*)", original)
    if inner and "\n" in inner.group(1):
        item_indent = inner.group(1)
        closing = re.search(r"(\s*)\]$", original).group(1)  # type: ignore[union-attr]
        if "\n" not in closing:
            closing = "\n" + key_indent
    else:  # the original was `[]` or on one line: indent one step more than the key
        item_indent = "\n" + key_indent + _indent_unit(text)
        closing = "\n" + key_indent
    return "[" + item_indent + ("," + item_indent).join(items) + closing + "]"


def _indent_unit(text: str) -> str:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else " "


def _escapes_non_ascii(text: str) -> bool:
    """Whether the file writes non-ASCII characters as \\u escapes (json's ensure_ascii)."""
    if any(ord(char) > 127 for char in text):
        return False
    return any(int(code, 16) > 127 for code in re.findall(r"\\u([0-9a-fA-F]{4})", text))


# ---------------------------------------------------------------- diffs
def cell_diffs(path: str, old: Notebook, new: Notebook) -> str:
    """A unified diff per changed cell, named ``path:cell N``."""
    new_cells = new.cell_texts
    diff: list[str] = []
    for number, before in old.cell_texts.items():
        after = new_cells.get(number, before)
        if after != before:
            name = f"{path}:cell {number}"
            before_lines = [line if line.endswith("\n") else line + "\n" for line in _lines(before)]
            after_lines = [line if line.endswith("\n") else line + "\n" for line in _lines(after)]
            diff.extend(difflib.unified_diff(before_lines, after_lines, fromfile=name, tofile=name))
    return "".join(diff)
