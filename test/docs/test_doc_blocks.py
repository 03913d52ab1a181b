"""Every command the documentation shows is one a test runs: each bash and Python block of
docs/ and the README is a step of a page a test runs (``support.doc_pages.RUN_PAGES``), or
includes a file that a run step uses or that lies in ``docs/snippets/`` (whose files
``test/docs/test_doc_snippets.py`` runs or checks, each of them), or names the test that runs
each of its command lines (``<!-- test: run by ... -->``, checked here line by line), or says
why it is not run (``<!-- test: skip, REASON -->``). YAML blocks are included from such files
too, so a parameters file or a map shown on a page is one a test loads. No ROS, no export:
this reads the pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.doc_pages import ROOT, RUN_PAGES, SNIPPETS, SNIPPETS_TEST, doc_pages
from support.page_blocks import STEP_LANGUAGES, command_lines, included_files, page_blocks

LANGUAGES = (*STEP_LANGUAGES, "yaml", "text")

PAGES = [page.relative_to(ROOT).as_posix() for page in doc_pages()]


def run_steps() -> str:
    """The code of every step the page tests run, together."""
    return "\n".join(
        block.code
        for page in RUN_PAGES
        for block in page_blocks(ROOT / page)
        if block.mode in ("run", "background")
    )


def checked_include(path: str, steps: str) -> bool:
    """Whether a test runs or checks the included file ``path``."""
    return path.startswith(f"{SNIPPETS}/") or path in steps


@pytest.mark.parametrize("page", PAGES)
def test_every_code_block_names_a_language_the_checks_know(page):
    for block in page_blocks(ROOT / page):
        assert block.language in LANGUAGES, (
            f"{block.where(ROOT / page)}: a ```{block.language} block; write bash, python, "
            f"yaml or text (for output), so test/docs/test_doc_blocks.py knows how it is tested"
        )


@pytest.mark.parametrize("page", PAGES)
def test_every_bash_and_python_block_is_run_by_a_test(page):
    steps = run_steps()
    for block in page_blocks(ROOT / page):
        if block.language not in STEP_LANGUAGES:
            continue
        where = block.where(ROOT / page)
        if block.mode in ("run", "background"):
            assert page in RUN_PAGES, (
                f"{where}: no test runs this page's steps: run it from a test and list it in "
                "test/support/doc_pages.py's RUN_PAGES, or include the code from a file in "
                f'{SNIPPETS}/ (--8<-- "{SNIPPETS}/FILE:SECTION")'
            )
            runner = ROOT / RUN_PAGES[page]
            assert page in runner.read_text(encoding="utf-8"), f"{runner} does not run {page}"
        elif block.mode == "elsewhere":
            runner = ROOT / block.test
            assert runner.is_file(), f"{where}: 'run by {block.test}': no such test file"
            text = runner.read_text(encoding="utf-8")
            missing = [line for line in command_lines(block.code) if line not in text]
            assert not missing, f"{where}: {block.test} does not run {missing} as written"
        elif block.mode == "shown":
            included = included_files(block)
            assert included, f"{where}: a {block.language} block that is neither run nor included"
            untested = [path for path in included if not checked_include(path, steps)]
            assert not untested, (
                f"{where}: includes {untested}, which no test runs: move the code into "
                f"{SNIPPETS}/ or into a file a page's step runs"
            )
        else:
            assert block.mode == "skip", where


@pytest.mark.parametrize("page", PAGES)
def test_every_yaml_block_is_included_from_a_file_a_test_loads(page):
    steps = run_steps()
    for block in page_blocks(ROOT / page):
        if block.language != "yaml":
            continue
        included = included_files(block)
        where = block.where(ROOT / page)
        assert included, (
            f"{where}: a YAML block written in the page: put it in {SNIPPETS}/ (checked by "
            f"{SNIPPETS_TEST}) and include it, so the parameters or map it shows are loaded"
        )
        untested = [path for path in included if not checked_include(path, steps)]
        assert not untested, f"{where}: includes {untested}, which no test loads"


def test_every_run_page_names_a_test_module_that_exists():
    for page, runner in RUN_PAGES.items():
        assert (ROOT / page).is_file(), f"RUN_PAGES names {page}, which does not exist"
        assert (ROOT / runner).is_file(), f"RUN_PAGES: {page} is run by {runner}: no such file"


def test_the_snippets_test_checks_every_snippet_file():
    text = (ROOT / SNIPPETS_TEST).read_text(encoding="utf-8")
    for path in sorted(Path(ROOT / SNIPPETS).iterdir()):
        if path.suffix == ".py":
            continue  # every Python file there runs (test_every_snippet_file_runs)
        assert path.name in text, f"{SNIPPETS_TEST} does not check {SNIPPETS}/{path.name}"
