package llm

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChat measures one LLM call end to end — client request encoding,
// HTTP over loopback, the fake server's decode/plan/encode, and the client's
// decode and conversion — as CPU time per call (cpu-ms/call), with many calls
// in flight. The request looks like a mid-rollout agent turn: a 2 KB system
// prompt, one tool, an assistant tool call and its result.
func BenchmarkChat(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			sc := []fakellm.Script{{Name: "agent", Match: "^task", Steps: []fakellm.Step{
				{Reasoning: "look first", ToolCalls: []fakellm.ToolCallSpec{{Name: "terminal", Arguments: []byte(`{"command":"ls -la"}`)}}},
				{Reasoning: "now answer", Content: "The listing shows {{last_tool}}."},
			}}}
			srv := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: sc}))
			defer srv.Close()
			ctl := NewController(ControllerOptions{Max: 256})
			c, err := New(Options{BaseURL: srv.URL + "/v1", Model: "bench", Stream: stream, Controller: ctl})
			if err != nil {
				b.Fatal(err)
			}
			system := strings.Repeat("You are a careful agent. ", 80)
			var seq atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					req := Request{
						Tools: []schemas.Tool{terminalTool},
						Messages: []schemas.Message{
							{Role: "system", Content: system},
							{Role: "user", Content: fmt.Sprintf("task %d: list the files", n)},
							{Role: "assistant", ToolCalls: []schemas.ToolCall{{ID: "c1", Type: "function", Function: schemas.FunctionCall{Name: "terminal", Arguments: `{"command":"ls -la"}`}}}},
							{Role: "tool", ToolCallID: "c1", Content: "total 8\ndrwxr-xr-x 2 u u 4096 a\n-rw-r--r-- 1 u u 12 notes.txt"},
						},
					}
					resp, err := c.Chat(context.Background(), req)
					if err != nil {
						b.Error(err)
						return
					}
					if !strings.HasPrefix(resp.Message.Content, "The listing shows total 8") {
						b.Errorf("unexpected reply %q", resp.Message.Content)
						return
					}
				}
			})
			b.StopTimer()
			cpu := cpuTime(b) - start
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/call")
		})
	}
}
