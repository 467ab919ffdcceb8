package schemas

import "testing"

func TestInvalidUTF8FieldNamesThePath(t *testing.T) {
	for doc, want := range map[string]string{
		"{\"a\": \"ok\", \"conversations\": [{\"from\": \"gpt\", \"value\": \"x\"}, {\"from\": \"tool\", \"value\": \"bad \xff\"}]}": "conversations[1].value",
		"{\"k\xfe\": 1}":               "k\uFFFD",
		"{\"m\": {\"n\": [\"\xc3\"]}}": "m.n[0]",
		"[1, \"\xe2\x82\"]":            "[1]",
	} {
		got, bad := InvalidUTF8Field([]byte(doc))
		if !bad || got != want {
			t.Errorf("%q: %q %v, want %q", doc, got, bad, want)
		}
	}
	if _, bad := InvalidUTF8Field([]byte(`{"é": "ü", "s": "\xff as an escape is ASCII"}`)); bad {
		t.Error("valid UTF-8 reported bad")
	}
}
