"""Real .deb packages for the lab's local apt repository, so installing NCCL on a node is real apt/dpkg.

The packages carry placeholder library files (there is no GPU here), but their names, versions,
dependencies and file lists look like NVIDIA's, so package-database checks see what they would see.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from provisioner.lab.system import run, write_atomic


def upstream_version(deb_version: str) -> str:
    """'2.21.5-1+cuda12.4' -> '2.21.5'."""
    return deb_version.split("-", 1)[0]


def build_nccl_deb(version: str, out_dir: Path, arch: str = "amd64") -> Path:
    """Build libnccl2 at `version` with dpkg-deb; returns the .deb path."""
    upstream = upstream_version(version)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        libdir = root / "usr/lib/x86_64-linux-gnu"
        libdir.mkdir(parents=True)
        (libdir / f"libnccl.so.{upstream}").write_text(
            f"fabnet lab emulation of NCCL {upstream}: a placeholder, not a loadable library\n"
        )
        (libdir / "libnccl.so.2").symlink_to(f"libnccl.so.{upstream}")
        doc = root / "usr/share/doc/libnccl2"
        doc.mkdir(parents=True)
        (doc / "README.fabnet-lab").write_text("Built by the fabnet lab for its local package repository.\n")
        control = root / "DEBIAN/control"
        control.parent.mkdir()
        control.write_text(
            "Package: libnccl2\n"
            f"Version: {version}\n"
            f"Architecture: {arch}\n"
            "Maintainer: fabnet lab <lab@fabnet.invalid>\n"
            "Section: libs\n"
            "Priority: optional\n"
            "Multi-Arch: same\n"
            "Description: NVIDIA Collective Communication Library (NCCL) Runtime (fabnet lab emulation)\n"
            " Placeholder package with the real package's name and version scheme.\n"
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        deb = out_dir / f"libnccl2_{version.replace(':', '%3a')}_{arch}.deb"
        run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
    return deb


def build_repository(repo: Path, versions: tuple[str, ...]) -> list[Path]:
    """A flat apt repository: the .debs plus a Packages index (apt reads it with [trusted=yes])."""
    debs = [build_nccl_deb(version, repo) for version in versions]
    # Filename: entries must be relative to the repository root, so scan from inside it.
    proc = run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo, timeout=60)
    write_atomic(repo / "Packages", proc.stdout)
    return debs
