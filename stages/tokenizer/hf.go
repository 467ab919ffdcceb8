package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// hfFile is the part of a Hugging Face tokenizer.json that encoding needs.
// The decoder, post_processor, truncation and padding sections do not change
// the ids of a text and are ignored.
type hfFile struct {
	AddedTokens  []hfAddedToken  `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Dropout                 *float64        `json:"dropout"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		UnkToken                *string         `json:"unk_token"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfComponent is a normalizer or pre-tokenizer object.
type hfComponent struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        *hfPattern        `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Individual     bool              `json:"individual_digits"`
	// Replace, Prepend and Strip normalizers.
	Content    *string `json:"content"`
	Prepend    *string `json:"prepend"`
	StripLeft  bool    `json:"strip_left"`
	StripRight bool    `json:"strip_right"`
	// Metaspace pre-tokenizer.
	Replacement   *string `json:"replacement"`
	PrependScheme string  `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
}

type hfPattern struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// loadHF reads a tokenizer.json (optionally gzip-compressed, by content).
func loadHF(path string) (*encoder, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
	}
	var f hfFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("parse json: %w", err)
	}
	e := &encoder{name: displayName(path)}
	byteLevel, err := buildPre(e, f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if e.model, err = buildHFModel(&f, byteLevel); err != nil {
		return nil, err
	}
	if e.normalize, err = buildNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	// Ids of added tokens follow Hugging Face tokenizers, which ignores the
	// ids written in the file: a token in the model vocabulary keeps that id,
	// the others are numbered after the vocabulary (its entry count), in file
	// order. For published tokenizer.json files both agree.
	var raws, norms []hfAddedToken
	assigned := map[string]int{}
	vocabLen, maxAdded := len(f.Model.Vocab), -1
	for _, t := range f.AddedTokens {
		if t.Content == "" {
			continue
		}
		if id, ok := assigned[t.Content]; ok {
			t.ID = id
		} else if id, ok := f.Model.Vocab[t.Content]; ok {
			t.ID = id
		} else {
			// Measured against tokenizers 0.22: ids taken from the model
			// vocabulary do not move the counter.
			t.ID = max(vocabLen, maxAdded+1)
			maxAdded = t.ID
		}
		assigned[t.Content] = t.ID
		if t.Normalized && e.normalize != nil {
			t.Content = e.normalize(t.Content)
			norms = append(norms, t)
		} else {
			raws = append(raws, t)
		}
	}
	e.added = newAddedMatcher(raws)
	e.addedNorm = newAddedMatcher(norms)
	return e, nil
}

// byteLevelAlphabet returns GPT-2's bytes_to_unicode table and its inverse.
func byteLevelAlphabet() ([256]rune, map[rune]byte) {
	var b2u [256]rune
	u2b := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2u[b] = rune(b)
		} else {
			b2u[b] = rune(256 + n)
			n++
		}
		u2b[b2u[b]] = byte(b)
	}
	return b2u, u2b
}

// fromByteLevel maps a byte-level token back to its bytes; ok is false when
// the token has characters outside the byte-level alphabet.
func fromByteLevel(tok string, u2b map[rune]byte, buf []byte) ([]byte, bool) {
	buf = buf[:0]
	for _, r := range tok {
		b, ok := u2b[r]
		if !ok {
			return buf, false
		}
		buf = append(buf, b)
	}
	return buf, true
}

// buildHFModel builds the BPE model. A byte-level model (a ByteLevel
// pre-tokenizer maps bytes to GPT-2's alphabet first) is kept in bytes; any
// other is the SentencePiece family's character-level BPE (byte_fallback,
// unk_token, fuse_unk).
func buildHFModel(f *hfFile, byteLevel bool) (*bpeModel, error) {
	mt := f.Model.Type
	if mt == "" && f.Model.Vocab != nil && f.Model.Merges != nil {
		mt = "BPE"
	}
	if mt != "BPE" {
		return nil, fmt.Errorf("field model.type is %q: only BPE models are supported", mt)
	}
	if f.Model.Dropout != nil && *f.Model.Dropout != 0 {
		return nil, fmt.Errorf("field model.dropout is %v: BPE dropout is random and cannot be reproduced", *f.Model.Dropout)
	}
	if p := f.Model.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("field model.continuing_subword_prefix is %q: not supported", *p)
	}
	if p := f.Model.EndOfWordSuffix; p != nil && *p != "" {
		return nil, fmt.Errorf("field model.end_of_word_suffix is %q: not supported", *p)
	}
	m := &bpeModel{unkID: -1}
	for b := range 256 {
		m.byteID[b] = -1
	}
	if err := setVocab(m, f, byteLevel); err != nil {
		return nil, err
	}
	if f.Model.IgnoreMerges {
		m.pieces = newVocabTable(m.vocab)
	}
	if !m.charLevel {
		m.vocab = nil // the byte-level merge loop reads only the tables
	}
	var pairs [][2]string
	var asStrings []string
	if err := json.Unmarshal(f.Model.Merges, &asStrings); err == nil {
		pairs = make([][2]string, len(asStrings))
		for i, s := range asStrings {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("field model.merges[%d] is %q: want two tokens separated by a space", i, s)
			}
			pairs[i] = [2]string{a, b}
		}
	} else if err := json.Unmarshal(f.Model.Merges, &pairs); err != nil {
		return nil, fmt.Errorf("field model.merges: want a list of \"a b\" strings or [a, b] pairs: %w", err)
	}
	merges := make(map[uint64]uint64, len(pairs))
	for i, p := range pairs {
		a, okA := f.Model.Vocab[p[0]]
		b, okB := f.Model.Vocab[p[1]]
		ab, okAB := f.Model.Vocab[p[0]+p[1]]
		if !okA || !okB || !okAB {
			return nil, fmt.Errorf("field model.merges[%d] (%q %q): token not in model.vocab", i, p[0], p[1])
		}
		merges[uint64(uint32(a))<<32|uint64(uint32(b))] = uint64(i)<<32 | uint64(uint32(ab))
	}
	m.merges = newPairTable(merges)
	m.setBytePairs()
	return m, nil
}

// setVocab fills the vocabulary of m: in bytes for a byte-level model,
// as text with the byte-fallback and unknown tokens otherwise.
func setVocab(m *bpeModel, f *hfFile, byteLevel bool) error {
	if byteLevel {
		_, u2b := byteLevelAlphabet()
		m.vocab = make(map[string]int, len(f.Model.Vocab))
		var buf []byte
		for tok, id := range f.Model.Vocab {
			b, ok := fromByteLevel(tok, u2b, buf)
			buf = b
			if ok {
				m.vocab[string(b)] = id
			}
		}
		for b := range 256 {
			if id, ok := m.vocab[string([]byte{byte(b)})]; ok {
				m.byteID[b] = int32(id)
			}
		}
	} else {
		m.vocab, m.charLevel, m.fuseUnk = f.Model.Vocab, true, f.Model.FuseUnk
		if u := f.Model.UnkToken; u != nil && *u != "" {
			id, ok := f.Model.Vocab[*u]
			if !ok {
				return fmt.Errorf("field model.unk_token %q is not in model.vocab", *u)
			}
			m.unkID = int32(id)
		}
		if f.Model.ByteFallback {
			m.fallback = new([256]int32)
			for b := range 256 {
				m.fallback[b] = -1
				if id, ok := f.Model.Vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
					m.fallback[b] = int32(id)
				}
			}
		}
	}
	return nil
}

func buildNormalizer(raw json.RawMessage, field string) (func(string) string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("field %s: %w", field, err)
	}
	form := func(f norm.Form) func(string) string {
		return func(s string) string {
			if f.IsNormalString(s) {
				return s
			}
			return f.String(s)
		}
	}
	switch c.Type {
	case "NFC":
		return form(norm.NFC), nil
	case "NFD":
		return form(norm.NFD), nil
	case "NFKC":
		return form(norm.NFKC), nil
	case "NFKD":
		return form(norm.NFKD), nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Replace":
		return buildReplace(&c, field)
	case "Prepend":
		if c.Prepend == nil {
			return nil, fmt.Errorf("field %s.prepend is missing", field)
		}
		pre := *c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return pre + s
		}, nil
	case "Strip":
		left, right := c.StripLeft, c.StripRight
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	case "Sequence":
		var fs []func(string) string
		for i, sub := range c.Normalizers {
			f, err := buildNormalizer(sub, fmt.Sprintf("%s.normalizers[%d]", field, i))
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			return nil, nil
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("field %s.type is %q: not supported (NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence)", field, c.Type)
}

// buildReplace is the Replace normalizer: every match of a literal or a
// regex, left to right and not overlapping, becomes content.
func buildReplace(c *hfComponent, field string) (func(string) string, error) {
	if c.Content == nil {
		return nil, fmt.Errorf("field %s.content is missing", field)
	}
	content := *c.Content
	switch {
	case c.Pattern == nil:
		return nil, fmt.Errorf("field %s.pattern is missing", field)
	case c.Pattern.String != nil:
		lit := *c.Pattern.String
		if lit == "" {
			return nil, fmt.Errorf("field %s.pattern.String is empty", field)
		}
		return func(s string) string { return strings.ReplaceAll(s, lit, content) }, nil
	case c.Pattern.Regex != nil:
		re, err := compileLook(*c.Pattern.Regex)
		if err != nil {
			return nil, fmt.Errorf("field %s.pattern.Regex: %w", field, err)
		}
		return func(s string) string {
			var b strings.Builder
			last := 0
			for i := 0; i < len(s); {
				a, z := re.find(s, i)
				if a < 0 {
					break
				}
				if z == a { // empty match: nothing replaced, step over one rune
					_, w := utf8.DecodeRuneInString(s[a:])
					i = a + w
					continue
				}
				b.WriteString(s[last:a])
				b.WriteString(content)
				last, i = z, z
			}
			if last == 0 {
				return s
			}
			b.WriteString(s[last:])
			return b.String()
		}, nil
	}
	return nil, fmt.Errorf("field %s.pattern: want Regex or String", field)
}

// preStep is one pre-tokenizer of the general pipeline.
type preStep interface {
	apply(piece string, out []string) []string
}

// buildPre sets e.split (the fast path) or e.pre from the pre_tokenizer,
// and reports whether it has a ByteLevel step (a byte-level model).
func buildPre(e *encoder, raw json.RawMessage) (bool, error) {
	var steps []preStep
	byteLevel := false
	var flatten func(raw json.RawMessage, field string) error
	flatten = func(raw json.RawMessage, field string) error {
		var c hfComponent
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("field %s: %w", field, err)
		}
		switch c.Type {
		case "Sequence":
			for i, sub := range c.Pretokenizers {
				if err := flatten(sub, fmt.Sprintf("%s.pretokenizers[%d]", field, i)); err != nil {
					return err
				}
			}
			return nil
		case "ByteLevel":
			byteLevel = true
			useRegex := c.UseRegex == nil || *c.UseRegex
			prefix := c.AddPrefixSpace != nil && *c.AddPrefixSpace
			var re *lookRegex
			if useRegex {
				var err error
				if re, err = compileLook(patGPT2); err != nil {
					return fmt.Errorf("field %s: %w", field, err)
				}
			}
			if prefix || useRegex {
				steps = append(steps, &byteLevelStep{prefixSpace: prefix, re: re})
			}
			return nil
		case "Split":
			st, err := buildSplit(&c, field)
			if err != nil {
				return err
			}
			steps = append(steps, st)
			return nil
		case "Digits":
			steps = append(steps, &digitsStep{individual: c.Individual})
			return nil
		case "Metaspace":
			st, err := buildMetaspace(&c, field)
			if err != nil {
				return err
			}
			steps = append(steps, st)
			return nil
		}
		return fmt.Errorf("field %s.type is %q: not supported (Sequence, Split, ByteLevel, Digits, Metaspace)", field, c.Type)
	}
	if len(raw) != 0 && string(raw) != "null" {
		if err := flatten(raw, "pre_tokenizer"); err != nil {
			return false, err
		}
	}
	if len(steps) == 1 {
		if sp, ok := steps[0].(*splitStep); ok && sp.fast != nil && sp.behavior == "Isolated" && !sp.invert {
			e.split = sp.fast
			return byteLevel, nil
		}
	}
	if len(steps) == 0 {
		steps = append(steps, wholeStep{})
	}
	e.pre = steps
	return byteLevel, nil
}

// buildMetaspace reads a Metaspace pre-tokenizer: the current form
// (prepend_scheme, split) and the older one (add_prefix_space).
func buildMetaspace(c *hfComponent, field string) (*metaspaceStep, error) {
	st := &metaspaceStep{rep: "▁", split: c.Split == nil || *c.Split}
	if c.Replacement != nil {
		if utf8.RuneCountInString(*c.Replacement) != 1 {
			return nil, fmt.Errorf("field %s.replacement is %q: want one character", field, *c.Replacement)
		}
		st.rep = *c.Replacement
	}
	switch c.PrependScheme {
	case "always", "first", "never":
		st.scheme = c.PrependScheme
	case "":
		st.scheme = "always"
		if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			st.scheme = "never"
		}
	default:
		return nil, fmt.Errorf("field %s.prepend_scheme is %q: want always, first or never", field, c.PrependScheme)
	}
	return st, nil
}

// patGPT2 is the regex of the ByteLevel pre-tokenizer with use_regex.
const patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func buildSplit(c *hfComponent, field string) (*splitStep, error) {
	st := &splitStep{behavior: c.Behavior, invert: c.Invert}
	switch c.Behavior {
	case "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous":
	default:
		return nil, fmt.Errorf("field %s.behavior is %q: not supported", field, c.Behavior)
	}
	switch {
	case c.Pattern == nil:
		return nil, fmt.Errorf("field %s.pattern is missing", field)
	case c.Pattern.Regex != nil:
		st.fast = knownSplitter(*c.Pattern.Regex)
		if st.fast == nil {
			re, err := compileLook(*c.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("field %s.pattern.Regex: %w", field, err)
			}
			st.re = re
		}
	case c.Pattern.String != nil:
		if *c.Pattern.String == "" {
			return nil, fmt.Errorf("field %s.pattern.String is empty", field)
		}
		st.lit = *c.Pattern.String
	default:
		return nil, fmt.Errorf("field %s.pattern: want Regex or String", field)
	}
	return st, nil
}

// runPre applies the general pre-tokenizer pipeline to s; first says that
// s starts the input (a Metaspace step with prepend_scheme "first" prepends
// only there).
func runPre(steps []preStep, s string, first bool) []string {
	if s == "" {
		return nil
	}
	pieces := []string{s}
	var next []string
	for _, st := range steps {
		next = next[:0]
		ms, isMeta := st.(*metaspaceStep)
		for k, p := range pieces {
			if isMeta {
				next = ms.applyAt(p, first && k == 0, next)
			} else {
				next = st.apply(p, next)
			}
		}
		pieces, next = next, pieces
	}
	return pieces
}

// metaspaceStep is the Metaspace pre-tokenizer: spaces become the
// replacement character, which is prepended as the scheme says, and with
// split each replacement starts a new piece.
type metaspaceStep struct {
	rep    string
	scheme string // always, first, never
	split  bool
}

func (m *metaspaceStep) apply(p string, out []string) []string { return m.applyAt(p, false, out) }

func (m *metaspaceStep) applyAt(p string, first bool, out []string) []string {
	p = strings.ReplaceAll(p, " ", m.rep)
	if !strings.HasPrefix(p, m.rep) && (m.scheme == "always" || m.scheme == "first" && first) {
		p = m.rep + p
	}
	if !m.split {
		return append(out, p)
	}
	rep := m.rep
	return splitBehavior(p, out, "MergedWithNext", false, func(s string, i int) (int, int) {
		k := strings.Index(s[i:], rep)
		if k < 0 {
			return -1, -1
		}
		return i + k, i + k + len(rep)
	})
}

type wholeStep struct{}

func (wholeStep) apply(p string, out []string) []string { return append(out, p) }

// byteLevelStep is ByteLevel with add_prefix_space and/or use_regex: a space
// is prepended to every piece that does not start with one, then the GPT-2
// regex splits it.
type byteLevelStep struct {
	prefixSpace bool
	re          *lookRegex
}

func (b *byteLevelStep) apply(p string, out []string) []string {
	if b.prefixSpace && !strings.HasPrefix(p, " ") {
		p = " " + p
	}
	if b.re == nil {
		return append(out, p)
	}
	return splitIsolated(p, out, b.re.find)
}

// digitsStep is the Digits pre-tokenizer.
type digitsStep struct{ individual bool }

func (d *digitsStep) apply(p string, out []string) []string {
	return splitBehavior(p, out, "Isolated", false, func(s string, i int) (int, int) {
		for j, r := range s[i:] {
			if unicode.IsNumber(r) {
				k := i + j + utf8.RuneLen(r)
				if !d.individual {
					for k < len(s) {
						r2, w := utf8.DecodeRuneInString(s[k:])
						if !unicode.IsNumber(r2) {
							break
						}
						k += w
					}
				}
				return i + j, k
			}
		}
		return -1, -1
	})
}

// splitStep is the Split pre-tokenizer.
type splitStep struct {
	fast     splitter
	re       *lookRegex
	lit      string
	behavior string
	invert   bool
}

func (sp *splitStep) apply(p string, out []string) []string {
	var find func(s string, i int) (int, int)
	switch {
	case sp.fast != nil:
		find = func(s string, i int) (int, int) {
			if i >= len(s) {
				return -1, -1
			}
			return i, sp.fast.next(s, i)
		}
	case sp.re != nil:
		find = sp.re.find
	default:
		find = func(s string, i int) (int, int) {
			k := strings.Index(s[i:], sp.lit)
			if k < 0 {
				return -1, -1
			}
			return i + k, i + k + len(sp.lit)
		}
	}
	return splitBehavior(p, out, sp.behavior, sp.invert, find)
}

func splitIsolated(s string, out []string, find func(string, int) (int, int)) []string {
	return splitBehavior(s, out, "Isolated", false, find)
}

// splitBehavior cuts s into matches (find returns the next match at or after
// i, or -1) and the gaps between them, and combines them as the Hugging Face
// SplitDelimiterBehavior says.
func splitBehavior(s string, out []string, behavior string, invert bool, find func(string, int) (int, int)) []string {
	type part struct {
		text  string
		match bool
	}
	var parts []part
	last := 0
	for i := 0; i < len(s); {
		a, b := find(s, i)
		if a < 0 {
			break
		}
		if a > last {
			parts = append(parts, part{s[last:a], false})
		}
		if b == a { // empty match: step over one rune
			_, w := utf8.DecodeRuneInString(s[a:])
			i = a + w
			continue
		}
		parts = append(parts, part{s[a:b], true})
		last, i = b, b
	}
	if last < len(s) {
		parts = append(parts, part{s[last:], false})
	}
	if invert {
		for i := range parts {
			parts[i].match = !parts[i].match
		}
	}
	switch behavior {
	case "Isolated":
		for _, p := range parts {
			out = append(out, p.text)
		}
	case "Removed":
		for _, p := range parts {
			if !p.match {
				out = append(out, p.text)
			}
		}
	case "MergedWithPrevious":
		// A match joins the part before it unless that part is a match
		// too, as in Hugging Face: "a" "," "," gives "a," and ",".
		start, prevMatch := len(out), false
		for _, p := range parts {
			if p.match && !prevMatch && len(out) > start {
				out[len(out)-1] += p.text
			} else {
				out = append(out, p.text)
			}
			prevMatch = p.match
		}
	case "MergedWithNext":
		// The mirror image: "▁" "▁" "a" gives "▁" and "▁a".
		start, nextMatch := len(out), false
		for k := len(parts) - 1; k >= 0; k-- {
			p := parts[k]
			if p.match && !nextMatch && len(out) > start {
				out[len(out)-1] = p.text + out[len(out)-1]
			} else {
				out = append(out, p.text)
			}
			nextMatch = p.match
		}
		slices.Reverse(out[start:])
	case "Contiguous":
		prevMatch := false
		start := len(out)
		for _, p := range parts {
			if p.match && prevMatch && len(out) > start {
				out[len(out)-1] += p.text
			} else {
				out = append(out, p.text)
			}
			prevMatch = p.match
		}
	}
	return out
}

// addedMatcher finds added tokens, leftmost-longest, like the Aho-Corasick
// matcher of Hugging Face tokenizers.
type addedMatcher struct {
	byFirst [256][]hfAddedToken // longest first
}

func newAddedMatcher(toks []hfAddedToken) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	a := &addedMatcher{}
	for _, t := range toks {
		a.byFirst[t.Content[0]] = append(a.byFirst[t.Content[0]], t)
	}
	for i := range a.byFirst {
		sort.SliceStable(a.byFirst[i], func(x, y int) bool {
			return len(a.byFirst[i][x].Content) > len(a.byFirst[i][y].Content)
		})
	}
	return a
}

// split calls yield for each text gap (id -1, at its byte offset in s) and
// each added token, in order.
func (a *addedMatcher) split(s string, yield func(text string, at, id int)) {
	last := 0
	for i := 0; i < len(s); i++ {
		cands := a.byFirst[s[i]]
		if len(cands) == 0 {
			continue
		}
		for _, t := range cands {
			if !strings.HasPrefix(s[i:], t.Content) {
				continue
			}
			start, end := i, i+len(t.Content)
			if t.SingleWord && (isWordBefore(s, start) || isWordAfter(s, end)) {
				// Not a single word: the match is dropped and the search
				// goes on after it, as with an Aho-Corasick find_iter.
				i = end - 1
				break
			}
			if t.LStrip {
				for start > last {
					r, w := utf8.DecodeLastRuneInString(s[:start])
					if !unicode.IsSpace(r) {
						break
					}
					start -= w
				}
			}
			if t.RStrip {
				for end < len(s) {
					r, w := utf8.DecodeRuneInString(s[end:])
					if !unicode.IsSpace(r) {
						break
					}
					end += w
				}
			}
			if start > last {
				yield(s[last:start], last, -1)
			}
			yield("", start, t.ID)
			last = end
			i = end - 1
			break
		}
	}
	if last < len(s) {
		yield(s[last:], last, -1)
	}
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isWordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isWordRune(r)
}

func isWordAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWordRune(r)
}
