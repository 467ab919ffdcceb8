package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestRecordMembersAreRecordTags: the member constants are Record's JSON
// names, in Record's order, so every reader naming a member through them
// reads what Record writes.
func TestRecordMembersAreRecordTags(t *testing.T) {
	var tags []string
	rt := reflect.TypeFor[Record]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "-" {
			tags = append(tags, name)
		}
	}
	if !reflect.DeepEqual(tags, RecordMembers[:]) {
		t.Fatalf("Record's members %v, RecordMembers %v", tags, RecordMembers)
	}
	var r Record
	for _, name := range RecordMembers {
		p := r.field(name)
		if p == nil {
			t.Fatalf("no field for %s", name)
		}
		f, _ := rt.FieldByNameFunc(func(n string) bool {
			sf, _ := rt.FieldByName(n)
			tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			return tag == name
		})
		if got := reflect.TypeOf(p).Elem(); got != f.Type {
			t.Fatalf("%s: field of type %v, Record's is %v", name, got, f.Type)
		}
	}
	turn := reflect.TypeFor[Turn]()
	from, _ := turn.FieldByName("From")
	value, _ := turn.FieldByName("Value")
	if from.Tag.Get("json") != TurnFrom || value.Tag.Get("json") != TurnValue {
		t.Fatalf("Turn's members are %s and %s", from.Tag.Get("json"), value.Tag.Get("json"))
	}
}

// statMembers are the members pipeline's statistics decode.
var statMembers = []string{MemberOutcome, MemberCompleted, MemberPartial, MemberAPICalls, MemberUsage, MemberCostUSD,
	MemberToolStats, MemberToolErrorCounts, MemberReasoningStats, MemberDurationMS}

// TestDecodeMembersMatchesUnmarshal: the fast decoder gives what
// json.Unmarshal gives for the members it is asked for, including for lines
// it hands back to it, and the same kind of error.
func TestDecodeMembersMatchesUnmarshal(t *testing.T) {
	lines := []string{
		`{"key":"a","outcome":"completed","completed":true,"api_calls":3,"usage":{"prompt_tokens":5,"total_tokens":7},"duration_ms":12}`,
		`{"conversations":[{"from":"gpt","value":"{\"outcome\":\"fake\",\"api_calls\":99}"}],"outcome":"timeout"}` + "\n",
		`  {"outcome" : "partial" , "partial" : true , "tool_stats" : {"t":{"count":2,"success":1,"failure":1}} }  `,
		`{"completed":"yes","api_calls":1.5,"outcome":"completed","duration_ms":4}`,
		`{"usage":{"prompt_tokens":"x","completion_tokens":2},"reasoning_stats":{"total_assistant_turns":2,"has_any_reasoning":true}}`,
		`{"tool_stats":{"a":{"count":1}},"tool_stats":{"b":{"count":2}},"outcome":"x","outcome":"y"}`,
		`{"tool_error_counts":null,"usage":null,"outcome":null}`,
		`{"Outcome":"folded","api_calls":2}`,
		`{"outcome":"exact","OUTCOME":"folded later"}`,
		`{"tool_ſtats":{"s":{"count":4}}}`,
		`{"outc\u006fme":"escaped name","extra":{"outcome":"nested"}}`,
		`[1,2]`,
		`"just a string"`,
		`{"outcome":"torn"`,
		`{}`,
	}
	for _, names := range [][]string{statMembers, {MemberKey, MemberID, MemberOutcome, MemberAPICalls, MemberUsage, MemberModel, MemberError, MemberExtra}} {
		for _, line := range lines {
			var want, got Record
			wantErr := json.Unmarshal([]byte(line), &want)
			gotErr := DecodeMembers([]byte(line), &got, names...)
			for _, n := range names {
				if g, w := reflect.ValueOf(got.field(n)).Elem().Interface(), reflect.ValueOf(want.field(n)).Elem().Interface(); !reflect.DeepEqual(g, w) {
					t.Errorf("%s: %s is %+v, want %+v", line, n, g, w)
				}
			}
			var wt, gt *json.UnmarshalTypeError
			if (wantErr == nil) != (gotErr == nil) || errors.As(wantErr, &wt) != errors.As(gotErr, &gt) {
				t.Errorf("%s: error %v, want %v", line, gotErr, wantErr)
			}
			if !json.Valid([]byte(line)) {
				continue
			}
			// A line known to be valid: the same without the check.
			var valid Record
			validErr := DecodeValidMembers([]byte(line), &valid, names...)
			if !reflect.DeepEqual(valid, got) || fmt.Sprint(validErr) != fmt.Sprint(gotErr) {
				t.Errorf("%s: DecodeValidMembers gives %+v (%v), DecodeMembers %+v (%v)", line, valid, validErr, got, gotErr)
			}
		}
	}
}

