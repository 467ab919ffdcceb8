package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// TestRecordedPromptsOnlyRegularFiles: the prompts path a folder's run.json
// records is followed to a regular file only; a device, a pipe, a folder or
// a missing path is not read (merge and status then check nothing).
func TestRecordedPromptsOnlyRegularFiles(t *testing.T) {
	d := t.TempDir()
	file := filepath.Join(d, "prompts.jsonl")
	os.WriteFile(file, []byte(`{"prompt":"x"}`+"\n"), 0o644)
	for p, want := range map[string]string{file: file, "/dev/zero": "", d: "", filepath.Join(d, "gone.jsonl"): "", "": ""} {
		opts, _ := json.Marshal(map[string]any{"prompts": p})
		if got := recordedPrompts(pipeline.Manifest{Kind: "generate", Options: opts}); got != want {
			t.Errorf("%q: %q, want %q", p, got, want)
		}
	}
}
