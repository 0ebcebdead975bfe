"""Ordering and constraint matching of OFED / DOCA / NCCL versions."""

from __future__ import annotations

import pytest

from provisioner.parsers.versions import Version, matches, parse_constraint


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("23.07-0.5.1.2", "23.10-1.1.9.0"),
        ("5.1-2.3.7", "5.4-3.5.8.0"),
        ("4.7-3.2.9", "5.1-2.3.7"),
        ("5.4-3.5.8.0", "23.07-0.5.1.2"),
        ("2.18.3-1+cuda12.2", "2.21.5"),
        ("2.21.5", "2.21.5-1+cuda12.4"),
        ("2.19.3", "2.21.5"),
        ("2.9.9", "2.10.0"),  # numeric, not string, comparison
        ("23.07", "23.07-0.5.1.2"),  # a longer version extends the shorter one
        ("2.21.5-1+cuda12.2", "2.21.5-1+cuda12.4"),
        ("2.21.5-1+cuda12.9", "2.21.5-1+cuda12.10"),
    ],
)
def test_ordering(older: str, newer: str) -> None:
    assert Version(older) < Version(newer)
    assert Version(newer) > Version(older)
    assert Version(older) != Version(newer)
    assert sorted([Version(newer), Version(older)]) == [Version(older), Version(newer)]


def test_equal_versions_hash_alike_and_print_as_written() -> None:
    assert Version("23.07-0.5.1.2") == Version("23.7-0.5.1.2")
    assert hash(Version("23.07-0.5.1.2")) == hash(Version("23.7-0.5.1.2"))
    assert str(Version("23.07-0.5.1.2")) == "23.07-0.5.1.2"
    assert Version("2.21.5-1+cuda12.4").local == "cuda12.4"
    assert Version("23.10-1.1.9.0").release == (23, 10)
    assert Version("v2.21.5") == Version("2.21.5")
    assert Version("2.21.5") == "2.21.5"
    assert Version("2.21.5") != "not a version"


@pytest.mark.parametrize("bad", ["", "abc", "2..1", "2.21.x", "-1.2", "1.2-", "1.2+", "23.10 1"])
def test_malformed_version_raises_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="not a version"):
        Version(bad)


@pytest.mark.parametrize(
    ("version", "constraint", "expected"),
    [
        ("2.21.5", "==2.21.5", True),
        ("2.21.5-1+cuda12.4", "==2.21.5", True),  # prefix match for ==
        ("2.21.5", "==2.21", True),
        ("2.21.5", "==2.2", False),  # components, not characters
        ("2.21.5", "==2.21.6", False),
        ("2.21.5", "!=2.21", False),
        ("2.19.3", "!=2.21", True),
        ("23.10-1.1.9.0", "23.10-1.1.9.0", True),  # bare = equality
        ("23.10-1.1.9.0", "23.10-1", True),
        ("23.10-1.1.9.0", "23.10-2", False),
        ("23.07-0.5.1.2", ">=23.07", True),
        ("5.4-3.5.8.0", ">=23.07", False),
        ("23.10-1.1.9.0", ">=23.07,<24.04", True),
        ("24.04-0.6.6.0", ">=23.07,<24.04", False),
        ("23.04-1.1.3.0", ">=23.07,<24.04", False),
        ("23.10-1.1.9.0", "<=23.10", True),  # <= includes every build of the series
        ("23.10-1.1.9.0", ">23.10", False),
        ("24.01-0.3.3.1", ">23.10", True),
        ("5.4-3.5.8.0", "> 5.1-2.3.7", True),
        ("2.18.3-1+cuda12.2", "<2.21.5", True),
        ("2.21.5-1+cuda12.4", "==2.21.5-1+cuda12.4", True),
        ("2.21.5-1+cuda12.2", "==2.21.5-1+cuda12.4", False),
        ("2.21.5", " >= 2.18 , < 2.22 ", True),
    ],
)
def test_matches(version: str, constraint: str, expected: bool) -> None:
    assert matches(version, constraint) is expected
    assert matches(Version(version), constraint) is expected


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ("", "empty version constraint"),
        ("   ", "empty version constraint"),
        (">=23.07,", "empty clause"),
        (">=23.07,,<24.04", "empty clause"),
        ("=>23.07", "malformed clause '=>23.07'"),
        ("=23.07", "malformed clause '=23.07'"),
        ("~=2.21", "malformed clause '~=2.21'"),
        (">=latest", "'latest' is not a version"),
        (">= 23.07 24.04", "malformed clause"),
    ],
)
def test_malformed_constraint_raises_clear_value_error(constraint: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("+", r"\+")):
        matches("23.10-1.1.9.0", constraint)


def test_parse_constraint_defaults_to_equality() -> None:
    assert parse_constraint("23.10-1.1.9.0") == [("==", Version("23.10-1.1.9.0"))]
    assert parse_constraint(">=23.07,<24.04") == [(">=", Version("23.07")), ("<", Version("24.04"))]


def test_malformed_version_in_matches_raises() -> None:
    with pytest.raises(ValueError, match="not a version"):
        matches("unknown", ">=23.07")
