"""``[tool.torchlint]`` in pyproject.toml: discovery, validation and the command line on top."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchlint.cli import build_parser, main, settings_from_args
from torchlint.config import ConfigError, common_directory, find_config, load_config, settings_for
from torchlint.rule import FixStyle
from torchlint.settings import DEFAULT_EXCLUDE, Settings
from conftest import BAD



def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def in_dir(monkeypatch: pytest.MonkeyPatch):
    def enter(path: Path) -> Path:
        monkeypatch.chdir(path)
        return path

    return enter


# ---------------------------------------------------------------- discovery
def test_nearest_pyproject_with_a_torchlint_table_wins(tmp_path: Path) -> None:
    outer = write(tmp_path / "pyproject.toml", "[tool.torchlint]\nignore = ['TL001']\n")
    write(tmp_path / "a" / "pyproject.toml", "[project]\nname = 'x'\n")  # no table: passed over
    inner = write(tmp_path / "a" / "b" / "pyproject.toml", "[tool.torchlint]\n")
    (tmp_path / "a" / "b" / "c").mkdir()
    assert find_config(tmp_path / "a") == outer
    assert find_config(tmp_path / "a" / "b" / "c") == inner
    assert find_config(tmp_path / "a" / "b" / "c" / "file.py") == inner


def test_no_config_gives_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    assert find_config(tmp_path / "src") is None
    assert settings_for([str(tmp_path / "src")], isolated=True) == Settings()


def test_common_directory_of_the_linted_paths(tmp_path: Path) -> None:
    write(tmp_path / "a" / "x.py", "")
    write(tmp_path / "a" / "b" / "y.py", "")
    assert common_directory([str(tmp_path / "a" / "x.py"), str(tmp_path / "a" / "b")]) == tmp_path / "a"
    assert common_directory([]) == Path.cwd()


# ---------------------------------------------------------------- values
def test_every_key(tmp_path: Path) -> None:
    config = write(
        tmp_path / "pyproject.toml",
        """[tool.torchlint]
