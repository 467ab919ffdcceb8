package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrHostKeyUnknown means the server's host key is in none of the known_hosts
// files and Options.AcceptNewHostKeys is off. It is a configuration error, not
// sandbox.ErrUnavailable: retrying will not help.
var ErrHostKeyUnknown = errors.New("host key unknown")

// ErrHostKeyChanged means known_hosts lists a different key (or a revoked
// one) for the server. It is always refused.
var ErrHostKeyChanged = errors.New("host key changed")

// hostKeys checks server keys against known_hosts files and, when allowed,
// appends keys of unknown hosts to the first file. One is shared by all dials
// of a Driver; the files are re-read on every dial so appended keys count.
type hostKeys struct {
	files     []string
	acceptNew bool
	mu        sync.Mutex // serialises reads against appends
}

// callback loads the files and returns a HostKeyCallback for one dial along
// with the key algorithms known for addr (nil when none are), which the client
// must prefer so it does not negotiate a key type known_hosts lacks.
func (h *hostKeys) callback(addr string) (gossh.HostKeyCallback, []string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var existing []string
	for _, f := range h.files {
		if _, err := os.Stat(f); err == nil {
			existing = append(existing, f)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("known_hosts %s: %w", f, err)
		}
	}
	check, err := knownhosts.New(existing...)
	if err != nil {
		return nil, nil, fmt.Errorf("read known_hosts: %w", err)
	}
	algos := knownAlgorithms(check, addr)
	cb := func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		err := check(hostname, remote, key)
		var kerr *knownhosts.KeyError
		var rerr *knownhosts.RevokedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &rerr):
			return fmt.Errorf("%w: %s presents a revoked %s key (%s): refusing to connect",
				ErrHostKeyChanged, hostname, key.Type(), gossh.FingerprintSHA256(key))
		case errors.As(err, &kerr) && len(kerr.Want) > 0:
			w := kerr.Want[0]
			return fmt.Errorf("%w: %s presents %s key %s but %s:%d lists another one: "+
				"refusing to connect (possible man-in-the-middle; remove that line if the host was reinstalled)",
				ErrHostKeyChanged, hostname, key.Type(), gossh.FingerprintSHA256(key), w.Filename, w.Line)
		case errors.As(err, &kerr):
			if !h.acceptNew {
				return fmt.Errorf("%w: %s (%s key %s) is not in %s; add it "+
					"(ssh-keyscan) or allow accepting new host keys",
					ErrHostKeyUnknown, hostname, key.Type(), gossh.FingerprintSHA256(key),
					strings.Join(h.files, ", "))
			}
			return h.add(hostname, key)
		default:
			return fmt.Errorf("check host key of %s: %w", hostname, err)
		}
	}
	return cb, algos, nil
}

// add appends key for hostname to the first known_hosts file, creating it and
// its folder when missing.
func (h *hostKeys) add(hostname string, key gossh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.files[0]
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return fmt.Errorf("add host key to %s: %w", f, err)
	}
	fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("add host key to %s: %w", f, err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key) + "\n"
	if _, err := fh.WriteString(line); err != nil {
		fh.Close()
		return fmt.Errorf("add host key to %s: %w", f, err)
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return fmt.Errorf("add host key to %s: %w", f, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("add host key to %s: %w", f, err)
	}
	return nil
}

// probeKey is a key no known_hosts file lists; checking it reveals which keys
// the files hold for an address.
var probeKey = sync.OnceValue(func() gossh.PublicKey {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	return k
})

// knownAlgorithms returns the host key algorithms that known_hosts lists for
// addr, expanded to the signature algorithms the client may negotiate.
func knownAlgorithms(check gossh.HostKeyCallback, addr string) []string {
	probe := probeKey()
	if probe == nil {
		return nil
	}
	err := check(addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, probe)
	var kerr *knownhosts.KeyError
	if !errors.As(err, &kerr) {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range kerr.Want {
		algs := []string{k.Key.Type()}
		if k.Key.Type() == gossh.KeyAlgoRSA {
			algs = []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
		}
		for _, a := range algs {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}
