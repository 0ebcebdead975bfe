"""ofed: `ofed_info -s` against a version constraint and a flavor."""

from __future__ import annotations

import pytest

from ._recorded import failed, run, sample

OFED = "ofed_info -s"
NOT_INSTALLED = failed("sh: 1: ofed_info: not found", 127)

CASES = [
    pytest.param({"version": ">=23.07,<24.04", "flavor": "MLNX_OFED_LINUX"}, sample("ofed_info-s-1.txt"),
                 [("version", "ok", ">=23.07,<24.04", "23.07-0.5.1.2"),
                  ("flavor", "ok", "MLNX_OFED_LINUX", "MLNX_OFED_LINUX")], id="in-sync"),
    pytest.param({"version": "==23.10-1.1.9.0"}, sample("ofed_info-s-1.txt"),
                 [("version", "drift", "==23.10-1.1.9.0", "23.07-0.5.1.2")], id="old-version"),
    pytest.param({"version": ">=5.4", "flavor": "MLNX_OFED_LINUX"}, sample("ofed_info-s-2.txt"),
                 [("version", "drift", ">=5.4", "4.7-3.2.9"), ("flavor", "drift", "MLNX_OFED_LINUX", "OFED-internal")],
                 id="internal-build"),
    pytest.param({"version": "==5.1"}, sample("ofed_info-s-6.txt"), [("version", "ok", "==5.1", "5.1-2.3.7")],
                 id="prefix-match"),
    pytest.param({"version": ">=23.10", "flavor": "DOCA"}, NOT_INSTALLED,
                 [("version", "drift", ">=23.10", "not installed"), ("flavor", "drift", "DOCA", "not installed")],
                 id="not-installed"),
    pytest.param({"version": ">=23.10"}, "this is not ofed\n", [("version", "error", ">=23.10", None)],
                 id="garbage"),
    pytest.param({"version": ">=23.10"}, failed("ofed_info: cannot read /usr/share/doc", 2),
                 [("version", "error", ">=23.10", None)], id="fails"),
]


@pytest.mark.parametrize(("spec", "output", "expected"), CASES)
def test_ofed(spec: dict, output: object, expected: list) -> None:
    assert run("ofed", spec, {OFED: output}).summary() == expected


def test_not_installed_message() -> None:
    result = run("ofed", {"version": ">=23.10"}, {OFED: NOT_INSTALLED})
    assert result.checks[0].message == "OFED not installed"


def test_parse_error_is_in_the_message() -> None:
    result = run("ofed", {"version": ">=23.10"}, {OFED: "this is not ofed\n"})
    assert result.checks[0].message.startswith("cannot parse ofed_info output")


def test_lab_output_with_trailing_blank_line() -> None:
    result = run("ofed", {"version": "==23.10-1.1.9.0"}, {OFED: "MLNX_OFED_LINUX-23.10-1.1.9.0:\n\n"})
    assert result.summary() == [("version", "ok", "==23.10-1.1.9.0", "23.10-1.1.9.0")]


def test_doca_host_is_compared_by_its_driver_release() -> None:
    result = run("ofed", {"version": ">=23.10"}, {OFED: "doca-host 2.9.1-012000-24.10-ubuntu2204\n"})
    assert result.summary() == [("version", "ok", ">=23.10", "24.10")]
    internal = run("ofed", {"version": ">=23.10"}, {OFED: sample("ofed_info-s-8-internal-24.07.txt")})
    assert internal.summary() == [("version", "ok", ">=23.10", "24.07-0.3.5.0.110")]


def test_doca_release_without_driver_release_is_an_error_not_a_drift() -> None:
    result = run("ofed", {"version": ">=23.10"}, {OFED: "DOCA-HOST-2.9.1\n"})
    assert [c[:2] for c in result.summary()] == [("version", "error")]
    assert "DOCA release only" in result.checks[0].message