select = ["TL001", "tl002"]
extend-select = ["TL100"]
ignore = ["TL0"]
per-file-ignores = { "tests/*" = ["TL001"], "__init__.py" = ["TL002", "TL003"] }
exclude = ["build"]
extend-exclude = ["notebooks/old"]
fix-style = "no_grad"
unsafe-fixes = true
respect-gitignore = false
""",
    )
    settings = load_config(config)
    assert settings.select == ("TL001", "TL002")
    assert settings.extend_select == ("TL100",)
    assert settings.ignore == ("TL0",)
    assert settings.per_file_ignores == (("tests/*", ("TL001",)), ("__init__.py", ("TL002", "TL003")))
    assert settings.exclude == ("build",)
    assert settings.extend_exclude == ("notebooks/old",)
    assert settings.fix_style is FixStyle.NO_GRAD
    assert settings.unsafe_fixes is True
    assert settings.respect_gitignore is False
    assert settings.project_root == str(tmp_path)


def test_an_empty_table_keeps_the_defaults(tmp_path: Path) -> None:
    settings = load_config(write(tmp_path / "pyproject.toml", "[tool.torchlint]\n"))
    assert settings.exclude == DEFAULT_EXCLUDE and settings.select is None and settings.fix_style is None  # unset: "data" unless an enabled rule prefers another


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("selec = ['TL001']", "unknown key `selec`"),
        ("select = 'TL001'", "`select` must be a list of strings, got 'TL001'"),
        ("select = ['TL999']", "`select`: unknown rule selector 'TL999'"),
        ("ignore = [1]", "`ignore` must be a list of strings"),
        ("fix-style = 'inplace'", "`fix-style` must be one of 'data', 'no_grad', got 'inplace'"),
        ("unsafe-fixes = 'yes'", "`unsafe-fixes` must be true or false, got 'yes'"),
        ("exclude = 'build'", "`exclude` must be a list of strings"),
        ("per-file-ignores = ['x']", "`per-file-ignores` must be a table"),
        ("per-file-ignores = { 'a.py' = ['XX1'] }", '`per-file-ignores."a.py"`: unknown rule selector'),
    ],
)
def test_bad_keys_and_values_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    config = write(tmp_path / "pyproject.toml", f"[tool.torchlint]\n{body}\n")
    with pytest.raises(ConfigError) as error:
        load_config(config)
    text = str(error.value)
    assert message in text and str(config) in text and "\n" not in text


def test_invalid_toml_and_a_non_table_name_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", "[tool.torchlint\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(config)
    config.write_text("[tool]\ntorchlint = 1\n")
    with pytest.raises(ConfigError, match="`tool.torchlint` must be a table"):
        load_config(config)


def test_cli_reports_a_config_error_in_one_line_and_exits_2(tmp_path: Path, in_dir, capsys) -> None:
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\nfix-style = 3\n")
    write(tmp_path / "train.py", BAD)
    in_dir(tmp_path)
    assert main(["train.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`fix-style`" in err and err.startswith("torchlint: error: ")


# ---------------------------------------------------------------- the command line on top
def _settings(argv: list[str]) -> Settings:
    return settings_from_args(build_parser().parse_args(argv))


def test_cli_options_override_the_file(tmp_path: Path, in_dir) -> None:
    write(
        tmp_path / "pyproject.toml",
        "[tool.torchlint]\nselect = ['TL001']\nextend-select = ['TL100']\nignore = ['TL002']\n"
        "fix-style = 'no_grad'\nunsafe-fixes = true\nextend-exclude = ['old']\n",
    )
    in_dir(tmp_path)
    from_file = _settings([])
    assert (from_file.select, from_file.extend_select, from_file.ignore) == (("TL001",), ("TL100",), ("TL002",))
    overridden = _settings(["--select", "TL012", "--ignore", "TL003", "--fix-style", "data", "--no-unsafe-fixes",
                            "--extend-exclude", "new"])
    assert overridden.select == ("TL012",) and overridden.extend_select == ()  # select means exactly these
    assert overridden.ignore == ("TL002", "TL003")
    assert overridden.fix_style is FixStyle.DATA and overridden.unsafe_fixes is False
    assert overridden.extend_exclude == ("old", "new")
    assert _settings(["--extend-select", "TL012"]).extend_select == ("TL100", "TL012")
    assert _settings(["--exclude", "a,b"]).exclude == ("a", "b")


def test_config_flag_and_isolated(tmp_path: Path, in_dir) -> None:
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\nignore = ['TL001']\n")
    other = write(tmp_path / "elsewhere" / "custom.toml", "[tool.torchlint]\nignore = ['TL012']\n")
    in_dir(tmp_path)
    assert _settings([]).ignore == ("TL001",)
    assert _settings(["--config", str(other)]).ignore == ("TL012",)
    assert _settings(["--isolated"]).ignore == ()


def test_config_is_found_from_the_linted_paths_not_only_the_cwd(tmp_path: Path, in_dir, capsys) -> None:
    project = tmp_path / "project"
    write(project / "pyproject.toml", "[tool.torchlint]\nselect = ['TL001']\n")
    write(project / "train.py", BAD)
    (tmp_path / "elsewhere").mkdir()
    in_dir(tmp_path / "elsewhere")
    assert main([str(project / "train.py")]) == 1
    assert "TL012" not in capsys.readouterr().out


def test_per_file_ignores_and_excludes_are_relative_to_the_config(tmp_path: Path, in_dir, capsys) -> None:
    write(
        tmp_path / "pyproject.toml",
        "[tool.torchlint]\nselect = ['TL001', 'TL012']\n"
        "per-file-ignores = { 'pkg/sub/*' = ['TL001'], 'train.py' = ['TL012'] }\n"
        "extend-exclude = ['pkg/skipped']\n",
    )
    write(tmp_path / "pkg" / "sub" / "a.py", BAD)
    write(tmp_path / "pkg" / "train.py", BAD)
    write(tmp_path / "pkg" / "skipped" / "c.py", BAD)
    in_dir(tmp_path / "pkg")  # run from a subdirectory: patterns still start at the config's directory
    assert main(["--quiet"]) == 1
    lines = sorted(capsys.readouterr().out.splitlines())
    found = [(line.split(":")[0], line.split()[1]) for line in lines]
    assert found == [("sub/a.py", "TL012"), ("train.py", "TL001")]


def test_exclude_in_the_file_replaces_the_defaults(tmp_path: Path, in_dir, capsys) -> None:
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\nexclude = ['other']\n")
    write(tmp_path / "build" / "a.py", BAD)  # `build` is excluded by default only
    in_dir(tmp_path)
    assert main(["--select", "TL012"]) == 1
    assert "build" + os.sep + "a.py" in capsys.readouterr().out


def test_unsafe_fixes_and_fix_style_from_the_file_apply(tmp_path: Path, in_dir) -> None:
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\nfix-style = 'no_grad'\n")
    train = write(tmp_path / "train.py", BAD)
    in_dir(tmp_path)
    assert main(["--fix", "--select", "TL001", "train.py"]) == 0
    assert "with torch.no_grad():\n        w -= 0.1 * w.grad" in train.read_text()


def test_selecting_tl011_makes_no_grad_the_default_fix_style(tmp_path: Path) -> None:
    """No fix writes what another enabled rule reports: TL011 reports `.data`."""
    from torchlint.engine import fix_source
    from torchlint.rules import rule_by_code
    from torchlint.rule import RuleOptions

    source = "import torch\nw = torch.zeros(3, requires_grad=True)\nw -= 0.1\n"
    with_tl011 = fix_source(source, [rule_by_code("TL002"), rule_by_code("TL011")], RuleOptions()).source
    assert "with torch.no_grad():\n    w -= 0.1\n" in with_tl011 and ".data" not in with_tl011
    without = fix_source(source, [rule_by_code("TL002")], RuleOptions()).source
    assert "w.data.sub_(0.1)" in without
    chosen = fix_source(source, [rule_by_code("TL002"), rule_by_code("TL011")], RuleOptions(fix_style=FixStyle.DATA))
    assert "w.data.sub_(0.1)" in chosen.source  # the user's explicit choice wins
