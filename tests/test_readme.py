"""README.md and docs/ cannot drift from the code: every command in their code blocks is run or
checked, and docs/layout.md's table names every file of model/, data/, runtime/, serving/, scripts/ and the top level."""

import re
import shlex
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [README] + [page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [block for page in PAGES for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", page, flags=re.S)]
COMMANDS = [line.strip() for block in BLOCKS for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def split_pipeline(command: str) -> list[list[str]]:
    """Each stage of ``a | b > c`` as argv lists, redirections removed."""
    stages = []
    for part in command.split("|"):
        words = shlex.split(part.split(">")[0].split("<")[0], comments=True)
        if words:
            stages.append(words)
    return stages


def test_quickstart_is_install_then_train_then_the_ci_test_command():
    quickstart = README.split("\n## Quickstart\n")[1].split("\n## ")[0]
    commands = [line.strip() for block in re.findall(r"```bash\n(.*?)```", quickstart, flags=re.S)
                for line in block.splitlines()]
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line.strip() for line in ci.splitlines() if "pytest" in line and not line.startswith("#"))
    assert test_command in commands  # README gives exactly CI's test command
    install = next(c for c in commands if "pip install -e" in c)
    assert install in ci.splitlines()  # the same install line as CI, verbatim
    assert "python train.py" in commands and 'python -m pytest -m "not slow"' in commands


def test_the_layout_table_names_every_file():
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    files = [path.relative_to(ROOT).as_posix() for pattern in ("model/**/*.py", "data/**/*.py", "runtime/*.py",
                                                               "serving/*.py", "scripts/*", "hydra_plugins/**/*.py", "*.py")
             for path in sorted(ROOT.glob(pattern)) if path.is_file() and "__pycache__" not in path.parts]
    assert "model/views/plotting.py" in files and "data/corpus.py" in files
    assert [f for f in files if f"`{f}`" not in layout] == []
    named = re.findall(r"^\| `((?:(?:model|data|runtime|serving|scripts|hydra_plugins)/)?[^`/]+(?:/[^`]+)?\.(?:py|sh))` \|",
                       layout, flags=re.M)
    assert [f for f in named if not (ROOT / f).is_file()] == []  # and nothing that is not there


def python_commands(script: str) -> list[list[str]]:
    found = []
    for command in COMMANDS:
        for argv in split_pipeline(command):
            if argv[:2] == ["python", script]:
                found.append(argv[2:])
    return found


@pytest.mark.parametrize("overrides", python_commands("train.py"), ids=lambda o: " ".join(o) or "default")
def test_every_train_command_composes(overrides):
    """A sweep (``-m a=1,2 b=x,y``) composes with every value of every swept key."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([o for o in overrides if o != "-m" and not o.startswith("hydra.")])
    values = [list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
              for o in parsed]
    searches = any(o.get_key_element() == "hparams_search" for o in parsed)  # a search: its sweeper picks values
    assert ("-m" in overrides) == (searches or any(len(v) > 1 for v in values))  # a sweep says -m, and -m sweeps
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        for swept, choices in enumerate(values):
            for choice in choices:
                chosen = [c[0] if i != swept else choice for i, c in enumerate(values)]
                compose(config_name="train", overrides=[f"{o.get_key_element()}={v}" for o, v in zip(parsed, chosen)])


@pytest.mark.parametrize("args", [a for a in python_commands("translate.py") if "--help" not in a],
                         ids=lambda a: " ".join(a)[:60])
def test_every_translate_command_parses(args):
    from translate import parse_args

    cfg, _ = parse_args(args)
    assert cfg.run


@pytest.mark.slow
def test_scripts_named_in_readme_exist_and_answer_help():
    scripts = {argv[1] for c in COMMANDS for argv in split_pipeline(c) if argv[0] == "python"
               and argv[1].startswith("scripts/")}
    assert {"scripts/seed_walkthrough.py", "scripts/benchmark.py", "scripts/evaluate.py"} <= scripts
    # One interpreter answers for all (their imports paid once), each script run as ``python script --help`` runs it.
    answer_help = ("import os, runpy, sys\nfor script in sys.argv[1:]:\n    sys.argv = [script, '--help']\n"
                   "    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as python script does\n    try:\n"
                   "        runpy.run_path(script, run_name='__main__')\n    except SystemExit as end:\n"
                   "        assert end.code in (0, None), (script, end.code)\n    print('answered', script)\n")
    asked = sorted(scripts - {"scripts/seed_walkthrough.py"})
    result = subprocess.run([sys.executable, "-c", answer_help, *asked], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [line.split()[1] for line in result.stdout.splitlines() if line.startswith("answered ")] == asked


@pytest.mark.slow
def test_seed_walkthrough_runs_as_the_readme_says():
    result = subprocess.run([sys.executable, "scripts/seed_walkthrough.py"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "9 of 9 article tensors reproduced" in result.stdout
    assert "9 of 9" in README


def test_readme_names_every_top_level_entry():
    for entry in ("configs/", "model/", "data/", "train.py", "translate.py", "tests/", "scripts/", "docs/", "serving/",
                  "runtime/"):
        assert f"`{entry}`" in README, entry
