package llm

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// Redacted is what a secret is replaced with.
const Redacted = "***"

// minSecret is the shortest secret replaced wherever it occurs; a shorter
// one (a two-letter user name) would mangle every message, so it is
// replaced only in its combined forms (user:pass, its base64, //user@).
const minSecret = 4

// Redactor replaces the secrets of an endpoint (the API key, the user name
// and password of the base URL, header values) with Redacted in text that
// is about to be stored or printed: error messages, replies. Each secret is
// also found in the forms it travels in: URL-escaped, JSON-escaped, and the
// base64 of user:pass that basic authentication sends. A nil *Redactor, or
// one without secrets, returns its input unchanged. It is safe for
// concurrent use; String costs one pass over its input.
type Redactor struct {
	r *strings.Replacer
}

// NewRedactor returns the Redactor of an endpoint reached at baseURL with
// apiKey; extra names further secrets (an MCP server's header values).
// Empty secrets are ignored. It does no I/O.
func NewRedactor(apiKey, baseURL string, extra ...string) *Redactor {
	seen := map[string]bool{}
	var olds []string
	add := func(s string, always bool) {
		if s == "" || (!always && len(s) < minSecret) {
			return
		}
		forms := []string{s, url.QueryEscape(s), url.PathEscape(s)}
		if j, err := json.Marshal(s); err == nil {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		for _, f := range forms {
			if f != "" && f != Redacted && !seen[f] {
				seen[f] = true
				olds = append(olds, f)
			}
		}
	}
	add(apiKey, false)
	for _, s := range extra {
		add(s, false)
	}
	if u, err := url.Parse(baseURL); err == nil && u.User != nil {
		user := u.User.Username()
		pass, hasPass := u.User.Password()
		add(user, false)
		add(pass, false)
		add(u.User.String(), true)
		if user != "" {
			add("//"+user+"@", true)
			add("//"+user+":", true)
		}
		if hasPass {
			add(user+":"+pass, true)
			add(base64.StdEncoding.EncodeToString([]byte(user+":"+pass)), true)
		} else if user != "" {
			add(base64.StdEncoding.EncodeToString([]byte(user+":")), true)
		}
	}
	if len(olds) == 0 {
		return &Redactor{}
	}
	// The longest form first: strings.Replacer tries its pairs in order at
	// each position, so user:pass wins over user alone.
	sort.SliceStable(olds, func(i, j int) bool { return len(olds[i]) > len(olds[j]) })
	pairs := make([]string, 0, 2*len(olds))
	for _, o := range olds {
		pairs = append(pairs, o, replacement(o))
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// replacement keeps the "//" and the trailing ":" or "@" of the URL forms
// //user@ and //user: so the text still reads as a URL.
func replacement(old string) string {
	if strings.HasPrefix(old, "//") && (strings.HasSuffix(old, "@") || strings.HasSuffix(old, ":")) {
		return "//" + Redacted + old[len(old)-1:]
	}
	return Redacted
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Error returns err unchanged when its message holds no secret, else an
// error whose message is redacted and which still unwraps to err (so
// errors.Is and errors.As see the same chain). nil stays nil.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil || r.r == nil {
		return err
	}
	msg := err.Error()
	if red := r.r.Replace(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// redactedError is an error whose message had secrets replaced.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// RedactURL returns s with the userinfo of the URL it holds replaced
// (http://user:pass@host/v1 → http://***@host/v1), for recording a base URL
// in run.json or printing it; the rest of s stays byte for byte. s is
// returned unchanged when it has no userinfo. It parses nothing, so a URL
// too malformed for net/url is redacted as well.
func RedactURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return s
	}
	return s[:i+3] + Redacted + rest[at:]
}
