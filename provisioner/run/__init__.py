"""Reaching hosts: the one host runner (runner.py, over pool.py's threads and worker processes) and the
one host session per command (session.py), the only way the rest of fabnet gets an SSH connection."""
