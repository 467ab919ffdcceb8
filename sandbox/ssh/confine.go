package ssh

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// optOut names the flag that runs remote commands unconfined, for errors.
const optOut = "--ssh-isolation none"

// remoteHost is what confinement needs to know of the remote host, learnt
// once per Driver by probeHost.
type remoteHost struct {
	bwrap  string          // bubblewrap's path there
	shell  string          // bash's path there, "" when it has none (then /bin/sh)
	path   string          // the login's PATH, given to confined commands
	lang   string          // the login's LANG, "" when unset
	layout *confine.Layout // which system folders exist there, which secrets to mask
	arch   string          // `uname -m` there: the seccomp filter's must match
}

// remote returns what the driver knows of the remote host for confinement,
// probing it on first use (two channels). A host that cannot confine
// commands gives an error naming the host, the reason and the opt-out; it is
// remembered, so later Opens fail at once. Transport failures are not
// remembered.
func (d *Driver) remote(ctx context.Context) (*remoteHost, error) {
	d.hmu.Lock()
	defer d.hmu.Unlock()
	if d.host != nil || d.hostErr != nil {
		return d.host, d.hostErr
	}
	h, reason, err := d.probeHost(ctx)
	if err != nil {
		return nil, fmt.Errorf("ssh sandbox on %s: probe for bubblewrap: %w", d.opts.Addr, err)
	}
	if reason != "" {
		d.hostErr = fmt.Errorf("ssh sandbox on %s: cannot confine commands: %s (%s runs them unconfined, as %s with everything it may reach)",
			d.opts.Addr, reason, optOut, d.opts.User)
		return nil, d.hostErr
	}
	d.host = h
	return h, nil
}

// probeHost reads the remote host's layout and bubblewrap, then runs one
// command under a policy built from them. reason is why the host cannot
// confine commands ("" when it can); err is a transport failure.
func (d *Driver) probeHost(ctx context.Context) (h *remoteHost, reason string, err error) {
	out, err := d.run(ctx, probeScript(d.bwrapName), nil)
	if err != nil {
		return nil, "", err
	}
	h = &remoteHost{layout: &confine.Layout{Dirs: map[string]bool{}, Links: map[string]string{}}}
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "path":
			h.path = v
		case "lang":
			h.lang = v
		case "bwrap":
			h.bwrap = v
		case "bash":
			h.shell = v
		case "arch":
			h.arch = v
		case "dir":
			h.layout.Dirs[v] = true
		case "link":
			if p, t, ok := strings.Cut(v, "\t"); ok {
				h.layout.Links[p] = t
			}
		case "mdir", "mfile":
			h.layout.Masked = append(h.layout.Masked, confine.MaskedPath{Path: v, Dir: k == "mdir"})
		}
	}
	if h.path == "" {
		h.path = "/usr/local/bin:/usr/bin:/bin"
	}
	if want := confine.SeccompArch(); h.arch != want {
		return nil, fmt.Sprintf("the host's architecture is %q and the seccomp filter is built for %s (where hermes-pipe runs)", h.arch, want), nil
	}
	if !path.IsAbs(h.bwrap) {
		return nil, fmt.Sprintf("bubblewrap (bwrap) is not on the remote PATH %s: install the bubblewrap package there", h.path), nil
	}
	if !path.IsAbs(h.shell) {
		h.shell = ""
		if d.opts.Limits != (confine.Limits{}) {
			return nil, "the resource limits are set by bash, and bash is not on the remote PATH " + h.path, nil
		}
	}
	// One command under the real policy, in a throwaway folder.
	dir := path.Join(d.opts.RemoteTmp, folderPrefix+"probe-"+randomHex(8))
	sh := h.sh()
	bw, err := confine.Policy{SessionDir: dir, TmpDir: dir + "/tmp", Network: d.opts.Network,
		Env: []string{"PATH=" + h.path}, Layout: h.layout, SeccompFile: seccompPath(dir)}.Args(h.bwrap, []string{sh, "-c",
		`while read -r k v; do [ "$k" = Seccomp: ] && echo "seccomp $v"; done </proc/self/status; echo ok`})
	if err != nil {
		return nil, err.Error(), nil
	}
	filter, err := seccompScript(dir)
	if err != nil {
		return nil, err.Error(), nil
	}
	q := sandbox.ShellQuote
	test := "umask 077\nmkdir -p " + q(d.opts.RemoteTmp) + " && mkdir " + q(dir) + " " + q(dir+"/tmp") + " || exit 1\n" + filter +
		"out=$(" + shellWords(bw.Args) + " 2>&1 </dev/null); rc=$?\n" + removeDir(q(dir)) + "\n" +
		`printf '%s\n' "$out"; [ $rc = 0 ] || echo "(exit $rc)"`
	out, err = d.run(ctx, test, nil)
	if err != nil {
		return nil, "", err
	}
	if got := strings.TrimSpace(out); got != "seccomp 2\nok" {
		if strings.HasSuffix(got, "ok") {
			return nil, fmt.Sprintf("%s ran a command there but not under the seccomp filter: %s", h.bwrap, got), nil
		}
		return nil, fmt.Sprintf("%s cannot run a command in fresh namespaces there: %s", h.bwrap, got), nil
	}
	return h, "", nil
}

