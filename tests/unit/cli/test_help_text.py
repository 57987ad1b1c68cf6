"""`--help` text: each command's docstring paragraphs are flowed, so a narrow terminal wraps them evenly."""

from __future__ import annotations

from typer.testing import CliRunner

from cdclake.cli.main import app, flow


def test_flow_joins_the_lines_of_each_paragraph_and_keeps_the_paragraphs() -> None:
    doc = """First line
    goes on.

    Second paragraph,
    on two lines.
    """

    assert flow(doc) == "First line goes on.\n\nSecond paragraph, on two lines."


def test_flow_keeps_the_breaks_of_lists_indented_and_marked_paragraphs_and_what_follows_a_form_feed() -> None:
    doc = "Intro.\n\nSteps:\n- one\n- two\n\nCode:\n    x = 1\n\n\b\nkept\nas is\n\fhidden\nlines"

    assert flow(doc) == "Intro.\n\nSteps:\n- one\n- two\n\nCode:\n    x = 1\n\n\b\nkept\nas is\n\fhidden\nlines"


def test_flow_joins_a_line_that_starts_with_an_option() -> None:
    assert flow("Exits 65 unless\n--allow-dead-letters is given.") == "Exits 65 unless --allow-dead-letters is given."


def test_ingest_help_wraps_evenly_in_an_80_column_terminal() -> None:
    result = CliRunner().invoke(app, ["ingest", "--help"], env={"COLUMNS": "80"})

    assert result.exit_code == 0, result.output
    text = " ".join(line.strip() for line in result.output.splitlines())
    assert "holds the source's lock, this one waits up to --lock-wait seconds" in text
    # the docstring broke this paragraph after "this one"; flowed, the terminal wraps it at 80 columns instead
    lines = [line.rstrip() for line in result.output.splitlines()]
    assert not any(line.endswith("this one") for line in lines)
    assert max(len(line) for line in lines) <= 80
