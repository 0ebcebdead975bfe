"""Whether the text being parsed is a probe's output, read from a host just now, or a paste.

The parsers read both: `fabnet parse` and `fabnet explain` get what an operator copied from a terminal, a CI
log or a chat (prompts, launcher labels, loggers' prefixes, frames, a person's `# notes`), which
`_text.clean_lines` takes off; a resource's evaluation gets the tool's own output, which has none of those.
Cleaning it anyway costs the controller about 40% of a host's evaluation (ibv_devinfo's hundred-odd lines go
through every prefix pattern), on every host of every audit and watch cycle, and could only ever take off
something the tool printed. So the evaluation of host facts runs inside `reading_host_output()`, and the
lines of what it parses lose only terminal escapes (nvidia-smi writes them even into pipes).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# Per thread (each host's task runs in one), so hosts evaluated at once never see each other's setting.
_HOST_OUTPUT: ContextVar[bool] = ContextVar("fabnet_host_output", default=False)


@contextmanager
def reading_host_output() -> Iterator[None]:
    """Within the block, parsed text is a probe's own output: no paste cleaning."""
    token = _HOST_OUTPUT.set(True)
    try:
        yield
    finally:
        _HOST_OUTPUT.reset(token)


def host_output() -> bool:
    return _HOST_OUTPUT.get()