// seccompPath is where a confined session's seccomp filter lies on the
// remote host: in its folder, which bwrap mounts read-only over itself
// (confine.Policy.SeccompFile), so commands cannot change it for the
// session's later sandboxes.
func seccompPath(dir string) string { return dir + "/seccomp.bpf" }

// seccompScript is shell code writing the seccomp filter (confine.Seccomp)
// to seccompPath(dir) on the remote host, byte for byte through printf's
// octal escapes, read-only.
func seccompScript(dir string) (string, error) {
	esc, err := seccompEscaped()
	if err != nil {
		return "", err
	}
	f := sandbox.ShellQuote(seccompPath(dir))
	return "printf '" + esc + "' >" + f + " && chmod 0400 " + f + " || exit 1\n", nil
}

// seccompEscaped is the filter as printf's octal escapes, worked out once
// per process (the filter is; each session only names its own file).
var seccompEscaped = sync.OnceValues(func() (string, error) {
	b, err := confine.Seccomp()
	if err != nil {
		return "", err
	}
	var esc strings.Builder
	for _, c := range b {
		fmt.Fprintf(&esc, "\\%03o", c)
	}
	return esc.String(), nil
})

// sh is the confined shell: bash when the host has it, else /bin/sh.
func (h *remoteHost) sh() string {
	if h.shell != "" {
		return h.shell
	}
	return "/bin/sh"
}

// probeScript prints (bwrap is the name looked up for bubblewrap), one key=value a line, the login's PATH and LANG,
// where bwrap and bash are, which of confine.HostDirs are folders or links
// and which of confine.MaskedPaths exist (links among them left out, as
// confine does locally).
func probeScript(bwrap string) string {
	var b strings.Builder
	b.WriteString(`echo "path=$PATH"
echo "lang=${LANG-}"
echo "bwrap=$(command -v ` + sandbox.ShellQuote(bwrap) + ` 2>/dev/null)"
echo "bash=$(command -v bash 2>/dev/null)"
echo "arch=$(uname -m 2>/dev/null)"
`)
	for _, d := range confine.HostDirs {
		fmt.Fprintf(&b, "if [ -L %[1]s ]; then printf 'link=%%s\\t%%s\\n' %[1]s \"$(readlink %[1]s)\"; elif [ -d %[1]s ]; then printf 'dir=%%s\\n' %[1]s; fi\n",
			sandbox.ShellQuote(d))
	}
	b.WriteString("for q in")
	for _, p := range confine.MaskedPaths {
		b.WriteString(" " + globWord(p))
	}
	b.WriteString(`; do if [ -L "$q" ]; then :; elif [ -d "$q" ]; then printf 'mdir=%s\n' "$q"; elif [ -e "$q" ]; then printf 'mfile=%s\n' "$q"; fi; done
`)
	return b.String()
}

// globWord quotes p for the shell except its * and ? wildcards, so the
// shell expands them.
func globWord(p string) string {
	var b strings.Builder
	lit := ""
	flush := func() {
		if lit != "" {
			b.WriteString(sandbox.ShellQuote(lit))
			lit = ""
		}
	}
	for _, r := range p {
		if r == '*' || r == '?' {
			flush()
			b.WriteRune(r)
			continue
		}
		lit += string(r)
	}
	flush()
	return b.String()
}

// shellWords quotes each word of argv for a POSIX shell command line.
func shellWords(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = sandbox.ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// box is a confined session's bubblewrap command line up to and including
// "--", as quoted shell words, with a clean environment for bwrap itself
// (env -i: nothing of the login's environment reaches the sandbox's
// init, whose /proc/1/environ commands can read) but the session marker,
// so gc and tests find it by /proc/<pid>/environ.
func boxPrefix(h *remoteHost, p confine.Policy, marker string) (string, error) {
	p.SeccompFile = seccompPath(p.SessionDir)
	bw, err := p.Args(h.bwrap, []string{"X"})
	if err != nil {
		return "", err
	}
	argv := bw.Args[:len(bw.Args)-1]
	return "env -i " + sandbox.ShellQuote(sandbox.MarkerVar+"="+marker) + " " + shellWords(argv), nil
}
