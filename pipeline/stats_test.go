package pipeline

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestDecodeStatRecordMatchesUnmarshal: the fast statistics decoder gives
// what json.Unmarshal gives, including for lines it hands back to it.
func TestDecodeStatRecordMatchesUnmarshal(t *testing.T) {
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
	for _, line := range lines {
		var want, got statRecord
		wantErr := json.Unmarshal([]byte(line), &want)
		gotErr := decodeStatRecord([]byte(line), &got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", line, got, want)
		}
		var wt, gt *json.UnmarshalTypeError
		if (wantErr == nil) != (gotErr == nil) || errors.As(wantErr, &wt) != errors.As(gotErr, &gt) {
			t.Errorf("%s: error %v, want %v", line, gotErr, wantErr)
		}
	}
}
