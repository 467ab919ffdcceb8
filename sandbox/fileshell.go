package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
)

// The drivers that reach their files only through a process in the sandbox
// (docker exec, an SSH channel) implement Files with the POSIX sh scripts
// below. The scripts are plain ASCII, whatever the path's bytes, and file
// contents travel raw on the process's stdin and stdout: nothing is encoded
// and nothing goes through a command line. They need stat -c, head -c,
// dd, mktemp, readlink -f and mv, which GNU coreutils and busybox both have.
//
// Each script first enters the session's current folder, read from the
// state file that StateScript keeps, so relative paths resolve as they do
// for the next command. A script that fails exits non-zero with the tool's
// message on stderr; FileError turns that into an error value.

// FileStatScript returns the script that prints "SIZE HEXMODE\n" for path,
// following symbolic links (HEXMODE is st_mode in hex, as stat -c %f prints
// it). cwdFile is the state file naming the session's current folder ("" or a
// missing file: stay in the folder the process starts in).
func FileStatScript(cwdFile, path string) string {
	var b strings.Builder
	fileScriptHead(&b, cwdFile, path)
	b.WriteString("s=$(stat -L -c '%s %f' \"$p\") || exit 1\nprintf '%s\\n' \"$s\"\n")
	return b.String()
}

// FileReadScript returns the script that prints the stat line of
// FileStatScript and then, when path is a regular file, up to n bytes of it
// starting at off. dd seeks to off (lseek, not read) and head stops after n
// bytes, so only the range leaves the file.
func FileReadScript(cwdFile, path string, off int64, n int) string {
	var b strings.Builder
	fileScriptHead(&b, cwdFile, path)
	fmt.Fprintf(&b, `s=$(stat -L -c '%%s %%f' "$p") || exit 1
printf '%%s\n' "$s"
[ -f "$p" ] || exit 0
[ %[1]d -lt "${s%%%% *}" ] && [ %[2]d -gt 0 ] || exit 0
exec <"$p" || exit 1
if [ %[1]d -gt 0 ]; then dd bs=1 skip=%[1]d count=0 2>/dev/null || exit 1; fi
exec head -c %[2]d
`, off, n)
	return b.String()
}

// FileWriteScript returns the script that writes its stdin to path: it
// creates the parent folders, writes a temporary file beside path, gives it
// the existing file's permission bits (or perm less the umask for a new
// file) and renames it over path. A symbolic link is followed, so its target
// is replaced. The temporary file is removed on any failure.
func FileWriteScript(cwdFile, path string, perm fs.FileMode) string {
	var b strings.Builder
	fileScriptHead(&b, cwdFile, path)
	fmt.Fprintf(&b, `if [ -L "$p" ]; then q=$(readlink -f "$p") && p=$q; fi
if [ -d "$p" ]; then printf '%%s: Is a directory\n' "$p" >&2; exit 1; fi
d=${p%%/*}; [ -n "$d" ] || d=/
[ -d "$d" ] || mkdir -p "$d" || exit 1
if [ -e "$p" ]; then m=$(stat -L -c %%a "$p") || exit 1; else m=$(printf '%%o' $(( 0%[1]o & ~0$(umask) ))); fi
t=$(mktemp "$d/.hermes-write.XXXXXX") || exit 1
trap 'rm -f "$t"' EXIT
cat >"$t" || exit 1
chmod "$m" "$t" || exit 1
mv -f "$t" "$p" || exit 1
trap - EXIT
`, perm.Perm())
	return b.String()
}

// fileScriptHead writes the common start: C locale (so messages are the
// ones FileError knows), enter the current folder, and set p to the path. A
// relative path gets a "./" prefix so that no tool reads it as an option.
func fileScriptHead(b *strings.Builder, cwdFile, path string) {
	b.WriteString("LC_ALL=C; export LC_ALL\n")
	if cwdFile != "" {
		b.WriteString("if [ -r " + ShellQuote(cwdFile) + " ]; then IFS= read -r __d <" + ShellQuote(cwdFile) + ` && cd "$__d" 2>/dev/null; fi` + "\n")
	}
	if !strings.HasPrefix(path, "/") {
		path = "./" + path
	}
	b.WriteString(assignBytes("p", path))
}

// assignBytes returns shell code setting variable name to s byte for byte.
// Printable ASCII is quoted as it is; any other byte (invalid UTF-8
// included) becomes a printf %b octal escape, so the script stays ASCII:
// docker's API carries the command as JSON, which cannot hold invalid UTF-8.
// A trailing x, cut off afterwards, keeps $(...) from eating newlines.
func assignBytes(name, s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return name + "=" + ShellQuote(s) + "\n"
	}
	var b strings.Builder
	b.WriteString(name + `=$(printf '%b' '`)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\'' && c != '\\' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, `\0%03o`, c)
	}
	b.WriteString("x'); " + name + "=${" + name + "%x}\n")
	return b.String()
}

// ParseFileStat parses the "SIZE HEXMODE" line the scripts print.
func ParseFileStat(line string) (FileInfo, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return FileInfo{}, fmt.Errorf("unexpected stat output %q", line)
	}
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	raw, err2 := strconv.ParseUint(f[1], 16, 32)
	if err1 != nil || err2 != nil {
		return FileInfo{}, fmt.Errorf("unexpected stat output %q", line)
	}
	return FileInfo{Size: size, Mode: unixMode(uint32(raw))}, nil
}

