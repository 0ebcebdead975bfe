"""OFED / DOCA driver version lines."""

from __future__ import annotations

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.ofed_info import parse_ofed_info
from provisioner.parsers.versions import matches

from ._samples import read, rejected


@pytest.mark.parametrize(
    ("sample", "flavor", "version", "package"),
    [
        ("ofed_info-s-1.txt", "MLNX_OFED_LINUX", "23.07-0.5.1.2", "MLNX_OFED_LINUX-23.07-0.5.1.2"),
        ("ofed_info-s-2.txt", "OFED-internal", "4.7-3.2.9", "OFED-internal-4.7-3.2.9"),
        ("ofed_info-s-3.txt", "MLNX_OFED_LINUX", "5.4-3.5.8.0", "MLNX_OFED_LINUX-5.4-3.5.8.0"),
        ("ofed_info-s-6.txt", "MLNX_OFED_LINUX", "5.1-2.3.7", "MLNX_OFED_LINUX-5.1-2.3.7"),
    ],
)
def test_ofed_info_samples(sample: str, flavor: str, version: str, package: str) -> None:
    info = parse_ofed_info(read(sample))
    assert (info.flavor, info.version, info.package) == (flavor, version, package)
    assert info.kernel is None


def test_host_driver_version_line() -> None:
    info = parse_ofed_info(read("hca_self_test-driver-line-1.txt"))
    assert info.flavor == "MLNX_OFED_LINUX"
    assert info.version == "23.10-1.1.9.0"
    assert info.build == "OFED-23.10-1.1.9"
    assert info.kernel == "6.5.0-1007-nvidia"
    assert matches(info.version, ">=23.07,<24.04")


def test_sample_versions_feed_the_version_comparison() -> None:
    assert matches(parse_ofed_info(read("ofed_info-s-1.txt")).version, ">=23.07")
    assert not matches(parse_ofed_info(read("ofed_info-s-3.txt")).version, ">=23.07")
    assert matches(parse_ofed_info(read("ofed_info-s-3.txt")).version, ">5.1-2.3.7")


@pytest.mark.parametrize(
    ("text", "version", "ofed_version"),
    [
        ("DOCA-HOST-2.9.1\n", "2.9.1", None),
        ("doca-host 2.9.1-012000-24.10-ubuntu2204\n", "2.9.1", "24.10"),
        ("doca-host-2.9.1-012000-24.10-ubuntu2204:\n", "2.9.1", "24.10"),
        ("doca-ofed\t2.10.0-093000-25.01-ubuntu2404\n", "2.10.0", "25.01"),
    ],
)
def test_doca_forms(text: str, version: str, ofed_version: str | None) -> None:
    info = parse_ofed_info(text)
    assert (info.flavor, info.version, info.ofed_version) == ("DOCA", version, ofed_version)


def test_doca_host_internal_build_keeps_its_flavor() -> None:
    info = parse_ofed_info("OFED-internal-24.10-1.1.4:\n")
    assert (info.flavor, info.version) == ("OFED-internal", "24.10-1.1.4")


def test_prompt_line_and_crlf_are_tolerated() -> None:
    info = parse_ofed_info("$ ofed_info -s\r\nMLNX_OFED_LINUX-23.10-1.1.9.0:\r\n")
    assert info.version == "23.10-1.1.9.0"


@pytest.mark.parametrize("text", ["", "\n\n", "   \r\n"])
def test_empty_output_is_an_error(text: str) -> None:
    with pytest.raises(ParseError, match="no version line") as err:
        parse_ofed_info(text)
    assert err.value.kind == "ofed_info"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("bash: ofed_info: command not found\n", 1),
        ("MLNX_OFED_LINUX-23.10-1.1.9.0:\nMLNX_OFED_LINUX-5.4-3.5.8.0:\n", 2),
        ("\nMLNX_OFED_LINUX-abc:\n", 2),
        ("bash-5.1\n", 1),
        ("Host Driver Version: something else\n", 1),
    ],
)
def test_malformed_output_names_the_line(text: str, line: int) -> None:
    found_line, _reason = rejected(parse_ofed_info, text)
    assert found_line == line
