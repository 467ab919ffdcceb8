#!/bin/sh
# sshd.sh start|stop|status — run a throwaway OpenSSH server on loopback for
# the ssh sandbox tests and benchmarks.
#
# start: generates a host key, a client key and a known_hosts file in a temp
#        folder, makes sure the test user exists, starts /usr/sbin/sshd on
#        127.0.0.1 and writes an env file the tests read. Prints the env file path.
# stop:  kills the server by the pid in its pid file and removes the folder.
#
# Needs root (sshd must switch users). Settings, all optional:
#   HERMES_SSHD_DIR   folder for keys, config, pid and env files (/tmp/hermes-pipe-sshd)
#   HERMES_SSHD_PORT  port on 127.0.0.1 (22022)
#   HERMES_SSHD_USER  login user, created if missing (hpsandbox)
#   SSHD              server binary (/usr/sbin/sshd)
set -eu

dir=${HERMES_SSHD_DIR:-/tmp/hermes-pipe-sshd}
port=${HERMES_SSHD_PORT:-22022}
user=${HERMES_SSHD_USER:-hpsandbox}
sshd=${SSHD:-/usr/sbin/sshd}

die() { echo "sshd.sh: $*" >&2; exit 1; }

running() {
	[ -s "$dir/sshd.pid" ] && kill -0 "$(cat "$dir/sshd.pid")" 2>/dev/null
}

start() {
	[ -x "$sshd" ] || die "$sshd not found (install openssh-server)"
	[ "$(id -u)" = 0 ] || die "must run as root (sshd switches to the test user)"
	if running; then
		echo "$dir/env"
		return 0
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	chmod 755 "$dir"

	if ! id "$user" >/dev/null 2>&1; then
		useradd --create-home --shell /bin/sh "$user" ||
			die "cannot create user $user"
	fi
	# A "!" password field means locked, and sshd refuses locked accounts even
	# for public-key logins when PAM is off; "*" is unlocked with no password.
	usermod -p '*' "$user"

	ssh-keygen -q -t ed25519 -N '' -C hermes-sshd-host -f "$dir/host_ed25519_key"
	ssh-keygen -q -t ed25519 -N '' -C hermes-sshd-client -f "$dir/client_key"
	# sshd reads authorized keys as the user; the client key stays root-only.
	cp "$dir/client_key.pub" "$dir/authorized_keys"
	chmod 644 "$dir/authorized_keys"
	printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$dir/host_ed25519_key.pub")" \
		>"$dir/known_hosts"

	# Privilege separation needs this folder; Debian's package creates it at boot.
	mkdir -p /run/sshd
	chmod 755 /run/sshd

	cat >"$dir/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
StrictModes no
AllowUsers $user
PermitRootLogin no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxSessions 64
MaxStartups 64:30:128
LogLevel ERROR
Subsystem sftp internal-sftp
EOF

	"$sshd" -t -f "$dir/sshd_config" || die "sshd -t rejected $dir/sshd_config"

	# -D keeps sshd from forking so the pid file names this very process; -e
	# sends its log to the log file. setsid detaches it from the caller's
	# session and process group, so a test runner killed by its timeout does
	# not take it along; stop kills it by pid.
	setsid "$sshd" -D -e -f "$dir/sshd_config" </dev/null >"$dir/sshd.log" 2>&1 &
	i=0
	until running && port_open; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			cat "$dir/sshd.log" >&2 || true
			die "sshd did not start listening on 127.0.0.1:$port within 10s"
		fi
		sleep 0.1
	done

	cat >"$dir/env" <<EOF
HERMES_TEST_SSH_ADDR=127.0.0.1:$port
HERMES_TEST_SSH_USER=$user
HERMES_TEST_SSH_KEY=$dir/client_key
HERMES_TEST_SSH_KNOWN_HOSTS=$dir/known_hosts
EOF
	echo "$dir/env"
}

# port_open reports whether something accepts TCP connections on the port.
port_open() {
	if command -v ss >/dev/null 2>&1; then
		ss -ltn "sport = :$port" | grep -q LISTEN
	else
		grep -qi ":$(printf '%04X' "$port") 00000000:0000 0A" /proc/net/tcp
	fi
}

stop() {
	if [ -s "$dir/sshd.pid" ]; then
		pid=$(cat "$dir/sshd.pid")
		if kill "$pid" 2>/dev/null; then
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
				i=$((i + 1))
				sleep 0.1
			done
		fi
	fi
	rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status)
	if running; then echo "running: $dir/env"; else
		echo "stopped"
		exit 1
	fi
	;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
