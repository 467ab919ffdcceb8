package schemas

import (
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// parseInputRowFast accepts the common, valid row in one pass without
// building a map; it returns ok=false for anything unusual (invalid JSON,
// wrong types, unknown toolsets, duplicate keys), which the slow path then
// explains. Resuming a 1,000,000-row run parses every row, so this matters.
func parseInputRowFast(line []byte) (InputRow, bool) {
	var row InputRow
	if _, deep := tooDeep(line); deep || !utf8.Valid(line) || !gjson.ValidBytes(line) {
		return row, false
	}
	obj := gjson.ParseBytes(line)
	if !obj.IsObject() {
		return row, false
	}
	const (
		hasPrompt = 1 << iota
		hasID
		hasImage
		hasDockerImage
		hasCwd
		hasToolsets
		hasMetadata
	)
	ok := true
	seen := 0
	var image, dockerImage string
	obj.ForEach(func(k, v gjson.Result) bool {
		bit := 0
		var text *string // set for the string fields
		switch k.Str {
		case "prompt":
			bit, text = hasPrompt, &row.Prompt
		case "id":
			bit, text = hasID, &row.ID
		case "image":
			bit, text = hasImage, &image
		case "docker_image":
			bit, text = hasDockerImage, &dockerImage
		case "cwd":
			bit, text = hasCwd, &row.Cwd
		case "toolsets":
			bit = hasToolsets
			if v.Type == gjson.Null {
				break
			}
			if !v.IsArray() {
				ok = false
				break
			}
			v.ForEach(func(_, ts gjson.Result) bool {
				if ts.Type != gjson.String || !IsKnownToolset(ts.Str) {
					ok = false
					return false
				}
				row.Toolsets = append(row.Toolsets, ts.Str)
				return true
			})
			if len(row.Toolsets) == 0 {
				ok = false
			}
		case "metadata":
			bit = hasMetadata
			if v.Type == gjson.Null {
				break
			}
			if !v.IsObject() {
				ok = false
				break
			}
			row.Metadata = append([]byte(nil), v.Raw...)
		default:
			// Escaped or unknown keys: unknown ones are ignored; an escaped
			// spelling of a known key is left to the slow path.
			if k.Raw != `"`+k.Str+`"` {
				ok = false
			}
		}
		if text != nil {
			// Every string field but prompt may also be null.
			if v.Type != gjson.String && (v.Type != gjson.Null || bit == hasPrompt) {
				ok = false
			}
			*text = v.Str
			if bit == hasCwd && v.Type == gjson.String && cwdProblem(v.Str) != "" {
				ok = false
			}
		}
		if bit != 0 {
			if seen&bit != 0 { // duplicate key: let encoding/json decide
				ok = false
			}
			seen |= bit
		}
		return ok
	})
	if !ok || seen&hasPrompt == 0 || row.Prompt == "" {
		return InputRow{}, false
	}
	if image != "" && dockerImage != "" && image != dockerImage {
		return InputRow{}, false
	}
	row.Image = image
	if row.Image == "" {
		row.Image = dockerImage
	}
	return row, true
}