// TestEachMemberBounded: the walk never reads outside text that is not
// valid JSON, and never gives an empty value.
func TestEachMemberBounded(t *testing.T) {
	line := `{"key":"a","conversations":[{"from":"gpt","value":"x\"y"}],"usage":{"total_tokens":3},"n":-1.5e3,"b":true}`
	for i := range len(line) {
		for _, s := range []string{line[:i], line[i:], line[:i] + "]" + line[i:]} {
			EachMember(s, func(_, raw string) {
				if raw == "" {
					t.Fatalf("%s: empty value", s)
				}
				EachElement(raw, func(e string) {
					if e == "" {
						t.Fatalf("%s: empty element", s)
					}
				})
			})
			MemberAt([]byte(s), "usage.total_tokens")
		}
	}
	if got := MemberAt([]byte(line), "usage.total_tokens"); got != "3" {
		t.Fatalf("usage.total_tokens = %q", got)
	}
	if got := StringAt([]byte(` {"a":{"b":"x"},"a":{"b":"last"}} `), "a.b"); got != "last" {
		t.Fatalf("a.b = %q", got)
	}
}

func TestJSONStringMatchesEncodingJSON(t *testing.T) {
	cases := []string{`""`, `"abc"`, `"a\nb\t\"\\\/"`, `"\u00e9\u4e2d"`, `"\ud83d\ude80"`, `"\ud800"`, `"\ud800x"`, `"\ud800\u0041"`,
		`"\udc00\ud800"`, `"\u0000"`, `"\b\f\r"`, `"é中🚀"`, `"\uD83D\uDE80"`}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(12) {
			switch rng.IntN(6) {
			case 0:
				fmt.Fprintf(&b, `\u%04x`, 0xd800+rng.IntN(0x800))
			case 1:
				fmt.Fprintf(&b, `\u%04X`, rng.IntN(0x10000))
			case 2:
				b.WriteString(`\n\"`)
			default:
				b.WriteRune(rune(rng.IntN(0x3000)) + 0x20)
			}
		}
		q := `"` + b.String() + `"`
		if json.Valid([]byte(q)) {
			cases = append(cases, q)
		}
	}
	for _, c := range cases {
		var want string
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		got, ok := JSONString(c)
		if !ok || got != want {
			t.Fatalf("JSONString(%s) = %q, %v; want %q", c, got, ok, want)
		}
		// AppendJSONString decodes the same, after what dst holds.
		app, ok := AppendJSONString([]byte("prefix"), c)
		if !ok || string(app) != "prefix"+want {
			t.Fatalf("AppendJSONString(%s) = %q, %v; want %q", c, app, ok, "prefix"+want)
		}
	}
	for _, c := range []string{`1`, `"a`, `null`, `"\x"`, `"ok\u12"`} {
		if _, ok := JSONString(c); ok {
			t.Fatalf("JSONString accepted %s", c)
		}
		if app, ok := AppendJSONString([]byte("prefix"), c); ok || string(app) != "prefix" {
			t.Fatalf("AppendJSONString accepted %s: %q", c, app)
		}
	}
}

func TestJSONInt(t *testing.T) {
	for raw, want := range map[string]int64{"0": 0, "-12": -12, "1e3": 1000, "2.0": 2, "9007199254740993": 9007199254740993} {
		if got, ok := JSONInt(raw); !ok || got != want {
			t.Fatalf("JSONInt(%s) = %d, %v", raw, got, ok)
		}
	}
	for _, raw := range []string{"1.5", "true", `"1"`, "1e30", "null"} {
		if _, ok := JSONInt(raw); ok {
			t.Fatalf("JSONInt accepted %s", raw)
		}
	}
}
