package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestDeclaredArtifactsPassVerify: files a mode declares are accepted by
// Verify; any other file is still reported.
func TestDeclaredArtifactsPassVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, err := OpenOutput(dir, OutputOptions{Kind: "test", Artifacts: []string{"report.json"}})
	if err != nil {
		t.Fatal(err)
	}
	src := SliceSource([]*schemas.Record{{Key: "a#0"}})
	if _, err := Run(context.Background(), Options{}, src, []Stage{completeStage()}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(dir, "report.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir); err != nil || !rep.OK() {
		t.Fatalf("verify with a declared artifact: %+v, %v", rep.Problems, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil || rep.OK() || !strings.Contains(rep.Problems[0].String(), "other.json") {
		t.Fatalf("verify with an undeclared file: %+v, %v", rep.Problems, err)
	}
}
