# Sourced by two-hosts.sh and netns-hosts.sh: throwaway OpenSSH servers from the kit ($W/bin), each with its own
# /tmp, all with one host key and one login key in $W. `servers` collects their pids.
#   sshd_keys                          the sshd user, a root account sshd accepts, the two keys
#   sshd_start N ADDR PORT KNOWN ENV [PREFIX...]   write $W/sshdN.conf (SetEnv ENV), add the host key to
#                                      $W/known_hosts as KNOWN, start the server under PREFIX (a command that
#                                      execs the rest, such as `ip netns exec NS`); SSHD_SH runs first in its shell
#   sshd_inventory IFACE HOSTS...      $W/inventory.yml: group gpu, node1..nodeN, each HOSTS word its flow mapping's
#                                      body (`ansible_host: A, data_ip: A`), logging in as root with $W's keys

sshd_keys() {
  id sshd >/dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd 2>/dev/null ||
    echo 'sshd:x:64990:65534::/run/sshd:/usr/sbin/nologin' >> /etc/passwd
  mkdir -p /run/sshd; chmod 755 /run/sshd
  # Without PAM, sshd refuses an account whose password is locked ('!'), keys or not: this throwaway machine's
  # root gets '*' instead (no password login either way).
  grep -q '^root:!' /etc/shadow 2>/dev/null && usermod -p '*' root
  "$W/bin/ssh-keygen" -q -t ed25519 -N '' -C fabnet-bench -f "$W/host_key"
  "$W/bin/ssh-keygen" -q -t ed25519 -N '' -C fabnet-bench -f "$W/id"
  cp "$W/id.pub" "$W/authorized_keys"; : > "$W/known_hosts"
}

sshd_start() {
  local i=$1 addr=$2 port=$3 known=$4 setenv=$5; shift 5
  cat > "$W/sshd$i.conf" <<CONF
ListenAddress $addr:$port
HostKey $W/host_key
PidFile $W/sshd$i.pid
AuthorizedKeysFile $W/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
SetEnv $setenv
CONF
  echo "$known $(cut -d' ' -f1,2 "$W/host_key.pub")" >> "$W/known_hosts"
  "$@" unshare -m ${SSHD_UNSHARE:-} sh -c \
    "${SSHD_SH:-} mount -t tmpfs -o mode=1777 tmpfs /tmp && exec $W/bin/sshd -D -e -f $W/sshd$i.conf" \
    > "$W/sshd$i.log" 2>&1 &
  servers+=($!)  # each command execs the next: this is the server's own pid
}

sshd_inventory() {
  local iface=$1 i=0 line; shift
  { printf 'all:\n  children:\n    gpu:\n      hosts:\n'
    for line in "$@"; do i=$((i + 1)); printf '        node%s: {%s}\n' "$i" "$line"; done
    printf '      vars:\n        ansible_user: root\n        ansible_ssh_private_key_file: %s\n' "$W/id"
    printf '        fabnet_known_hosts: %s\n        fabnet_python: %s\n        data_iface: %s\n' \
      "$W/known_hosts" "$PY" "$iface"
  } > "$W/inventory.yml"
}
