package schemas

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
	"github.com/tidwall/gjson"
)

// InvalidUTF8Field returns the JSON path (such as "conversations[3].value",
// or the key itself for a bad key) of the first string in the JSON document
// doc that holds bytes which are not UTF-8, and true; or "", false when doc
// is valid UTF-8. Bad bytes outside any string give the path "" and true.
// Readers that must not change a row's bytes (compress, the sharegpt
// converter) reject such a row with this path instead of writing U+FFFD in
// its place, since every written string is valid UTF-8. It is a byte check
// for valid documents and walks the document only when the check fails.
func InvalidUTF8Field(doc []byte) (string, bool) {
	if utf8.Valid(doc) {
		return "", false
	}
	path, _ := invalidIn(gjson.ParseBytes(doc), "", 0)
	return path, true
}

func invalidIn(v gjson.Result, path string, depth int) (string, bool) {
	if depth > pyjson.MaxDepth {
		return path, true
	}
	var found string
	var ok bool
	switch {
	case v.IsObject():
		v.ForEach(func(k, val gjson.Result) bool {
			name := k.Str
			if !utf8.ValidString(k.Raw) {
				found, ok = join(path, strings.ToValidUTF8(name, "\uFFFD")), true
				return false
			}
			found, ok = invalidIn(val, join(path, name), depth+1)
			return !ok
		})
	case v.IsArray():
		i := 0
		v.ForEach(func(_, val gjson.Result) bool {
			found, ok = invalidIn(val, path+"["+strconv.Itoa(i)+"]", depth+1)
			i++
			return !ok
		})
	case v.Type == gjson.String:
		if !utf8.ValidString(v.Raw) {
			return path, true
		}
	}
	return found, ok
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
