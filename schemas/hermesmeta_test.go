package schemas

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestHermesMetadata: Hermes' members come first, in batch_runner's order,
// the row's own members follow byte for byte and win on a shared name, and
// the timestamp is UTC in Python's isoformat form.
func TestHermesMetadata(t *testing.T) {
	at := time.Date(2026, 6, 1, 11, 0, 0, 123456789, time.FixedZone("CEST", 2*3600))
	for _, c := range []struct {
		meta, model, want string
	}{
		{"", "m", `{"batch_num":3,"timestamp":"2026-06-01T09:00:00.123456+00:00","model":"m"}`},
		{"null", "", `{"batch_num":3,"timestamp":"2026-06-01T09:00:00.123456+00:00"}`},
		{" {} ", "m", `{"batch_num":3,"timestamp":"2026-06-01T09:00:00.123456+00:00","model":"m"}`},
		{`{"src": "a", "n": [1, {"x": null}]}`, "<m&>", `{"batch_num":3,"timestamp":"2026-06-01T09:00:00.123456+00:00","model":"<m&>","src": "a", "n": [1, {"x": null}]}`},
		// The row's members of Hermes' names are kept, Hermes' not added.
		{`{"timestamp": "row's", "model": 7}`, "m", `{"batch_num":3,"timestamp": "row's", "model": 7}`},
		{`{"batch_num": "b", "timestamp": "t", "model": "x"}`, "m", `{"batch_num": "b", "timestamp": "t", "model": "x"}`},
		// Not an object: not ours to change.
		{`[1]`, "m", `[1]`},
	} {
		got := HermesMetadata(json.RawMessage(c.meta), 3, at, c.model)
		if string(got) != c.want {
			t.Errorf("HermesMetadata(%s, %q) = %s, want %s", c.meta, c.model, got, c.want)
		}
		if c.meta != "[1]" && !json.Valid(got) {
			t.Errorf("HermesMetadata(%s) is not JSON: %s", c.meta, got)
		}
	}
	// Python's datetime.fromisoformat reads the form; Go's RFC 3339 too.
	ts := at.UTC().Format(TimestampLayout)
	if back, err := time.Parse(time.RFC3339Nano, ts); err != nil || !back.Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("timestamp %s reads back as %v, %v", ts, back, err)
	}
}

// TestOldRecordWithoutSuccessReads: a record line written before success and
// Hermes' metadata members decodes as it did (Success nil, metadata the
// row's), through both decoders, and encodes back without a success member.
func TestOldRecordWithoutSuccessReads(t *testing.T) {
	line := `{"key":"k","prompt_index":4,"sample":0,"conversations":[],"outcome":"api_error","completed":false,"partial":false,"api_calls":2,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"cost_usd":null,"toolsets_used":null,"tool_stats":null,"tool_error_counts":null,"reasoning_stats":{"total_assistant_turns":0,"turns_with_reasoning":0,"turns_without_reasoning":0,"has_any_reasoning":false},"duration_ms":5,"error":"HTTP 502","metadata":{"src":"a"}}`
	var whole Record
	if err := json.Unmarshal([]byte(line), &whole); err != nil {
		t.Fatal(err)
	}
	var some Record
	if err := DecodeMembers([]byte(line), &some, MemberSuccess, MemberOutcome, MemberMetadata, MemberAPICalls); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{whole, some} {
		if r.Success != nil || r.Outcome != OutcomeAPIError || string(r.Metadata) != `{"src":"a"}` || r.APICalls != 2 {
			t.Fatalf("decoded %+v", r)
		}
	}
	back, err := json.Marshal(&whole)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(back), `"success"`) {
		t.Errorf("an old record gained success: %s", back)
	}
	// A new record's success decodes as written.
	var fresh Record
	if err := DecodeMembers([]byte(`{"key":"k","outcome":"completed","success":true}`), &fresh, MemberSuccess); err != nil || fresh.Success == nil || !*fresh.Success {
		t.Errorf("success: %v %v", fresh.Success, err)
	}
}
