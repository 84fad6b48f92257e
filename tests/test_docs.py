"""The documentation runs: every ```python block of README.md and docs/*.md, and the README's links.

The blocks of one page run in order in one namespace (a page reads as one session), with the
repository root as the working directory. A page that needs a folder beside the repository says so in
an HTML comment, `<!-- needs: ../shared/data/NAME -->`; it is skipped, with that reason, only when the
folder is absent. A block right after `<!-- env: KEY=VALUE ... -->` runs alone in a subprocess with
those environment variables (e.g. JAX with 8 virtual devices, which a process sets before JAX starts).
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(page):
    """[(environment string or "", code)] of the page's python blocks, in order."""
    pattern = r"^(?:<!-- env: ([^>]*?) -->\n)?```python\n(.*?)^```"
    return re.findall(pattern, page.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_every_docs_page_has_executed_examples_and_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((docs/[\w.]+\.md)\)", readme))
    pages = {f"docs/{page.name}" for page in PAGES[1:]}
    assert linked == pages, "README's table and docs/ disagree"
    without = [name for name in pages if not python_blocks(ROOT / name)]
    assert without == [], f"docs pages without an executed example: {without}"


def test_readme_stays_an_entry_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_page_examples_run(page, monkeypatch):
    text = page.read_text(encoding="utf-8")
    for needed in re.findall(r"<!-- needs: (\S+) -->", text):
        if not (ROOT / needed).exists():
            pytest.skip(f"{page.name} reads {needed}, which is not beside the repository")
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"docs_{page.stem}"}
    for index, (environment, block) in enumerate(python_blocks(page)):
        if environment:
            env = dict(os.environ, PYTHONPATH=str(ROOT), **dict(v.split("=", 1) for v in environment.split()))
            env = {k: v for k, v in env.items() if not k.startswith("PYTEST_")}
            proc = subprocess.run(
                [sys.executable, "-c", block], env=env, cwd=ROOT, capture_output=True, text=True
            )
            assert proc.returncode == 0, f"{page.name} python block {index}:\n{proc.stderr[-3000:]}"
            continue
        exec(compile(block, f"{page.relative_to(ROOT)}[python block {index}]", "exec"), namespace)
