package sandbox

import "testing"

func TestRefreshSafe(t *testing.T) {
	safe := []string{
		"ls -la", "cd /tmp && python3 x.py", "export A=1; f() { echo $A; }; f", "find . -name '*.go' | head",
		"cd .. && ls", "alias ll='ls -l'", "git config --global user.name x", "pip install setuptools",
		"echo reset; python3 -c 'x.set()'", "unset A", "cat settings.py", "command -v python3",
	}
	unsafe := []string{
		"trap 'echo x' DEBUG", "source venv/bin/activate", ". venv/bin/activate", "cd x && . ./env.sh",
		"if true; then . ./env.sh; fi", "eval \"$(ssh-agent)\"", "exec 3>/tmp/x", "readonly A=1", "declare -r A=1",
		"set -e", "shopt -s extglob", "ulimit -n 64", "umask 077", "enable -n echo", "builtin cd /",
		"POSIXLY_CORRECT=1", "BASH_ENV=/x bash", "f() { local -r x=1; }", "renice -n 5 $$", "x=$( . ./y )",
	}
	for _, c := range safe {
		if !RefreshSafe(c) {
			t.Errorf("RefreshSafe(%q) = false, want true", c)
		}
	}
	for _, c := range unsafe {
		if RefreshSafe(c) {
			t.Errorf("RefreshSafe(%q) = true, want false", c)
		}
	}
}
