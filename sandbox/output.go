package sandbox

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultMaxOutput is the number of bytes kept per stream when neither the
// Spec nor the driver Config sets a limit.
const DefaultMaxOutput = 50_000

// Capture is an io.Writer that keeps the first and last halves of at most max
// bytes of a stream and counts the rest, so a command printing gigabytes costs
// O(max) memory. Drivers write a command's stdout and stderr into one Capture
// each and call Text when the command ends. It is not safe for concurrent
// writers.
type Capture struct {
	max   int
	head  []byte
	tail  []byte // holds up to 2*half bytes; the last half are the newest
	total int64
}

// NewCapture returns a Capture keeping at most max bytes (DefaultMaxOutput
// when max <= 0).
func NewCapture(max int) *Capture {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	return &Capture{max: max}
}

// Write keeps p's bytes that fit the head and the newest bytes for the tail.
// It never fails.
func (c *Capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	headMax := c.max - c.max/2
	if len(c.head) < headMax {
		k := min(headMax-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	tailMax := c.max / 2
	if tailMax == 0 {
		return n, nil
	}
	if len(p) >= tailMax {
		c.tail = append(c.tail[:0], p[len(p)-tailMax:]...)
		return n, nil
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*tailMax {
		keep := c.tail[len(c.tail)-tailMax:]
		c.tail = append(c.tail[:0], keep...)
	}
	return n, nil
}

// Total returns how many bytes were written in all.
func (c *Capture) Total() int64 { return c.total }

// Text returns the kept output as valid UTF-8 and whether bytes were cut.
// When the stream exceeded max bytes, the head and tail are joined by a marker
// naming how many bytes were left out; cuts fall on rune boundaries. Invalid
// UTF-8 (binary output) is replaced by U+FFFD, so the text may be up to three
// times max bytes long for pure binary streams.
func (c *Capture) Text() (string, bool) {
	if c.total <= int64(len(c.head)) {
		return ValidUTF8(c.head), false
	}
	tailMax := c.max / 2
	tail := c.tail
	if len(tail) > tailMax {
		tail = tail[len(tail)-tailMax:]
	}
	if int64(len(c.head)+len(tail)) == c.total {
		return ValidUTF8(append(append([]byte(nil), c.head...), tail...)), false
	}
	head := trimPartialRuneEnd(c.head)
	tail = trimPartialRuneStart(tail)
	omitted := c.total - int64(len(head)) - int64(len(tail))
	var b strings.Builder
	b.Grow(len(head) + len(tail) + 64)
	b.WriteString(ValidUTF8(head))
	fmt.Fprintf(&b, TruncationMarker, omitted)
	b.WriteString(ValidUTF8(tail))
	return b.String(), true
}

// TruncationMarker is the format of the text put between the head and the
// tail of cut output; its argument is the number of bytes left out.
const TruncationMarker = "\n\n... [output truncated: %d bytes omitted] ...\n\n"

// Cut applies the head-and-tail cut of Capture to a string already in memory.
// It is a convenience for drivers and fakes that do not stream.
func Cut(s string, max int) (string, bool) {
	c := NewCapture(max)
	_, _ = c.Write([]byte(s))
	return c.Text()
}

// ValidUTF8 returns b as a string with every invalid byte sequence replaced by
// U+FFFD. It copies only when b is valid.
func ValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// trimPartialRuneEnd drops an incomplete multi-byte rune at the end of b.
func trimPartialRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b // ASCII: complete
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimPartialRuneStart drops continuation bytes at the start of b left by a
// cut inside a multi-byte rune.
func trimPartialRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
