"""Loading: inventories (Ansible's formats, --limit), playbooks (validated, file:line errors),
variables and templates. One path, `loading.py`, that every command uses."""
