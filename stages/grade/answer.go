package grade

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// compare runs one of the answer graders on the model's final message.
//
//   - exact: the extracted answer (FinalAnswer) equals the row's answer, both
//     trimmed, inner white space collapsed, a final period dropped.
//   - contains: the final message (without <think> blocks) contains the
//     row's answer, ignoring case and runs of white space.
//   - regex: the row's answer, an RE2 expression, matches somewhere in the
//     final message (without <think> blocks); an invalid one is no verdict.
//   - number: the number of the extracted answer (ParseNumber) equals the
//     number of the row's answer within tol (relative past 1, absolute
//     below); a row answer that is not a number is no verdict, a final
//     answer without one a fail.
//
// The grade's output says what was extracted.
func compare(kind, final, answer string, tol float64) verdict {
	msg := stripThink(final)
	switch kind {
	case Exact:
		got := FinalAnswer(msg)
		return passFail(normalise(got) == normalise(answer), "extracted: "+got)
	case Contains:
		ok := strings.Contains(strings.ToLower(collapse(msg)), strings.ToLower(collapse(answer)))
		return passFail(ok, "")
	case Regex:
		re, err := regexp.Compile(answer)
		if err != nil {
			return verdict{err: fmt.Sprintf("regex: the row's answer is not a regular expression: %v", err)}
		}
		m := re.FindString(msg)
		return passFail(re.MatchString(msg), "matched: "+m)
	case Number:
		want, ok := ParseNumber(answer)
		if !ok {
			return verdict{err: fmt.Sprintf("number: the row's answer %q holds no number", answer)}
		}
		got := FinalAnswer(msg)
		n, ok := ParseNumber(got)
		if !ok {
			return passFail(false, "extracted: "+got+" (no number)")
		}
		pass := math.Abs(n-want) <= tol*math.Max(1, math.Abs(want))
		return passFail(pass, "extracted: "+got+" = "+strconv.FormatFloat(n, 'g', -1, 64))
	}
	return verdict{err: "unknown answer grader " + kind}
}

var (
	thinkBlock = regexp.MustCompile(`(?s)<think>.*?</think>`)
	// answerLine is a line that announces the answer: "Answer: 42",
	// "Final answer: 42", "**Final Answer:** 42", GSM8K's "#### 42".
	answerLine = regexp.MustCompile(`(?im)^[ \t>*_#]*(?:final[ \t]+answer|answer)[ \t*_]*[:：][ \t*_]*(.*?)[ \t*_]*$|^[ \t]*####[ \t]*(.*?)[ \t]*$`)
	space      = regexp.MustCompile(`\s+`)
)

// stripThink removes <think>…</think> blocks (and an unclosed <think> tail).
func stripThink(s string) string {
	s = thinkBlock.ReplaceAllString(s, "")
	if i := strings.Index(s, "<think>"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// FinalAnswer extracts the answer from a final message, in this order: the
// content of the last \boxed{…} (or \fbox{…}); else the text after the last
// line starting "Answer:" or "Final answer:" (any case, Markdown emphasis
// allowed) or "####"; else the whole message. The result is trimmed.
func FinalAnswer(msg string) string {
	msg = stripThink(msg)
	if b, ok := lastBoxed(msg); ok {
		return strings.TrimSpace(b)
	}
	if ms := answerLine.FindAllStringSubmatch(msg, -1); len(ms) > 0 {
		m := ms[len(ms)-1]
		return strings.TrimSpace(m[1] + m[2])
	}
	return strings.TrimSpace(msg)
}

// lastBoxed returns the content of the last \boxed{…} or \fbox{…} in s,
// braces balanced.
func lastBoxed(s string) (string, bool) {
	i := max(strings.LastIndex(s, `\boxed{`), strings.LastIndex(s, `\fbox{`))
	if i < 0 {
		return "", false
	}
	j := i + strings.IndexByte(s[i:], '{') + 1
	depth := 1
	for k := j; k < len(s); k++ {
		switch s[k] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return s[j:k], true
			}
		}
	}
	return "", false
}

var (
	// fracTeX is \frac{a}{b} (or \dfrac, \tfrac) with plain numbers.
	fracTeX = regexp.MustCompile(`\\[dt]?frac\{\s*([-+]?[\d.,]+)\s*\}\{\s*([-+]?[\d.,]+)\s*\}`)
	// numberRe is one number: sign, digits with optional thousands commas,
	// decimals, exponent, and an optional "/ denominator".
	numberRe = regexp.MustCompile(`[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?|[-+−]?\.\d+`)
)

// ParseNumber reads the number a short answer states: the last number in s
// once dollar signs, LaTeX spacing (\, \! \;) and "\%" are dropped. It reads
// "42", "42.0", "-3", "$1,234" (1234), "1.5e3", "50%" (50), "3/4" and
// \frac{3}{4} (0.75); of "x = 2, y = 7" it reads 7. ok is false when s holds
// no number.
func ParseNumber(s string) (float64, bool) {
	s = strings.NewReplacer(`$`, "", `\,`, "", `\!`, "", `\;`, "", `\%`, "%", `{,}`, ",").Replace(s)
	if ms := fracTeX.FindAllStringSubmatch(s, -1); len(ms) > 0 {
		m := ms[len(ms)-1]
		if v, ok := ratio(m[1], m[2]); ok {
			return v, true
		}
	}
	ms := numberRe.FindAllString(s, -1)
	if len(ms) == 0 {
		return 0, false
	}
	t := strings.ReplaceAll(ms[len(ms)-1], "−", "-")
	if num, den, ok := strings.Cut(t, "/"); ok {
		return ratio(num, den)
	}
	return plain(t)
}

func ratio(num, den string) (float64, bool) {
	a, ok1 := plain(num)
	b, ok2 := plain(den)
	if !ok1 || !ok2 || b == 0 {
		return 0, false
	}
	return a / b, true
}

func plain(t string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(t), ",", ""), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// isNumber says whether an expected answer is a number alone ("42",
// "-0.5", "$1,234", "3/4", "\frac{3}{4}"), for the default grader.
func isNumber(s string) bool {
	t := strings.TrimSpace(strings.NewReplacer(`$`, "", `\,`, "", `%`, "", `\%`, "").Replace(s))
	if fracTeX.FindString(t) == t && t != "" {
		return true
	}
	return numberRe.FindString(t) == t && t != ""
}

func collapse(s string) string { return strings.TrimSpace(space.ReplaceAllString(s, " ")) }

// normalise is exact's view of an answer: trimmed, white space collapsed,
// one final period dropped.
func normalise(s string) string {
	return strings.TrimSuffix(collapse(s), ".")
}
