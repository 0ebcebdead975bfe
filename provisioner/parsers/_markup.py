"""What a markdown renderer did to a log pasted into an issue or a chat before it was copied back as text,
undone line by line (parsers/_text.py's clean_lines calls it first)."""

from __future__ import annotations

import re

# What a markdown renderer made of a log before it was copied back as text: GitHub turns names that look
# like domains (`net_ib.cc:101`, `10.1.3.201`) into links `[net_ib.cc:101](http://net_ib.cc:101/)`, and a
# line set in italics is wrapped in underscores (`_ibvwrap.cc: NCCL WARN ... timed out_`). Only a link whose
# target is its own text is unwrapped, so a real link in a log stays.
_AUTOLINK = re.compile(r"\[(?P<text>[^\[\]\s]+)\]\((?:https?://)(?P<target>[^()\s]+?)/?\)")
_ITALIC_LINE = re.compile(r"^_(?P<body>[^_\s].*[^_\s])_$")
_BOLD_LINE = re.compile(r"^\*\*(?P<body>[^*\s].*[^*\s])\*\*$")
# Markdown's inline code around a pasted NCCL line (`` `host:pid:tid [dev] ... `` opened mid-sentence, or
# closed lines later): a backtick before NCCL's `host:pid:tid [` prefix, or closing such a line, is the
# markup's, never the host's name.
_CODE_TICK = re.compile(r"`(?=[^\s`:]+:[0-9]+:[0-9]+ \[)")
_CODE_LINE = re.compile(r"^(?P<body>.*?[^\s`:]+:[0-9]+:[0-9]+ \[[^`]*\S)`$")


def unmark(text: str) -> str:
    """`text` without the markup a renderer added: self-links unwrapped, inline code around an NCCL line
    and a line set in italics or bold taken off."""
    if "](" in text:
        text = _AUTOLINK.sub(lambda m: m["text"] if m["target"] == m["text"] else m[0], text)
    if "`" in text:
        text = _CODE_TICK.sub("", text.rstrip())
        text = code["body"] if (code := _CODE_LINE.match(text)) else text
    if text.startswith("_") and (italic := _ITALIC_LINE.match(text.rstrip())):
        text = italic["body"]
    if text.startswith("**") and (bold := _BOLD_LINE.match(text.rstrip())):
        text = bold["body"]
    return text
