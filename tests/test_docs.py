"""The README is a landing page whose commands CI runs, and the
documentation site builds with warnings as errors."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP = "pip install -e . && emst-dask demo"
TESTS = "pip install -e '.[test]' && python -m pytest -q -n auto tests"


def _read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as fh:
        return fh.read()


def test_readme_is_short_and_holds_the_two_commands():
    readme = _read("README.md")
    assert len(readme.splitlines()) <= 300
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert SETUP in [b.strip() for b in blocks] and TESTS in [b.strip() for b in blocks]


def test_ci_runs_the_readme_test_command_and_builds_the_docs():
    ci = [ln.strip() for ln in _read(".ci", "run").splitlines()]
    install, run = TESTS.split(" && ")
    assert install in ci and run in ci and ci.index(install) < ci.index(run)
    assert "sphinx-build -W -b html docs docs/_build/html" in ci


def test_readme_links_reach_files():
    for target in re.findall(r"\]\(([^)#:]+)\)", _read("README.md")):
        assert os.path.exists(os.path.join(ROOT, target)), target


def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("furo")
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                        "html", "-d", str(tmp_path / "doctrees"), "docs",
                        str(tmp_path / "html")], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    index = (tmp_path / "html" / "index.html").read_text()
    assert "Service and deployment" in index and "API reference" in index
    api = (tmp_path / "html" / "generated" / "emst_dask.emst.html").read_text()
    assert "min_samples" in api and "Parameters" in api
