package schemas

import (
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// parseInputRowFast accepts the common, valid row in one pass without
// building a map; it returns ok=false for anything unusual (invalid JSON,
// wrong types, unknown toolsets, duplicate keys), which the slow path then
// explains. Resuming a 1,000,000-row run parses every row, so this matters:
// the walk over the members stays one closure (a method value would add a
// call per member), and only toolsets and metadata have their own steps.
func parseInputRowFast(line []byte) (InputRow, bool) {
	if _, deep := tooDeep(line); deep || !utf8.Valid(line) || !gjson.ValidBytes(line) {
		return InputRow{}, false
	}
	obj := gjson.ParseBytes(line)
	if !obj.IsObject() {
		return InputRow{}, false
	}
	f := fastRow{ok: true}
	// Each member; false (stopping the walk) as soon as the row needs the
	// slow path.
	obj.ForEach(func(k, v gjson.Result) bool {
		bit := 0
		var text *string // set for the string fields
		switch k.Str {
		case "prompt":
			bit, text = hasPrompt, &f.row.Prompt
		case "id":
			bit, text = hasID, &f.row.ID
		case "image":
			bit, text = hasImage, &f.image
		case "docker_image":
			bit, text = hasDockerImage, &f.dockerImage
		case "cwd":
			bit, text = hasCwd, &f.row.Cwd
		case "verify":
			bit, text = hasVerify, &f.row.Verify
		case "answer":
			bit, text = hasAnswer, &f.row.Answer
		case "toolsets":
			bit = hasToolsets
			f.toolsets(v)
		case "metadata":
			bit = hasMetadata
			f.metadata(v)
		default:
			// Escaped or unknown keys: unknown ones are ignored; an escaped
			// spelling of a known key is left to the slow path.
			if k.Raw != `"`+k.Str+`"` {
				f.ok = false
			}
		}
		if text != nil {
			// Every string field but prompt may also be null.
			if v.Type != gjson.String && (v.Type != gjson.Null || bit == hasPrompt) {
				f.ok = false
			}
			*text = v.Str
			if bit == hasCwd && v.Type == gjson.String && cwdProblem(v.Str) != "" {
				f.ok = false
			}
			if bit&(hasVerify|hasAnswer) != 0 && v.Type == gjson.String && checkProblem(v.Str) != "" {
				f.ok = false
			}
		}
		if bit != 0 {
			if f.seen&bit != 0 { // duplicate key: let encoding/json decide
				f.ok = false
			}
			f.seen |= bit
		}
		return f.ok
	})
	return f.finish()
}

// The bits of fastRow.seen, one per known key.
const (
	hasPrompt = 1 << iota
	hasID
	hasImage
	hasDockerImage
	hasCwd
	hasToolsets
	hasMetadata
	hasVerify
	hasAnswer
)

// fastRow is parseInputRowFast's state while it walks the row's members.
type fastRow struct {
	row                InputRow
	image, dockerImage string
	seen               int  // has* bits of the known keys met so far
	ok                 bool // false once the row is left to the slow path
}

// toolsets takes the toolsets member: null, or a non-empty array of known
// toolset names.
func (f *fastRow) toolsets(v gjson.Result) {
	if v.Type == gjson.Null {
		return
	}
	if !v.IsArray() {
		f.ok = false
		return
	}
	v.ForEach(func(_, ts gjson.Result) bool {
		if ts.Type != gjson.String || !IsKnownToolset(ts.Str) {
			f.ok = false
			return false
		}
		f.row.Toolsets = append(f.row.Toolsets, ts.Str)
		return true
	})
	if len(f.row.Toolsets) == 0 {
		f.ok = false
	}
}

// metadata takes the metadata member: null or an object, kept as raw JSON.
func (f *fastRow) metadata(v gjson.Result) {
	if v.Type == gjson.Null {
		return
	}
	if !v.IsObject() {
		f.ok = false
		return
	}
	f.row.Metadata = append([]byte(nil), v.Raw...)
}

// finish checks what only the whole row shows (a non-empty prompt, image
// and docker_image agreeing) and returns the row, or ok=false.
func (f *fastRow) finish() (InputRow, bool) {
	if !f.ok || f.seen&hasPrompt == 0 || f.row.Prompt == "" {
		return InputRow{}, false
	}
	if f.image != "" && f.dockerImage != "" && f.image != f.dockerImage {
		return InputRow{}, false
	}
	f.row.Image = f.image
	if f.row.Image == "" {
		f.row.Image = f.dockerImage
	}
	return f.row, true
}
