package compress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// parseRowGJSON is parseRow as it was written on gjson: reading the row
// through schemas' walk must give the same turns, style and errors.
func parseRowGJSON(raw []byte) (parsed, error) {
	var p parsed
	conv := gjson.Get(view(raw), "conversations")
	if !conv.IsArray() {
		return p, errors.New("no conversations array")
	}
	var bad error
	i := 0
	conv.ForEach(func(_, v gjson.Result) bool {
		if !v.IsObject() {
			bad = fmt.Errorf("conversations[%d] is not an object", i)
			return false
		}
		from, value := v.Get("from"), v.Get("value")
		if from.Type != gjson.String || value.Type != gjson.String {
			bad = fmt.Errorf("conversations[%d] needs string \"from\" and \"value\"", i)
			return false
		}
		p.turns = append(p.turns, turn{from: from.String(), value: value.String(), raw: v.Raw})
		i++
		return true
	})
	if bad != nil {
		return p, bad
	}
	p.spaced, p.sep = arrayStyle(conv.Raw, p.turns)
	return p, nil
}

func TestParseRowAsGJSON(t *testing.T) {
	values := []string{`"gpt"`, `"human"`, `"a \"quoted\" \\ value\n"`, `"\u00e9\ud83d\ude80"`, `1`, `null`, `{"x":1}`, `["a"]`, `""`}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		var b strings.Builder
		sp := []string{",", ", "}[rng.IntN(2)]
		colon := []string{":", ": "}[rng.IntN(2)]
		b.WriteString("{")
		fmt.Fprintf(&b, `"key"%s"k"%s`, colon, sp)
		if rng.IntN(10) == 0 {
			fmt.Fprintf(&b, `"conversations"%s%s%s`, colon, values[rng.IntN(len(values))], sp)
		}
		fmt.Fprintf(&b, `"conversations"%s[`, colon)
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString(sp)
			}
			if rng.IntN(15) == 0 {
				b.WriteString(values[rng.IntN(len(values))])
				continue
			}
			b.WriteString("{")
			names := []string{"from", "value", "value", "from", "weight"}
			for j := range 2 + rng.IntN(3) {
				if j > 0 {
					b.WriteString(sp)
				}
				fmt.Fprintf(&b, `"%s"%s%s`, names[(j+rng.IntN(2))%len(names)], colon, values[rng.IntN(len(values))])
			}
			b.WriteString("}")
		}
		b.WriteString("]}")
		line := []byte(b.String())
		got, gerr := parseRow(line)
		want, werr := parseRowGJSON(line)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v %v\nwant %+v %v", line, got, gerr, want, werr)
		}
		if cerr := checkRow(line); fmt.Sprint(cerr) != fmt.Sprint(werr) {
			t.Fatalf("%s: checkRow %v, want %v", line, cerr, werr)
		}
		h := headOf(line)
		if h.key != gjson.GetBytes(line, "key").Raw {
			t.Fatalf("%s: key %s", line, h.key)
		}
		for _, member := range []string{"key", "conversations"} {
			out, err := schemas.SetMember(line, member, []byte(`"X"`), false)
			cur := gjson.GetBytes(line, member)
			want := string(line[:cur.Index]) + `"X"` + string(line[cur.Index+len(cur.Raw):])
			if err != nil || string(out) != want {
				t.Fatalf("%s: set %s: %s %v", line, member, out, err)
			}
		}
	}
}
