"""Allow `python -m provisioner` as an alias of the `fabnet` command."""

from provisioner.cli import main

main()
