"""Every word `sinfo --format %T` can print, release by release, and how fabnet classes it.

Built from the format strings, not from recorded output: the words are the string literals Slurm's
node_state_string() (src/common/slurm_protocol_defs.c) returns in each release's source, lower-cased as
sinfo's _print_state_long() (src/sinfo/print.c) prints them, read from the tags slurm-20-11-9-1,
slurm-21-08-8-2, slurm-22-05-11-1, slurm-23-02-7-1, slurm-23-11-11-1, slurm-24-05-8-1, slurm-24-11-7-1,
slurm-25-05-5-1 and slurm-25-11-7-1. A release not named here prints the words of the one before it.
sinfo prints `n/a` only for a row with no nodes, which `--Node` never has."""

from __future__ import annotations

import pytest

from provisioner.scheduler import IN_SERVICE
from provisioner.scheduler.slurm import FLAGS, parse_sinfo, parse_state

# release -> the words it adds to the release before it (and, after `-`, the words it no longer prints)
CHANGES: dict[str, tuple[str, str]] = {
    "20.11": (
        "? allocated allocated# allocated$ allocated% allocated* allocated+ allocated@ allocated~ "
        "cancel_reboot cloud completing completing# completing$ completing% completing* completing@ "
        "completing~ down down# down$ down% down* down@ down~ drained drained# drained$ drained% drained* "
        "drained@ drained~ draining draining# draining$ draining% draining* draining@ draining~ fail fail* "
        "failing failing* future future# future$ future% future* future@ future~ idle idle# idle$ idle% idle* "
        "idle@ idle~ maint maint* mixed mixed# mixed$ mixed% mixed* mixed@ mixed~ perfctrs power_down "
        "power_up powering_down reboot reboot* reserved resume unknown unknown*", ""),
    # reboot issued (^), power down asked for (!), planned, registration refused
    "21.08": ("allocated! allocated^ completing! completing^ down! down^ drained! drained^ draining! draining^ "
              "future! future^ idle! idle^ inval mixed! mixed- mixed^ planned powered_down powering_up reboot^ "
              "reboot_issued", ""),
    "24.05": ("blocked undrain", "perfctrs"),
    "25.05": ("external", ""),
    "25.11": ("dynamic_future dynamic_norm", ""),
}


def words(release: str) -> set[str]:
    found: set[str] = set()
    for name, (added, gone) in CHANGES.items():
        found = (found | set(added.split())) - set(gone.split())
        if name == release:
            return found
    raise KeyError(release)


ALL = sorted(set().union(*(words(r) for r in CHANGES)))
# The base words of a node in service; `drained`/`draining` are drained, every other word is out of service.
SERVING = {"idle", "mixed", "allocated", "completing", "reserved", "planned", "blocked", "perfctrs", "maint"}


def test_the_releases_words_as_counted_in_their_sources() -> None:
    assert [len(words(r)) for r in CHANGES] == [76, 99, 100, 101, 103]


@pytest.mark.parametrize("word", ALL)
def test_each_word_is_read_as_its_state_and_one_known_flag(word: str) -> None:
    state, flag = parse_state(word)
    assert state + flag == word and (flag == "" or flag in FLAGS)
    assert "_" in state or state == "?" or state.isalpha()


@pytest.mark.parametrize("word", ALL)
def test_each_word_is_in_service_drained_or_out(word: str) -> None:
    node = parse_sinfo(f"gpu01|{word}|alice|disk replacement\n", ["gpu01"])["gpu01"]
    state, flag = parse_state(word)
    if state in ("drained", "draining"):
        assert node.drained and node.out_of_service
    elif state in SERVING and flag not in ("@", "^"):
        assert not node.drained and not node.out_of_service, word
    else:
        # Down, failing, rebooting, refused, not yet in the cluster, or with no base state: someone's reason
        # stays, and fabnet neither drains over it nor resumes it.
        assert node.out_of_service and not node.drained, word
    assert not node.drained_by_fabnet


def test_fabnet_serves_exactly_the_base_words_slurm_runs_jobs_on() -> None:
    assert IN_SERVICE == SERVING


@pytest.mark.parametrize("word", ["sleeping", "idle&", "down=", "mixed=", "n/a", ""])
def test_a_word_no_release_prints_is_out_of_service(word: str) -> None:
    node = parse_sinfo(f"gpu01|{word}|alice|rack move\n", ["gpu01"])["gpu01"]
    assert node.out_of_service and not node.drained and node.flag == ""
