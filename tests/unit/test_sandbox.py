"""Templates are confined to the playbook's templates/ directories and bounded in size, time and recursion:
every escape and exhaustion below is a located error, and real templates still render."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from provisioner.errors import ConfigError, RenderError
from provisioner.load import sandbox
from provisioner.load.hostplans import validate
from provisioner.load.templating import VarResolver, check_template_text
from provisioner.load.yamlsrc import Origin

ORIGIN = Origin("site.yml", 7, "plays[0].vars.x")


def render(text: str, **variables: object) -> object:
    resolver = VarResolver("gpu01", variables, {}, {"inventory_hostname": "gpu01"})
    return resolver.render_text(text, ORIGIN, what="variable 'x'")


def refused(text: str, **variables: object) -> RenderError:
    started = time.monotonic()
    with pytest.raises(RenderError) as info:
        render(text, **variables)
    assert time.monotonic() - started < sandbox.MAX_SECONDS + 2
    assert (info.value.file, info.value.line, info.value.key, info.value.host) == (
        "site.yml", 7, "plays[0].vars.x", "gpu01")
    return info.value


# ------------------------------------------------------------------------------------------ size and time


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{ 'a' * 3000000000 }}", "the result of '*' would be 3,000,000,000 characters long, over the limit"),
        ("{{ [1] * 3000000000 }}", "the result of '*' would be 3,000,000,000"),
        ("{{ 3000000000 * 'a' }}", "would be 3,000,000,000"),
        ("{{ lipsum(2000000) }}", "lipsum() makes at most 100 paragraphs"),
        ("{{ 9 ** 9999999 }}", "bits, over the limit of 4096"),
        ("{{ '%0999999999d' % 1 }}", "the result of '%' would be"),
        ("{{ '%*d' % (999999999, 1) }}", "the result of '%' would be"),
        ("{{ '{:>999999999}'.format('x') }}", "the result of format() would be"),
        ("{{ '{:>{}}'.format('x', 999999999) }}", "the result of format() would be"),
        ("{{ 'a'.ljust(3000000000) }}", "the result of ljust() would be 3,000,000,000"),
        ("{{ 'a'.zfill(3000000000) }}", "the result of zfill() would be"),
        ("{{ ('\t' * 1000).expandtabs(100000) }}", "the result of expandtabs() would be"),
        ("{{ 'a'|center(3000000000) }}", "the result of the center filter would be"),
        ("{{ ('x\n' * 1000)|indent(100000) }}", "the result of the indent filter would be"),
        ("{{ '%0999999999d'|format(1) }}", "the result of the format filter would be"),
        ("{{ [1]|batch(1000000000, 'x')|list }}", "the result of the batch filter would be"),
        ("{{ ('a' * 1000000)|replace('a', 'aaaa') }}", "the result of the replace filter would be"),
        ("{{ (['a' * 1000] * 2000)|join }}", "the result of the join filter would be"),
        ("{{ ','.join(['a' * 1000] * 2000) }}", "the result of join() would be"),
        ("{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
         "attribute 's' would be 2,097,152 characters long"),
        ("{% for i in range(20000) %}{{ 'x' * 100 }}{% endfor %}", "the rendered text would be"),
    ],
)
def test_amplifiers_are_refused_before_they_allocate(text: str, message: str) -> None:
    error = refused(text)
    assert message in error.detail
    assert error.detail.startswith("cannot render ")


def test_recursive_macro_is_a_clean_error_not_a_recursion_error() -> None:
    error = refused("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}")
    assert "recursion too deep (a macro or loop that calls itself without end?)" in error.detail


@pytest.mark.parametrize(
    "text",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% set l = range(100000)|list %}{% for a in l %}{% for b in l %}{% endfor %}{% endfor %}",
        "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}",
    ],
    ids=["range-loops", "list-loops", "branching-macro"],
)
def test_rendering_time_is_bounded(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 0.5)
    started = time.monotonic()
    error = refused(text)
    assert "rendering took longer than the limit of 0.5 s" in error.detail
    assert time.monotonic() - started < 3


def test_huge_values_from_variables_are_refused() -> None:
    assert "would be" in refused("{{ x * 2 }}", x="a" * 600_000).detail


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{ 'a' * 3 }}", "aaa"),
        ("{{ [0] * 8 }}", [0] * 8),
        ("{{ '%d'|format(268435456) }}", "268435456"),
        ("rmem_max=268435456 {{ '%s' % 'x' }}", "rmem_max=268435456 x"),
        ("{{ '{:>8}'.format('x') }}", "       x"),
        ("{{ 2 ** 64 }}", 2**64),
        ("{{ 'x'|center(9) }}", "    x    "),
        ("{{ ['a', 'b']|join(',') }}", "a,b"),
        ("{% for i in range(3) %}{{ i }}{% endfor %}", "012"),
        ("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}", "a=1"),
        ("{{ lipsum(2, false)|length > 100 }}", True),
        ("{{ mtu|int + 0 }}", 9000),
    ],
)
def test_ordinary_templates_still_render(text: str, expected: object) -> None:
    assert render(text, mtu="9000") == expected


def test_reserved_names_cannot_be_shadowed() -> None:
    assert "reserved" in (check_template_text("{% set fabnet__loop = 1 %}{% for i in [1] %}{% endfor %}") or "")


# --------------------------------------------------------------------------------------------- files


@pytest.mark.parametrize(
    "text",
    [
        "{% include '/etc/passwd' %}",
        "{% import '/etc/passwd' as x %}",
        "{% from 'x.j2' import y %}",
        "{% extends 'base.j2' %}",
        "{% include 'nccl.conf.j2' %}",
    ],
)
def test_values_cannot_include_files(text: str) -> None:
    problem = check_template_text(text)
    assert problem == "a value cannot include, import or extend a template; use a file resource's template: instead"
    assert "cannot include" in refused(text).detail


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "hosts.yml", "all:\n  hosts:\n    gpu01:\n      secret_file: /etc/passwd\n")
    write(tmp_path, "secret.txt", "TOP SECRET\n")
    return tmp_path


def errors_for(project: Path, resource: str) -> list[str]:
    pb = write(project, "pb/site.yml", f"- hosts: all\n  resources:\n    - {resource}\n")
    return [str(e) for e in validate(project / "hosts.yml", pb)]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("/etc/passwd", "a template is named relative to the playbook's templates/ directory, not by an absolute path"),
        ("../secret.txt", "a template name must not contain '..'"),
        ("sub/../../secret.txt", "a template name must not contain '..'"),
        (".hidden.j2", "a template name must not contain hidden"),
        ("a\\b.j2", "a template name must not contain control characters or"),
    ],
)
def test_template_names_that_lead_out_are_refused(project: Path, template: str, message: str) -> None:
    (error,) = errors_for(project, f"file: {{path: /etc/x, template: {template!r}}}")
    assert "pb/site.yml:3: plays[0].resources[0].file.template: " + message in error


def test_a_templated_template_name_is_checked_per_host(project: Path) -> None:
    (error,) = errors_for(project, "file: {path: /etc/x, template: '{{ secret_file }}'}")
    assert "file.template: a template is named relative to" in error and "(host gpu01)" in error


def test_templates_come_only_from_templates_directories(project: Path) -> None:
    write(project, "pb/beside.j2", "beside the playbook\n")
    (error,) = errors_for(project, "file: {path: /etc/x, template: beside.j2}")
    assert f"template 'beside.j2' not found in {project / 'pb/templates'} or {project / 'templates'}" in error


def test_includes_inside_a_template_stay_inside(project: Path) -> None:
    write(project, "templates/main.j2", "{% include '/etc/passwd' %}\n")
    write(project, "templates/rel.j2", "{% include '../secret.txt' %}\n")
    (abs_error,) = errors_for(project, "file: {path: /etc/x, template: main.j2}")
    assert "templates/main.j2:1: a template is named relative to" in abs_error
    (rel_error,) = errors_for(project, "file: {path: /etc/x, template: rel.j2}")
    assert "templates/rel.j2:1: a template name must not contain '..'" in rel_error
    assert "TOP SECRET" not in abs_error + rel_error


def test_a_symlink_out_of_the_templates_directory_is_not_followed(project: Path) -> None:
    (project / "templates").mkdir()
    os.symlink(project / "secret.txt", project / "templates" / "leak.j2")
    os.symlink("/etc", project / "templates" / "etc")
    (error,) = errors_for(project, "file: {path: /etc/x, template: leak.j2}")
    assert "template 'leak.j2' not found" in error
    (error,) = errors_for(project, "file: {path: /etc/x, template: etc/passwd}")
    assert "template 'etc/passwd' not found" in error


def test_includes_and_symlinks_inside_the_directory_work(project: Path) -> None:
    from provisioner.load.hostplans import resolve
    from provisioner.load.inventory import load_inventory
    from provisioner.load.playbook import load_playbook

    write(project, "templates/conf/main.j2", "{% include 'part.j2' %}B={{ inventory_hostname }}\n")
    write(project, "templates/conf/part.j2", "A=1\n")
    os.symlink("main.j2", project / "templates" / "conf" / "link.j2")
    pb = write(project, "pb/site.yml", "- hosts: all\n  resources:\n"
               "    - file: {path: /etc/x, template: conf/main.j2}\n"
               "    - file: {path: /etc/y, template: conf/link.j2}\n")
    (plan,) = resolve(load_playbook(pb), load_inventory(project / "hosts.yml"))
    assert [r.spec.content for r in plan.resources] == ["A=1\nB=gpu01\n", "A=1\nB=gpu01\n"]


def test_template_file_output_and_size_are_bounded(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project, "templates/big.j2", "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}\n")
    (error,) = errors_for(project, "file: {path: /etc/x, template: big.j2}")
    assert "templates/big.j2: the rendered text would be 1,048,600 characters long" in error
    monkeypatch.setattr(sandbox, "MAX_TEMPLATE_BYTES", 100)
    write(project, "templates/large.j2", "x" * 200)
    (error,) = errors_for(project, "file: {path: /etc/x, template: large.j2}")
    assert "larger than the limit of 100 bytes for a template" in error


def test_a_fifo_template_does_not_block(project: Path) -> None:
    (project / "templates").mkdir()
    os.mkfifo(project / "templates" / "pipe.j2")
    started = time.monotonic()
    (error,) = errors_for(project, "file: {path: /etc/x, template: pipe.j2}")
    assert time.monotonic() - started < 5
    assert "not found" in error  # only regular files are templates


def test_inventory_variables_cannot_include_files(project: Path) -> None:
    write(project, "hosts.yml", "all:\n  hosts:\n    gpu01:\n      leak: \"{% include '/etc/passwd' %}\"\n")
    pb = write(project, "pb/site.yml",
               "- hosts: all\n  resources:\n    - file: {path: /etc/x, content: '{{ leak }}'}\n")
    errors = [str(e) for e in validate(project / "hosts.yml", pb)]
    assert any("hosts.yml:4: all.hosts.gpu01.leak: template syntax error" in e and "cannot include" in e
               for e in errors), errors
    assert not any("root:" in e for e in errors)


def test_syntax_errors_in_files_still_point_into_the_file(project: Path) -> None:
    write(project, "templates/bad.j2", "A=1\n{% if x %}\n")
    (error,) = errors_for(project, "file: {path: /etc/x, template: bad.j2}")
    assert error.startswith(f"{project / 'templates/bad.j2'}:2: template syntax error")


def test_render_error_is_a_config_error() -> None:
    assert issubclass(sandbox.TemplateLimitError, Exception)
    with pytest.raises(ConfigError):
        render("{{ 'a' * 3000000000 }}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{ " + "[" * 3000 + "]" * 3000 + " }}", "nested too deeply to parse"),
        ("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "nested too deeply to parse"),
        ("{% if 1 %}" * 500 + "{% endif %}" * 500, "nested too deeply to parse"),
        ("{{ 1" + " + 1" * 5000 + " }}", "nested too deeply to compile"),
        ("{{ x" + "|string" * 3000 + " }}", "nested too deeply to compile"),
    ],
)
def test_deeply_nested_templates_are_syntax_errors_not_recursion_errors(
    text: str, message: str, project: Path
) -> None:
    assert check_template_text(text) == message
    assert message in refused(text, x="1").detail
    write(project, "templates/deep.j2", text)
    (error,) = errors_for(project, "file: {path: /etc/x, template: deep.j2}")
    assert f"templates/deep.j2:1: template syntax error: {message}" in error


def test_structures_built_deep_at_render_time_are_a_clean_error() -> None:
    text = "{% set ns = namespace(l=1) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}"
    assert "recursion too deep" in refused(text).detail