// unixMode converts st_mode to an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// FileError turns the failure of a file script (its exit code and stderr)
// into a *fs.PathError for op ("stat", "read", "write") and path, matching
// fs.ErrNotExist, fs.ErrPermission or ErrIsDir when the message says so.
func FileError(op, path string, exit int, stderr string) error {
	msg := strings.TrimSpace(stderr)
	low := strings.ToLower(msg)
	var err error
	switch {
	case strings.Contains(low, "no such file"):
		err = fs.ErrNotExist
	case strings.Contains(low, "permission denied"):
		err = fs.ErrPermission
	case strings.Contains(low, "is a directory"):
		err = ErrIsDir
	case msg == "":
		err = fmt.Errorf("exit code %d", exit)
	default:
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		err = errors.New(msg)
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// ReadOutput collects a read script's stdout: the stat line, then at most
// max data bytes. Drivers give it as the script's stdout and call Result
// when the script ended.
type ReadOutput struct {
	max  int
	head []byte
	done bool // the stat line is complete
	data bytes.Buffer
	over bool
}

// NewReadOutput returns a ReadOutput expecting at most max data bytes.
func NewReadOutput(max int) *ReadOutput { return &ReadOutput{max: max} }

// Write implements io.Writer; it never fails, and drops bytes beyond max
// (which a correct script never sends).
func (r *ReadOutput) Write(p []byte) (int, error) {
	n := len(p)
	if !r.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.head)+len(p) > 256 {
				r.over = true
				return n, nil
			}
			r.head = append(r.head, p...)
			return n, nil
		}
		r.head = append(r.head, p[:i]...)
		r.done = true
		p = p[i+1:]
		if r.data.Cap() == 0 {
			r.data.Grow(min(r.max, 1<<20))
		}
	}
	if room := r.max - r.data.Len(); len(p) > room {
		p = p[:max(room, 0)]
		r.over = true
	}
	r.data.Write(p)
	return n, nil
}

// Reset forgets everything written, for a retry.
func (r *ReadOutput) Reset() {
	r.head, r.done, r.over = r.head[:0], false, false
	r.data.Reset()
}

// Result returns the file's description and the data read. It fails when
// the output did not start with a stat line.
func (r *ReadOutput) Result() (FileInfo, []byte, error) {
	if !r.done {
		return FileInfo{}, nil, fmt.Errorf("unexpected read output %q", r.head)
	}
	fi, err := ParseFileStat(string(r.head))
	if err != nil {
		return FileInfo{}, nil, err
	}
	if r.over {
		return FileInfo{}, nil, errors.New("read script sent more bytes than asked for")
	}
	return fi, r.data.Bytes(), nil
}

// CheckRead applies the rules every driver shares to a read of path at off:
// a folder or special file is an error, and a regular file must have
// delivered all the bytes it holds in the range (fewer means it shrank or
// the transfer broke).
func CheckRead(path string, fi FileInfo, off int64, n int, got int) error {
	switch {
	case fi.IsDir():
		return &fs.PathError{Op: "read", Path: path, Err: ErrIsDir}
	case !fi.IsRegular():
		return &fs.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	want := int64(0)
	if off < fi.Size && n > 0 {
		want = min(int64(n), fi.Size-off)
	}
	if int64(got) != want {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("got %d bytes of %d (the file changed while read)", got, want)}
	}
	return nil
}

var _ io.Writer = (*ReadOutput)(nil)

// ScriptRunner runs one file script with /bin/sh inside a session (op names
// the operation for errors), feeding stdin when it is not nil and copying
// its standard output to stdout, and returns the script's exit code and
// standard error. Its error means the driver failed (wrapping ErrUnavailable
// or ErrClosed), never that the script did.
type ScriptRunner func(ctx context.Context, op, script string, stdin []byte, stdout io.Writer) (code int, stderr string, err error)

// ScriptFiles implements Files for drivers that reach a session's files
// through its shell (docker, ssh): each operation is one short script run by
// Run (FileReadScript, FileStatScript, FileWriteScript), with the bytes raw
// on its stdin or stdout, never on a command line. CwdFile is where the
// session's state script keeps the shell's current folder, against which
// relative paths resolve.
type ScriptFiles struct {
	Run     ScriptRunner
	CwdFile string
}

// ReadRange implements Files: dd seeks and head stops after the range, so
// only the range crosses the driver's transport. It costs one script run.
func (f ScriptFiles) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	if off < 0 || n < 0 {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: errors.New("negative offset or length")}
	}
	out := NewReadOutput(n)
	code, stderr, err := f.Run(ctx, "read", FileReadScript(f.CwdFile, path, off, n), nil, out)
	if err != nil {
		return nil, 0, err
	}
	if code != 0 {
		return nil, 0, FileError("read", path, code, stderr)
	}
	fi, data, err := out.Result()
	if err != nil {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if err := CheckRead(path, fi, off, n, len(data)); err != nil {
		return nil, 0, err
	}
	return data, fi.Size, nil
}

// Stat implements Files with one run of stat.
func (f ScriptFiles) Stat(ctx context.Context, path string) (FileInfo, error) {
	var out bytes.Buffer
	code, stderr, err := f.Run(ctx, "stat", FileStatScript(f.CwdFile, path), nil, &out)
	if err != nil {
		return FileInfo{}, err
	}
	if code != 0 {
		return FileInfo{}, FileError("stat", path, code, stderr)
	}
	fi, err := ParseFileStat(strings.TrimSpace(out.String()))
	if err != nil {
		return FileInfo{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fi, nil
}

// WriteFile implements Files with one run of FileWriteScript, the content
// streamed raw on the script's stdin (a temporary file beside the target,
// renamed over it). The script runs as the session's user, so the file
// belongs to the user the commands run as.
func (f ScriptFiles) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	if data == nil {
		data = []byte{}
	}
	code, stderr, err := f.Run(ctx, "write", FileWriteScript(f.CwdFile, path, perm), data, io.Discard)
	if err != nil {
		return err
	}
	if code != 0 {
		return FileError("write", path, code, stderr)
	}
	return nil
}
