"""Property tests: the YAML, inventory, playbook and template loaders fed random and adversarial input
answer with a result or a located ConfigError, within a CPU-time and memory budget, never a traceback
(any other exception fails the test) or a hang (an alarm fails it)."""

from __future__ import annotations

import json
import resource
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.errors import ConfigError
from provisioner.load import sandbox, yamlsrc
from provisioner.load.hostplans import validate
from provisioner.load.inventory import load_inventory
from provisioner.load.templating import VarResolver, check_template_text
from provisioner.load.yamlsrc import Origin, load_yaml
from provisioner.resources import REGISTRY

CPU_SECONDS_PER_EXAMPLE = 5.0  # CPU time for one input (CPU, not wall clock: the budget holds on a busy machine)
MEMORY_HEADROOM = 1 << 30  # address space a test may add to what the process already has
HANG_AFTER = 300  # wall-clock seconds (a blocked read never ends; a loaded machine can be very slow)

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


class Hang(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` in the code under test eats it."""


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(autouse=True)
def budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Cap the address space (a blow-up is a MemoryError, which fails the test), and alarm on a hang."""
    # Smaller limits than the defaults keep each example cheap; the defaults are tested on their own.
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 1.0)
    monkeypatch.setattr(yamlsrc, "MAX_VALUES", 50_000)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_size() + MEMORY_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    def alarm(*_: object) -> None:
        raise Hang(f"an input was still being processed after {HANG_AFTER} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def bounded(call: Callable[[], Any]) -> Any:
    """Run `call` under the per-example budget: a result or a ConfigError, anything else propagates."""
    signal.setitimer(signal.ITIMER_REAL, HANG_AFTER)
    started = time.process_time()
    try:
        result = call()
    except ConfigError as exc:
        result = exc
        assert str(exc).strip(), "an error without a message"
        assert "Traceback" not in str(exc)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    elapsed = time.process_time() - started
    assert elapsed < CPU_SECONDS_PER_EXAMPLE, f"took {elapsed:.1f} s of CPU"
    return result


# -------------------------------------------------------------------------------------------- YAML text

YAML_PIECES = [
    "-", "- ", ":", ": ", "[", "]", "{", "}", ",", "&a ", "*a", "&b ", "*b", "<<: ", "<<: *a", "? ", "!!set ",
    "!!omap ", "!!binary ", "!!python/object/apply:os.system ['id']", "!!str ", "!unsafe ", "|", ">", "'", '"',
    "#", "%YAML 1.1\n", "---\n", "...\n", "\n", "\n  ", "\n    ", "\t", " ", "a", "hosts", "all", "children",
    "vars", "ansible_host", "gpu[0:9]", "gpu[0:99999999]", "1", "0x1F", "1e400", "~", "null", "yes", "\x00",
    "\x1b[2J", "\x07", "\ufeff", "\u2028", "\U0001f600", "é", "\\", "\\x00", "{{ x }}", "{% include '/etc/passwd' %}",
]

yaml_text = st.lists(st.sampled_from(YAML_PIECES), max_size=60).map("".join)


def _bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


adversarial_yaml = st.one_of(
    st.builds(_bomb, st.integers(1, 12), st.integers(2, 12)),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: "{a: " * n + "1" + "}" * n),
    st.integers(1, 300).map(lambda n: "".join(f"{'  ' * i}k{i}:\n" for i in range(n))),
    st.integers(1, 200).map(lambda n: "m0: &m0 {x: 1}\n" + "".join(f"m{i}: &m{i} {{<<: *m{i - 1}}}\n"
                                                                  for i in range(1, n))),
    st.just("a: &a [*a]\n"),
    st.just("a: &a {b: *a}\n"),
)

any_yaml = st.one_of(yaml_text, adversarial_yaml)


def _write(directory: str, name: str, data: str | bytes) -> Path:
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    return path


@FUZZ
@given(st.one_of(any_yaml, st.binary(max_size=400)))
def test_yaml_loader_answers_with_data_or_a_located_error(content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "x.yml", content)
        result = bounded(lambda: load_yaml(path))
        if isinstance(result, ConfigError):
            assert result.file == str(path)


@FUZZ
@given(st.one_of(any_yaml, st.binary(max_size=400)))
def test_inventory_loader_answers_with_hosts_or_a_located_error(content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "hosts.yml", content)
        bounded(lambda: load_inventory(path))


# ---------------------------------------------------------------------------------- structured documents

HOSTILE = [
    "; touch /tmp/pwned", "$(touch /tmp/pwned)", "`id`", "a\nb", "-rf", "--help", "", " ", "\t", "eth0",
    "mlx5_0", "/etc/x", "../../etc/shadow", "{{ x }}", "{{ undefined_var }}", "{{ 'a' * 3000000000 }}",
    "{{ lipsum(2000000) }}", "{% include '/etc/passwd' %}", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{{ ''.__class__.__mro__ }}", "{{ x", "%}", "é", "\u202e", "gpu[0:99999999]", "0644", "9000",
]

scalars = st.one_of(
    st.sampled_from(HOSTILE), st.integers(-(2**70), 2**70), st.booleans(), st.none(),
    st.floats(allow_nan=False), st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)
field_names = st.sampled_from(sorted({name for rtype in REGISTRY.values() for name in rtype.spec.model_fields}))
resource_item = st.builds(
    lambda kind, spec: {kind: spec},
    st.sampled_from([*REGISTRY, "nope"]),
    st.one_of(st.dictionaries(field_names, values, max_size=5), values),
)
play = st.fixed_dictionaries(
    {"hosts": st.one_of(st.sampled_from(["all", "gpu", "gpu01", "!x", "", "~[", "gpu[0:99999999]"]), values)},
    optional={
        "vars": st.dictionaries(st.sampled_from(["x", "mtu", "iface", "bad name", "1x"]), values, max_size=3),
        "resources": st.lists(st.one_of(resource_item, values), max_size=4),
        "name": values,
        "serial": values,
        "verify": values,
    },
)
inventory_doc = st.fixed_dictionaries(
    {"all": st.fixed_dictionaries({}, optional={
        "hosts": st.dictionaries(st.sampled_from(["gpu01", "gpu02", "gpu[01:03]", "-x", "a;b"]),
                                 st.one_of(st.none(), st.dictionaries(st.sampled_from(["x", "iface", "ansible_port"]),
                                                                      values, max_size=2)), max_size=3),
        "vars": st.dictionaries(st.sampled_from(["x", "mtu", "iface"]), values, max_size=3),
        "children": st.dictionaries(st.sampled_from(["gpu", "all", "ungrouped"]),
                                    st.one_of(st.none(), st.just({"hosts": {"gpu01": None}})), max_size=2),
    })}
)


@FUZZ
@given(inventory_doc, st.lists(st.one_of(play, values), max_size=3))
def test_validate_answers_with_errors_or_nothing_for_any_documents(inventory: Any, playbook: Any) -> None:
    with tempfile.TemporaryDirectory() as directory:
        # JSON is YAML: every generated value arrives exactly as generated.
        inv = _write(directory, "hosts.yml", json.dumps(inventory))
        pb = _write(directory, "pb/site.yml", json.dumps(playbook))
        errors = bounded(lambda: validate(inv, pb))
        assert isinstance(errors, list)
        assert all(isinstance(e, ConfigError) and str(e).strip() for e in errors)
        assert not any("out of memory" in str(e) for e in errors)


@FUZZ
@given(st.one_of(any_yaml, st.binary(max_size=300)), st.one_of(any_yaml, st.binary(max_size=300)))
def test_validate_answers_for_any_bytes(inventory: str | bytes, playbook: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        inv = _write(directory, "hosts.yml", inventory)
        pb = _write(directory, "pb/site.yml", playbook)
        errors = bounded(lambda: validate(inv, pb))
        assert all(isinstance(e, ConfigError) for e in errors)


# ------------------------------------------------------------------------------------------- templates

TEMPLATE_PIECES = [
    "{{ ", " }}", "{% ", " %}", "{# ", " #}", "x", "y", "'a'", "\"b\"", "1", "2", "3000000000", "99999999",
    " * ", " ** ", " + ", " ~ ", " % ", "|center(", "|indent(", "|format(", "|join", "|replace('a', 'aaaa')",
    "|batch(", "|list", "|length", "|int", ")", "(", "[", "]", ",", ".ljust(", ".zfill(", ".format(", ".join(",
    "lipsum(", "range(", "for i in ", "endfor", "if x", "endif", "macro m()", "endmacro", "m()", "set ns = ",
    "namespace(s='a')", "ns.s", "include '/etc/passwd'", "import 'x.j2' as y", "extends 'b.j2'", "'%09999999d'",
    "'{:>99999999}'", "__class__", "__mro__", ".__subclasses__()", "loop.cycle", "\n", "fabnet__loop",
    "recursive", "loop(", "raw", "endraw", "call m()", "endcall", "caller()", "self", "super()",
]

template_text = st.one_of(
    st.lists(st.sampled_from(TEMPLATE_PIECES), max_size=40).map("".join),
    # Deep nesting of one piece: brackets, parentheses, blocks, filters, operators.
    st.builds(lambda p, n: p[0] + p[1] * n + p[2] + p[3] * n + p[4],
              st.sampled_from([("{{ ", "(", "1", ")", " }}"), ("{{ ", "[", "", "]", " }}"),
                               ("", "{% if 1 %}", "x", "{% endif %}", ""), ("{{ ", "-", "1", "", " }}"),
                               ("{{ x", "|string", "", "", " }}"), ("{{ 1", " + 1", "", "", " }}")]),
              st.integers(1, 4000)),
)

nasty_templates = st.sampled_from([
    "{{ 'a' * 3000000000 }}",
    "{{ lipsum(2000000) }}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{% macro m(n) %}{{ m(n) }}{{ m(n) }}{% endmacro %}{{ m(1) }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "{% for i in [1]|batch(999999999, 'x') %}{% endfor %}",
    "{{ (range(100000)|list * 100)|length }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{% for x in range(99999)|batch(3) recursive %}{{ loop(x) }}{% endfor %}",
    "{{ 10 ** 10 ** 10 }}",
    "{{ '%s' % ('a' * 1000000) * 2 }}",
    "{{ " + "[" * 3000 + "]" * 3000 + " }}",
    "{{ 1" + " + 1" * 5000 + " }}",
    "{% if 1 %}" * 500 + "{% endif %}" * 500,
    "{% set ns = namespace(l=1) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
])


def _resolver(**variables: Any) -> VarResolver:
    return VarResolver("gpu01", {"x": "1", "y": [1, 2], **variables}, {}, {"inventory_hostname": "gpu01"})


@FUZZ
@given(st.one_of(template_text, nasty_templates))
def test_template_values_render_or_give_a_located_error(text: str) -> None:
    problem = check_template_text(text)
    assert problem is None or isinstance(problem, str)
    origin = Origin("site.yml", 3, "plays[0].vars.v")
    result = bounded(lambda: _resolver().render_text(text, origin, what="variable 'v'"))
    if isinstance(result, ConfigError):
        assert (result.file, result.line) == ("site.yml", 3)
        assert "out of memory" not in result.message
    elif isinstance(result, str):
        assert len(result) <= sandbox.MAX_OUTPUT


@FUZZ
@given(st.one_of(template_text, nasty_templates))
def test_template_files_render_or_give_a_located_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        _write(directory, "templates/t.j2", text)
        inv = _write(directory, "hosts.yml", "all:\n  hosts:\n    gpu01:\n      x: 1\n")
        pb = _write(directory, "pb/site.yml",
                    "- hosts: all\n  resources:\n    - file: {path: /etc/t, template: t.j2}\n")
        errors = bounded(lambda: validate(inv, pb))
        assert all(isinstance(e, ConfigError) and "out of memory" not in str(e) for e in errors)
