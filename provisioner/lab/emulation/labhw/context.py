"""What a command runs with: its name, state paths, the profile (loaded on first use) and its output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from .core import Env, ToolExit
from .hw import Hca, Hw, load_hw
from .kmod import rdma_present

if TYPE_CHECKING:
    import argparse


@dataclass
class Ctx:
    name: str
    env: Env
    _hw: Hw | None = None
    out: list[str] = field(default_factory=list)

    @property
    def hw(self) -> Hw:
        if self._hw is None:
            self._hw = load_hw(self.env)
        return self._hw

    def print(self, text: str = "") -> None:
        self.out.append(text + "\n")

    def hcas(self) -> list[Hca]:
        return self.hw.hcas if rdma_present(self.env, self.hw) else []


def make_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """An argparse parser that reports errors the way these tools do: message on stderr, status 1."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise ToolExit(f"{self.prog}: {message}\n{self.format_usage().rstrip()}", 1)

    return Parser(prog=prog, description=description)
