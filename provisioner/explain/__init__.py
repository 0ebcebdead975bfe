"""From the logs of a failed or slow job to its likely causes in fabric terms, each with its evidence lines.

Pure: `explain(logs)` takes (name, text) pairs and returns an Explanation; reading files, auditing the
hosts it names and printing belong to the command.
"""

from provisioner.explain.model import Cause, Evidence, Explanation, NetworkUse
from provisioner.explain.rules import explain

__all__ = ["Cause", "Evidence", "Explanation", "NetworkUse", "explain"]
