"""CLI commands, one module each, registered in provisioner/cli.py."""
