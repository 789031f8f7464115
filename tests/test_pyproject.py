"""pyproject.toml: what ``pip install -e .`` may resolve to. A mirror or cache that still holds a withdrawn
release would install it, so the ranges themselves must exclude it; CI installs the exact version it tests."""

import re
import tomllib

from packaging.requirements import Requirement

from helpers import ROOT


def requirement(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(req for req in map(Requirement, project["dependencies"]) if req.name == name)


def test_lightning_can_never_resolve_to_a_compromised_release_nor_one_without_what_we_use():
    specifier = requirement("lightning").specifier
    # 2.6.2 and 2.6.3 ran a credential-stealing payload on import (GHSA-w37p-236h-pfx3).
    assert not specifier.contains("2.6.2") and not specifier.contains("2.6.3")
    assert not specifier.contains("2.5.6")  # fit(weights_only=...) needs 2.6
    assert specifier.contains("2.6.6") and not specifier.contains("3.0.0")


def test_ci_installs_one_exact_lightning_that_the_range_admits():
    ci = (ROOT / ".ci" / "run").read_text()
    pinned = re.findall(r"\blightning==([\d.]+)", ci)
    assert len(pinned) == 1 and requirement("lightning").specifier.contains(pinned[0])
