package cluster

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestOpenOutputLocal(t *testing.T) {
	out := t.TempDir()
	noEnv := func(string) string { return "" }
	o, err := OpenOutput(context.Background(), OutputOptions{Out: out, Getenv: noEnv})
	if err != nil || o.Dir != out || o.Filter != nil || o.Finish(context.Background()) != nil {
		t.Fatalf("unsharded: %+v %v", o, err)
	}
	var notice bytes.Buffer
	o, err = OpenOutput(context.Background(), OutputOptions{Out: out, Shard: "1/4", Getenv: noEnv, Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	if o.Dir != filepath.Join(out, "shard-1-of-4") || !strings.Contains(notice.String(), "shard 1/4") {
		t.Fatalf("sharded: dir %s notice %q", o.Dir, notice.String())
	}
	// The filter keeps exactly the keys the shard owns.
	sp := Spec{Index: 1, Count: 4}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if o.Filter(&schemas.Record{Key: key}) != sp.Owns(key) {
			t.Fatalf("filter disagrees with Owns on %q", key)
		}
	}
	// Another shard count in the same folder, or a malformed shard, is a
	// usage error that keeps its own message.
	_, err = OpenOutput(context.Background(), OutputOptions{Out: out, Shard: "0/3", Getenv: noEnv})
	if !errors.Is(err, ErrUsage) || strings.HasPrefix(err.Error(), ErrUsage.Error()) {
		t.Fatalf("another count: %v", err)
	}
	if _, err = OpenOutput(context.Background(), OutputOptions{Out: out, Shard: "5/4", Getenv: noEnv}); !errors.Is(err, ErrUsage) {
		t.Fatalf("index past the count: %v", err)
	}
}
