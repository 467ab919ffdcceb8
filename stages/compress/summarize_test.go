package compress

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// scriptedClient answers Chat with its replies in turn and counts calls.
type scriptedClient struct {
	replies []llm.Response
	errs    []error
	calls   int
}

func (c *scriptedClient) Chat(_ context.Context, _ llm.Request) (llm.Response, error) {
	i := c.calls
	c.calls++
	return c.replies[i], c.errs[i]
}

// TestSummarizerDoesNotRetryTheClient: a failure the client returns has had
// the client's retries, so the summariser asks once and counts every HTTP
// attempt the client spent; a reply cut at max_tokens is asked again (a new
// answer, not a fault), and each summary call is charged to the row's key
// in the budget it was given.
func TestSummarizerDoesNotRetryTheClient(t *testing.T) {
	failed := &llm.Error{Op: "chat completions", Status: 503, Attempts: 3, Retryable: true, Err: errors.New("http 503")}
	c := &scriptedClient{replies: []llm.Response{{Attempts: 3}}, errs: []error{failed}}
	sum, err := newLLMSummarizer(SummaryOptions{Client: c, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var m RowMetrics
	if _, err := sum(bg, &rowCall{key: "r1"}, "turns", &m); !errors.Is(err, llm.ErrRetryable) || c.calls != 1 {
		t.Fatalf("after a failure the client retried: %v, %d Chat calls; want the failure after one", err, c.calls)
	}
	if m.SummarizationCalls != 3 || m.SummarizationErrs != 3 {
		t.Errorf("metrics count %d calls, %d errors; want the client's 3 attempts", m.SummarizationCalls, m.SummarizationErrs)
	}

	usage := schemas.Usage{PromptTokens: 1000, CompletionTokens: 100}
	cut := llm.Response{Message: schemas.Message{Content: "half"}, FinishReason: "length", Usage: usage, Attempts: 1}
	ok := llm.Response{Message: schemas.Message{Content: "done"}, FinishReason: "stop", Usage: usage, Attempts: 1}
	c = &scriptedClient{replies: []llm.Response{cut, ok}, errs: []error{nil, nil}}
	price := cost.Price{Input: 1e-6, Output: 1e-6}
	sum, err = newLLMSummarizer(SummaryOptions{Client: c, Model: "m", Price: &price})
	if err != nil {
		t.Fatal(err)
	}
	budget := cost.NewBudget(1, 0)
	var j callJournal
	budget.Keep(&j, nil)
	m = RowMetrics{}
	text, err := sum(bg, &rowCall{key: "r2", budget: budget}, "turns", &m)
	if err != nil || !strings.HasPrefix(text, SummaryPrefix) || c.calls != 2 {
		t.Fatalf("cut then whole: %q %v after %d calls", text, err, c.calls)
	}
	if want := 2 * price.Cost(usage, false); budget.Spent() != want {
		t.Errorf("budget spent $%g, want $%g (both calls charged)", budget.Spent(), want)
	}
	if got, want := strings.Join(j, ","), "reserve 1 r2/1,r2/1 settles 1,reserve 2 r2/2,r2/2 settles 2"; got != want {
		t.Errorf("journalled calls %s, want %s (each call reserved before it goes out, then settled)", got, want)
	}
}

// callJournal keeps the key and call number of each reservation and
// charge a budget journals, and the reservation each charge settles.
type callJournal []string

func (j *callJournal) Reserved(key string, call int, res int64, _ float64) error {
	*j = append(*j, "reserve "+strconv.FormatInt(res, 10)+" "+key+"/"+strconv.Itoa(call))
	return nil
}

func (j *callJournal) Capped(float64) {}

func (j *callJournal) Charged(key string, call int, _ string, res int64, _ float64) {
	*j = append(*j, key+"/"+strconv.Itoa(call)+" settles "+strconv.FormatInt(res, 10))
}
