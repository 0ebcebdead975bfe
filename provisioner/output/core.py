"""Where foreign text (from hosts, logs, tools) is made safe for every output, once: the terminal (no
control bytes, never read as rich markup), JSON, JUnit XML; and where report files are written.

Every printer and report writer goes through these functions, so a value a node printed can neither
move the operator's cursor, retitle the terminal, reorder what is shown (bidi overrides), break rich's
markup parser, nor make a JUnit file ill-formed. rich is imported only where a function needs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.output.files import REPORT_MODE, OutputError, check_target, write_report

__all__ = ["REPORT_MODE", "cell", "check_report", "clean", "clean_data", "junit_xml", "markup", "one_line",
           "write_report", "write_reports"]

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    from rich.text import Text

# C0 controls but newline and tab, DEL, C1 controls, bidirectional overrides (which reorder what a
# terminal shows), and the code points XML 1.0 cannot hold.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def count(number: int, noun: str) -> str:
    """"1 host", "2 hosts": a count and its noun (regular plurals only)."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def clean(text: object) -> str:
    """`text` with every control character written as a visible escape (`\\x1b`, `\\r`, `\\u202e`).

    Idempotent: what it returns holds nothing it would escape again.
    """
    value = "" if text is None else str(text)
    return _UNSAFE.sub(_escape_char, value)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: object) -> str:
    """`text` cleaned, and its line breaks and tabs written as `\\n` and `\\t` too: for a line that holds a
    value from elsewhere (a Slurm reason may span lines) and must stay one line, the value whole, none of its
    lines passing for a line of fabnet's own."""
    return clean(text).replace("\n", "\\n").replace("\t", "\\t")


def markup(text: object) -> str:
    """`text` cleaned and escaped for a place inside a rich markup string: `[/x]` is shown, not read."""
    from rich.markup import escape

    return escape(clean(text))


def cell(text: object, style: str = "") -> Text:
    """A rich Text of `text` cleaned: for table cells and titles, which rich would otherwise read as markup."""
    from rich.text import Text

    return Text(clean(text), style=style)


def clean_data(data: Any) -> Any:
    """A JSON-able document with every string (keys included) cleaned: what programs read carries the
    same visible escapes as the terminal, never a raw control byte once decoded."""
    if isinstance(data, str):
        return clean(data)
    if isinstance(data, dict):
        return {clean(key) if isinstance(key, str) else key: clean_data(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [clean_data(item) for item in data]
    return data


def junit_xml(root: Element) -> str:
    """The one JUnit writer: every attribute and text of the tree cleaned (XML 1.0 cannot hold most
    control characters, even as character references), indented, with an XML declaration."""
    from xml.etree import ElementTree as ET

    for element in root.iter():
        for name, value in element.attrib.items():
            element.set(name, clean(value))
        if element.text is not None:
            element.text = clean(element.text)
        if element.tail is not None:
            element.tail = clean(element.tail)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def check_report(path: Path | None) -> None:
    """OutputError unless a report can be written at `path` (None: no report asked for); for commands
    that refuse a bad path before they contact any host."""
    if path is not None:
        check_target(path)



def write_reports(reports: list[tuple[Path | None, Callable[[], str]]]) -> OutputError | None:
    """Write each report asked for (a path, and how to make its text) with `write_report`. Every one is
    tried; the first failure is returned, not raised, so that a command that has already changed or
    read hosts still shows its results before it says which file could not be written."""
    failure = None
    for path, render in reports:
        if path is None:
            continue
        try:
            write_report(path, render())
        except OutputError as exc:
            failure = failure or exc
    return failure
