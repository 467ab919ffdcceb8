package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// jsonDoc decodes a JSON document into the yaml.Node tree the YAML parser
// would give (kinds, tags, values as written, line numbers), so one walk
// checks both forms and names the same lines. JSON goes through its own
// decoder because YAML refuses a key over 1,024 characters and reads JSON
// only as far as YAML's flow style agrees with it. A duplicate key is an
// error, as in YAML. The error of a document that is not JSON names its
// line.
func jsonDoc(data []byte) (*yaml.Node, error) {
	d := &jsonDecoder{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	d.dec.UseNumber()
	n, err := d.value()
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, &jsonError{d.line(), "content after the top-level value", true}
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: 1, Content: []*yaml.Node{n}}, nil
}

// jsonError is why a document is not JSON, and on which line. Final marks
// a document that is JSON but not an acceptable one (a duplicate key,
// content after the value): it is not tried as YAML.
type jsonError struct {
	Line  int
	Msg   string
	Final bool
}

func (e *jsonError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

type jsonDecoder struct {
	dec  *json.Decoder
	data []byte
}

// line is the line of the decoder's position, which is the end of the
// token last read: a JSON token never spans lines, so it is its line too.
func (d *jsonDecoder) line() int {
	off := int(d.dec.InputOffset())
	return 1 + bytes.Count(d.data[:min(off, len(d.data))], []byte{'\n'})
}

// errLine is the line of a decoder error (a syntax error's offset), else
// the decoder's position.
func (d *jsonDecoder) errLine(err error) int {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return 1 + bytes.Count(d.data[:min(int(syn.Offset), len(d.data))], []byte{'\n'})
	}
	return d.line()
}

func (d *jsonDecoder) token() (json.Token, int, error) {
	t, err := d.dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, &jsonError{d.errLine(err), err.Error(), false}
	}
	return t, d.line(), nil
}

func (d *jsonDecoder) value() (*yaml.Node, error) {
	t, line, err := d.token()
	if err != nil {
		return nil, err
	}
	return d.node(t, line)
}

func (d *jsonDecoder) node(t json.Token, line int) (*yaml.Node, error) {
	switch v := t.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			seen := map[string]int{}
			for d.dec.More() {
				kt, kline, err := d.token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				if prev, dup := seen[key]; dup {
					return nil, &jsonError{kline, fmt.Sprintf("key %q already defined at line %d", truncate(key), prev), true}
				}
				seen[key] = kline
				val, err := d.value()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: kline}, val)
			}
			_, _, err := d.token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: line}
			for d.dec.More() {
				val, err := d.value()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, val)
			}
			_, _, err := d.token() // ']'
			return n, err
		}
		return nil, &jsonError{line, fmt.Sprintf("unexpected %q", v), false}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: line}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v), Line: line}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v), Line: line}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	}
	return nil, &jsonError{line, fmt.Sprintf("unexpected token %v", t), false}
}

// truncate shortens a long key for a message.
func truncate(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// looksLikeJSON reports whether data starts, after white space, with '{':
// such a file is read as JSON first.
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	return len(t) > 0 && t[0] == '{'
}
