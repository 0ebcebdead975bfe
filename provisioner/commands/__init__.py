"""CLI commands that live in their own modules, registered in provisioner/cli.py."""
