"""Whether a file's content is a secret, by its path or by what it holds. Pure functions.

A false positive costs an operator a diff (the hashes and line counts still say that, and how much,
the file differs); a false negative prints a secret into a CI log. So the lists lean wide.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

# The mode of a secret-bearing file whose playbook gives none (the `file` resource's default is 0644).
SECRET_MODE = "0600"

# Directories whose every file holds keys or credentials.
SECRET_DIRS = (
    "/etc/ssl/private/",
    "/etc/pki/tls/private/",
    "/etc/pki/private/",
    "/etc/NetworkManager/system-connections/",
    "/etc/wireguard/",
    "/etc/ipsec.d/private/",
    "/etc/letsencrypt/archive/",
    "/etc/letsencrypt/keys/",
    "/etc/wpa_supplicant/",
    "/etc/openvpn/",
    "/etc/kubernetes/pki/",
    "/var/lib/kubelet/pki/",
    "/etc/docker/certs.d/",
    "/etc/ceph/",
    "/etc/munge/",
    "/etc/slurm/jwt",
)

# Whole file names (compared case-insensitively).
SECRET_NAMES = frozenset({
    "shadow", "shadow-", "gshadow", "gshadow-", "opasswd", "passwd.bak", "master.passwd",
    ".pgpass", ".netrc", "_netrc", ".my.cnf", ".git-credentials", ".npmrc", ".pypirc", ".vault-token",
    ".htpasswd", "htpasswd", "credentials", "ipsec.secrets", "chap-secrets", "pap-secrets", "krb5.keytab",
    "authorized_keys2", "config.json", "kubeconfig", "admin.conf", "id_rsa", "id_dsa", "id_ecdsa",
    "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk", "identity", "privkey.pem", "munge.key", ".env",
    "secrets.yml", "secrets.yaml", "vault.yml", "vault.yaml", "rsyncd.secrets", "slurmdbd.conf",
})

# Suffixes of key stores and private keys; certificates (.crt) are public and not listed.
SECRET_SUFFIXES = (
    ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".keytab", ".psk", ".gpg", ".asc",
    ".secret", ".secrets", ".token", ".nmconnection", ".ovpn", ".age", ".der",
)

# Words in any part of the path. `key` also catches ssh_host_*_key and api_key; `.pub` files are
# excluded below because a public key is what they are meant to publish.
SECRET_WORDS = re.compile(r"key|secret|token|passw|credential|private|\bauth\b|cred", re.IGNORECASE)

# Lines that hold a secret value: a private-key block, an assignment to a secret-sounding name
# (`password=`, `psk=`, `PrivateKey = `, netplan's WireGuard `private: KEY`, `NCCL_..._TOKEN=`), a known
# token format, a URL with a password, or a crypt(3) hash as /etc/shadow holds them.
SECRET_CONTENT = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
    r"|(?i:(?<![a-z])(?:passw(?:or)?d|passphrase|pass(?![a-z])|pwd|secret|psk|token|api[_-]?key|access[_-]?key|"
    r"private|preshared[_-]?key|auth[_-]?key|credentials?|bearer)[\w.-]*[\"']?\s*[:=])"
    r"|(?i:\b(?:password|passwd)\s+\S)"  # .netrc: `machine h login u password p`
    r"|(?i:authorization:\s*(?:bearer|basic)\s)"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bglpat-[A-Za-z0-9_-]{20}"
    r"|\bsk-[A-Za-z0-9_-]{20,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."
    r"|[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@"
    r"|^[^:\s]+:\$(?:1|2[abxy]?|5|6|y|gy|7|sha1|md5)\$",
    re.MULTILINE,
)
def sensitive_path(path: str) -> bool:
    """Whether a file at `path` holds keys or credentials by where it is or what it is called."""
    pure = PurePosixPath(path)
    name = pure.name.lower()
    if any(path.startswith(prefix) for prefix in SECRET_DIRS):
        return True
    if name in SECRET_NAMES or name.endswith(SECRET_SUFFIXES):
        return True
    if name.endswith(".pub") or name in ("known_hosts", "ssh_known_hosts"):
        return False
    return bool(SECRET_WORDS.search(path))


def sensitive_content(data: bytes) -> bool:
    """Whether `data` looks like it holds a secret value (read leniently: binary data is searched too)."""
    return bool(SECRET_CONTENT.search(data.decode("utf-8", errors="replace")))


def fingerprint(data: bytes) -> str:
    """What a report may show of any content: a sha256 prefix and the size."""
    return f"sha256:{hashlib.sha256(data).hexdigest()[:12]} ({len(data)} bytes)"


def line_count(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
