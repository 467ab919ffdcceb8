package compress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// BatchFile journals, in the output folder, every summary request sent
// through the Batch API: which requests form which group, the input file a
// group was uploaded as, the batch created from it, each request's result
// and how the batch ended. A killed run's --resume reads it back, polls the
// same batches and submits nothing twice.
const BatchFile = "compress_batches.jsonl"

// Batch-fallback policies: what happens to a request that failed inside
// BatchOptions.Attempts batches.
const (
	BatchFallbackNone   = ""       // the summary fails (summary_failed; --resume tries again)
	BatchFallbackDirect = "direct" // it is sent once more as a direct call
)

// BatchOptions configure compress's batch modes. API sends summary requests
// through the Batch API; Export and Import work offline (a file of requests
// in the batch input format out, a file of results in). Zero values mean
// defaults.
type BatchOptions struct {
	// API sends every summary request through the Batch API (Client).
	API bool
	// Export writes every summary request that has no result yet to this
	// file, in the batch input format; their rows stay pending.
	Export string
	// Import reads this batch output file (the API's, or vllm run-batch's)
	// first; rows whose requests are answered there finish, the others stay
	// pending (or go to Export).
	Import string
	// Client speaks the Batch API and builds request bodies; required.
	Client *llm.BatchClient
	// Direct answers requests that failed Attempts times when Fallback is
	// BatchFallbackDirect.
	Direct   llm.Client
	Fallback string
	// DirectWorkers bounds the direct calls of the fallback made at once
	// (0: no bound). Run sets it to --workers: under the Batch API a
	// worker is a direct call, not a row waiting on a batch (see
	// BatchRowsInFlight).
	DirectWorkers int
	// MaxRequests and MaxBytes split the requests into batches (defaults
	// llm.BatchMaxRequests and llm.BatchMaxBytes).
	MaxRequests int
	MaxBytes    int
	// Collect is how long the batcher waits for more requests after the
	// last one before it submits what it has (default 2s); a full batch
	// goes at once.
	Collect time.Duration
	// PollMin and PollMax bound the interval between status polls: it
	// starts at PollMin, doubles while nothing changes, up to PollMax
	// (defaults 5s and 1m), and is back at PollMin after any change.
	PollMin, PollMax time.Duration
	// Attempts is how many batches one request may fail in during one run
	// before it falls back or fails (default 3).
	Attempts int
	// Status, when set, gets a line each time a batch changes state or
	// counts.
	Status io.Writer

	// meter holds the run's --max-cost in batch modes (set by Run from
	// the summary price and the tokenizer); the zero value meters nothing.
	meter batchMeter
}

// batchMeter is how the batcher charges the run budget (the row's, given
// with each call). A request is reserved at project(req, batch) before it
// joins a batch, so a batch only ever holds requests the cap can pay for;
// the reservation is replaced by the reply's real cost at price when the
// row takes the reply, and released when the request failed (a failed
// batch request is not billed).
type batchMeter struct {
	price   *cost.Price
	project func(req llm.Request, batch bool) float64
}

// projected is what req may cost at most (0 without a price).
func (m batchMeter) projected(req llm.Request, batch bool) float64 {
	if m.price == nil || m.project == nil {
		return 0
	}
	return m.project(req, batch)
}

// cost is what a reply cost (0 without a price).
func (m batchMeter) cost(resp llm.Response) float64 {
	if m.price == nil {
		return 0
	}
	return m.price.Cost(resp.Usage, resp.Batch)
}

func (o *BatchOptions) enabled() bool { return o.API || o.Export != "" || o.Import != "" }

func (o *BatchOptions) fill() error {
	if o.Client == nil {
		return errors.New("batch: a batch client is required")
	}
	switch o.Fallback {
	case BatchFallbackNone:
	case BatchFallbackDirect:
		if o.Direct == nil {
			return errors.New("batch: fallback direct needs a direct client")
		}
	default:
		return fmt.Errorf("batch: fallback %q is not direct", o.Fallback)
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = llm.BatchMaxRequests
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = llm.BatchMaxBytes
	}
	if o.Collect <= 0 {
		o.Collect = 2 * time.Second
	}
	if o.PollMin <= 0 {
		o.PollMin = 5 * time.Second
	}
	if o.PollMax < o.PollMin {
		o.PollMax = max(time.Minute, o.PollMin)
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	return nil
}

// batchEntry is one journal line; T says which fields are set.
type batchEntry struct {
	T      string         `json:"t"`             // "group", "file", "batch", "res", "end"
	Group  string         `json:"g,omitempty"`   // group id (group, file, batch, end)
	IDs    []string       `json:"ids,omitempty"` // custom_ids (group)
	USD    []float64      `json:"usd,omitempty"` // projected cost of each of IDs (group; with a price)
	File   string         `json:"f,omitempty"`   // input file id (file)
	Batch  string         `json:"b,omitempty"`   // batch id (batch)
	ID     string         `json:"id,omitempty"`  // custom_id (res)
	Result *journalResult `json:"r,omitempty"`   // reply (res)
	Err    string         `json:"e,omitempty"`   // failure (res) or batch end status (end)
}

type journalResult struct {
	Content   string        `json:"c"`
	Reasoning string        `json:"rs,omitempty"`
	Finish    string        `json:"fr"`
	Usage     schemas.Usage `json:"u"`
}

// request is the state of one custom_id.
type request struct {
	id    string
	line  []byte        // batch input line (nil when loaded from the journal)
	group *group        // the live group it was submitted in; nil when none
	done  chan struct{} // closed once resp/err are set
	resp  llm.Response
	err   error
	local bool // err was seen by this run (counts toward Attempts)
	// projected is what the request may cost at most, reserved in the
	// run budget when it was queued (or, on --resume, held for a request
	// a killed run submitted); reserved is what is still reserved for it
	// under the row key: replaced by the real cost when a row takes the
	// reply, released when it failed.
	projected float64
	reserved  float64
}

// group is one batch of requests.
type group struct {
	id      string
	ids     []string
	file    string
	batch   string
	status  string
	counts  [3]int // total, completed, failed
	created bool   // batch known to exist
}

// batcher turns summary calls into Batch API requests (summaryClient). A row's
// n-th call gets the custom_id KEY/n/HASH/ATTEMPT, so a rerun of the same
// row after a crash asks for the same ids and finds them in the journal.
type batcher struct {
	o BatchOptions
	j *outdir.Journal
	// slots bounds the direct calls at once (o.DirectWorkers; nil: none).
	slots chan struct{}
	ctx   context.Context // the batcher's life; ended by close
	hard  context.Context // the run's own context: a hard stop ends every wait

	mu      sync.Mutex
	reqs    map[string]*request
	groups  map[string]*group
	queue   []*request
	qbytes  int
	lastAdd time.Time
	wake    chan struct{} // poke the submitter
	poke    chan struct{} // poke the poller

	export   map[string]bool
	exportTo *os.File
	exported int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openBatcher reads the journal of dir (fresh removes it), imports
// o.Import, and with o.API starts submitting and polling; groups a killed
// run left in flight are polled again, and a group uploaded but not yet
// seen as a batch is looked up by its input file before anything is
// created.
func openBatcher(ctx context.Context, dir string, fresh bool, o BatchOptions) (*batcher, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, BatchFile)
	j, err := outdir.OpenJournal(path, fresh)
	if err != nil {
		return nil, err
	}
	b := &batcher{o: o, j: j, reqs: map[string]*request{}, groups: map[string]*group{},
		wake: make(chan struct{}, 1), poke: make(chan struct{}, 1), export: map[string]bool{}}
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.hard = ctx
	if o.DirectWorkers > 0 {
		b.slots = make(chan struct{}, o.DirectWorkers)
	}
	if err := b.load(path); err != nil {
		_ = j.Close()
		return nil, err
	}
	if o.Import != "" {
		if err := b.importResults(o.Import); err != nil {
			_ = j.Close()
			return nil, err
		}
	}
	if o.Export != "" {
		f, err := os.CreateTemp(filepath.Dir(o.Export), "."+filepath.Base(o.Export)+".tmp*")
		if err != nil {
			_ = j.Close()
			return nil, fmt.Errorf("batch export: %w", err)
		}
		b.exportTo = f
	}
	if o.API {
		b.wg.Add(2)
		go b.submitter()
		go b.poller()
	}
	return b, nil
}

// load rebuilds the state of every request and group from the journal.
func (b *batcher) load(path string) error {
	return outdir.ScanJournal(path, func(line []byte) error {
		var e batchEntry
		if json.Unmarshal(line, &e) != nil {
			return nil
		}
		switch e.T {
		case "group":
			b.groups[e.Group] = &group{id: e.Group, ids: e.IDs}
			if len(e.USD) == len(e.IDs) {
				for i, id := range e.IDs {
					b.req(id).projected = e.USD[i]
				}
			}
		case "file":
			if g := b.groups[e.Group]; g != nil {
				g.file = e.File
				for _, id := range g.ids {
					r := b.req(id)
					if r.group == nil && !isClosed(r.done) {
						r.group = g
					}
				}
			}
		case "batch":
			if g := b.groups[e.Group]; g != nil {
				g.batch, g.created = e.Batch, true
			}
		case "res":
			r := b.req(e.ID)
			if isClosed(r.done) && r.err == nil {
				return nil // a reply is never replaced
			}
			if isClosed(r.done) {
				r.done = make(chan struct{})
			}
			if e.Result != nil {
				r.resp = e.Result.response()
				r.err = nil
			} else {
				r.err = errors.New(e.Err)
			}
			r.group = nil
			close(r.done)
		case "end":
			if g := b.groups[e.Group]; g != nil {
				g.status = e.Err
				delete(b.groups, e.Group)
				for _, id := range g.ids {
					if r := b.reqs[id]; r != nil && r.group == g {
						r.group = nil
					}
				}
			}
		}
		return nil
	})
}

func (r *journalResult) response() llm.Response {
	return llm.Response{Message: schemas.Message{Role: "assistant", Content: r.Content, Reasoning: r.Reasoning},
		FinishReason: r.Finish, Usage: r.Usage, Attempts: 1, Batch: true}
}

// hold charges the run budget, at the start of a run (the compress
// stage's Preflight), with what the batch journal says was spent or is
// being spent but is not in the ledger: every request of a row not done
// that a batch answered (its real cost, charged once over the folder's
// runs by its custom_id: the spend journal may hold it already) or that
// is in a batch not yet collected (its projected cost, journalled with its
// group, held whatever the cap: it is paid for already). A --resume thus
// counts a killed or capped run's batches against --max-cost; a held
// projection is replaced by the real cost when its row takes the reply.
func (b *batcher) hold(budget *cost.Budget, done func(key string) bool) {
	if budget == nil || b.o.meter.price == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, r := range b.reqs {
		key := rowOfID(id)
		if key == "" || done(key) || r.reserved > 0 {
			continue
		}
		switch {
		case isClosed(r.done) && r.err == nil:
			// Answered: paid, charged now unless a run already did.
			budget.AdjustOnce(key, callOfID(id), id, 0, b.o.meter.cost(r.resp))
		case !isClosed(r.done) && r.group != nil && r.projected > 0:
			// In a batch not collected yet: paid once it ends.
			budget.Hold(key, r.projected)
			r.reserved = r.projected
		}
	}
}

// callOfID is the call number of a custom_id made by requestID (0 when id
// is not one).
func callOfID(id string) int {
	parts := strings.Split(id, "/")
	if len(parts) < 4 {
		return 0
	}
	n, _ := strconv.Atoi(parts[len(parts)-3])
	return n
}

// rowOfID is the row key of a custom_id made by requestID ("" when id is
// not one).
func rowOfID(id string) string {
	s := id
	for range 3 {
		i := strings.LastIndexByte(s, '/')
		if i < 0 {
			return ""
		}
		s = s[:i]
	}
	return s
}

// req returns the state of id, creating it; the caller holds mu (or is
// loading).
func (b *batcher) req(id string) *request {
	r := b.reqs[id]
	if r == nil {
		r = &request{id: id, done: make(chan struct{})}
		b.reqs[id] = r
	}
	return r
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// summary answers req, the row's next summary call, from the journal or
// a batch: it blocks until the request's batch has ended (hours, with the
// real API), or returns pipeline.ErrDeferred in the offline modes when no
// result is at hand. It counts the call in row.n. With a run budget
// (row.budget) a request joins a batch only once its
// projected cost is reserved; one the cap cannot pay for is not queued and
// Chat returns pipeline.ErrDeferred wrapping cost.ErrBudget (the row stays
// pending for --resume --max-cost HIGHER). A row whose request is queued
// keeps waiting for it when the budget ends the stages' context (the
// request is paid for); a hard stop ends the wait.
func (b *batcher) summary(ctx context.Context, rc *rowCall, req llm.Request) (llm.Response, error) {
	rc.n++
	body, err := b.o.Client.Body(req)
	if err != nil {
		return llm.Response{}, err
	}
	budget := rc.budget
	fails := 0
	// The projection (a tokenizer pass over the prompt) is made once, out
	// of mu, the first time a request is to be queued; every attempt has
	// the same prompt.
	usd, projected := 0.0, false
	for a := 1; ; {
		id := requestID(rc.key, rc.n, body, a)
		b.mu.Lock()
		r := b.req(id)
		switch {
		case isClosed(r.done):
			// The reply (or failure) replaces what was reserved for it.
			used := 0.0
			if r.err == nil {
				used = b.o.meter.cost(r.resp)
			}
			budget.AdjustOnce(rc.key, rc.n, id, r.reserved, used)
			r.reserved = 0
			b.mu.Unlock()
			if r.err == nil {
				return r.resp, nil
			}
			if r.local {
				fails++
				if fails >= b.o.Attempts {
					if b.o.Fallback == BatchFallbackDirect {
						return b.direct(ctx, rc, req)
					}
					return llm.Response{Attempts: 1}, fmt.Errorf("batch request %s: %w", id, r.err)
				}
			}
			a++
			continue
		case r.group != nil && !b.o.API:
			// In a batch a --batch run submitted: the next --batch run
			// collects it; offline it stays pending.
			b.mu.Unlock()
			return llm.Response{}, fmt.Errorf("batch request %s is in batch group %s: %w", id, r.group.id, pipeline.ErrDeferred)
		case r.group != nil:
			// Submitted by this run or a killed one: wait for its batch.
		case !b.o.API:
			b.exportLine(id, body)
			b.mu.Unlock()
			return llm.Response{}, fmt.Errorf("batch request %s has no result yet: %w", id, pipeline.ErrDeferred)
		default:
			if r.line == nil {
				if !projected {
					b.mu.Unlock()
					usd, projected = b.o.meter.projected(req, true), true
					continue // the request's state may have changed meanwhile
				}
				if err := budget.Reserve(rc.key, usd); err != nil {
					b.mu.Unlock()
					return llm.Response{}, fmt.Errorf("batch request %s not submitted: %w: %w", id, pipeline.ErrDeferred, err)
				}
				line, err := llm.Line(id, body)
				if err != nil {
					budget.Adjust(rc.key, rc.n, usd, 0)
					b.mu.Unlock()
					return llm.Response{}, err
				}
				r.line, r.projected, r.reserved = line, usd, usd
				b.queue = append(b.queue, r)
				b.qbytes += len(line)
				b.lastAdd = time.Now()
				select {
				case b.wake <- struct{}{}:
				default:
				}
			}
		}
		done := r.done
		b.mu.Unlock()
		if err := b.wait(ctx, id, done); err != nil {
			return llm.Response{}, err
		}
	}
}

// wait blocks until done is closed. The stages' context ending with cause
// cost.ErrBudget (the run's --grace after the cap was reached) does not end
// it: the request is in a batch already, paid for, and its reply is
// committed rather than bought again by --resume. A hard stop (the run's
// own context) or closing the batcher does.
func (b *batcher) wait(ctx context.Context, id string, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), cost.ErrBudget) {
			return ctx.Err()
		}
	case <-b.ctx.Done():
		return fmt.Errorf("batch: closed while waiting for %s", id)
	}
	select {
	case <-done:
		return nil
	case <-b.hard.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return fmt.Errorf("batch: closed while waiting for %s", id)
	}
}

// direct answers req with a direct call (--batch-fallback direct), within
// the run budget: its projected cost at direct prices is reserved (and
// journalled) first and replaced by what it cost. It waits for one of o.DirectWorkers slots.
func (b *batcher) direct(ctx context.Context, rc *rowCall, req llm.Request) (llm.Response, error) {
	if b.slots != nil {
		select {
		case b.slots <- struct{}{}:
			defer func() { <-b.slots }()
		case <-ctx.Done():
			return llm.Response{}, fmt.Errorf("batch fallback: %w", ctx.Err())
		}
	}
	// Reserved in the spend journal before it goes out (a kill leaves it
	// counted), settled with what it cost.
	budget := rc.budget
	if b.o.meter.price == nil {
		budget = nil // unpriced: nothing to reserve or charge
	}
	res, err := budget.Begin(ctx, rc.key, rc.n, b.o.meter.projected(req, false))
	if err != nil {
		return llm.Response{}, fmt.Errorf("batch fallback: %w: %w", pipeline.ErrDeferred, err)
	}
	resp, err := b.o.Direct.Chat(ctx, req)
	used := 0.0
	if err == nil {
		used = b.o.meter.cost(resp)
	}
	budget.End(res, used)
	return resp, err
}

// requestID is the custom_id of attempt a of the n-th summary call of the
// row key with this body: stable across runs, so a resumed run finds what a
// killed one submitted.
func requestID(key string, n int, body []byte, a int) string {
	h := fnv.New64a()
	_, _ = h.Write(body)
	return key + "/" + strconv.Itoa(n) + "/" + strconv.FormatUint(h.Sum64(), 36) + "/" + strconv.Itoa(a)
}

// exportLine writes one request to the export file once; the caller holds mu.
func (b *batcher) exportLine(id string, body []byte) {
	if b.exportTo == nil || b.export[id] {
		return
	}
	line, err := llm.Line(id, body)
	if err == nil {
		_, err = b.exportTo.Write(line)
	}
	if err == nil {
		b.export[id] = true
		b.exported++
	}
}

// importResults journals every result of a batch output file.
func (b *batcher) importResults(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("batch import: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) == 0 {
			continue
		}
		res, err := b.o.Client.ParseResult(sc.Bytes())
		if err != nil {
			return fmt.Errorf("batch import %s:%d: %w", path, n, err)
		}
		if err := b.settle(res, false); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("batch import %s:%d: %w", path, n+1, err)
	}
	return b.j.Append(nil, true)
}

// settle journals and delivers one result. local says the failure (if any)
// happened in this run.
func (b *batcher) settle(res llm.BatchResult, local bool) error {
	e := batchEntry{T: "res", ID: res.CustomID}
	if res.Err != nil {
		e.Err = res.Err.Error()
	} else {
		m := res.Response.Message
		e.Result = &journalResult{Content: m.Content, Reasoning: m.Reasoning, Finish: res.Response.FinishReason, Usage: res.Response.Usage}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.req(res.CustomID)
	if isClosed(r.done) {
		if r.err == nil {
			return nil
		}
		r.done = make(chan struct{})
	}
	if err := b.appendEntry(e, false); err != nil {
		return err
	}
	if e.Result != nil {
		r.resp, r.err = e.Result.response(), nil
	} else {
		r.err, r.local = res.Err, local
	}
	r.group = nil
	close(r.done)
	return nil
}

func (b *batcher) appendEntry(e batchEntry, durable bool) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := b.j.Append(append(line, '\n'), durable); err != nil {
		return fmt.Errorf("batch journal: %w", err)
	}
	return nil
}

// submitter sends queued requests as batches: at once when a batch is
// full, else once no request came for Collect.
func (b *batcher) submitter() {
	defer b.wg.Done()
	b.adopt()
	for {
		b.mu.Lock()
		var take []*request
		wait := b.o.Collect
		if len(b.queue) > 0 {
			idle := time.Since(b.lastAdd)
			if len(b.queue) >= b.o.MaxRequests || b.qbytes >= b.o.MaxBytes || idle >= b.o.Collect {
				take, b.queue, b.qbytes = b.queue, nil, 0
			} else {
				wait = b.o.Collect - idle
			}
		}
		b.mu.Unlock()
		if len(take) > 0 {
			b.submitAll(take)
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-b.ctx.Done():
			t.Stop()
			return
		case <-b.wake:
			t.Stop()
			b.mu.Lock()
			full := len(b.queue) >= b.o.MaxRequests || b.qbytes >= b.o.MaxBytes
			b.mu.Unlock()
			if !full {
				// More may follow: wait out the collect window.
				select {
				case <-b.ctx.Done():
					return
				case <-time.After(min(b.o.Collect, 50*time.Millisecond)):
				}
			}
		case <-t.C:
		}
	}
}

// submitAll splits reqs under the limits and submits each part.
func (b *batcher) submitAll(reqs []*request) {
	for len(reqs) > 0 {
		n, size := 0, 0
		for n < len(reqs) && n < b.o.MaxRequests && (n == 0 || size+len(reqs[n].line) <= b.o.MaxBytes) {
			size += len(reqs[n].line)
			n++
		}
		if err := b.submit(reqs[:n]); err != nil {
			b.fail(reqs[:n], err)
		}
		reqs = reqs[n:]
	}
}

// submit journals the group, uploads its file, journals the file id and
// creates the batch. Journalling the file before creating the batch is
// what lets a resumed run find a batch it created but could not note.
func (b *batcher) submit(reqs []*request) error {
	g := &group{id: newGroupID()}
	var (
		data  []byte
		usd   []float64
		spend bool
	)
	for _, r := range reqs {
		g.ids = append(g.ids, r.id)
		usd = append(usd, r.projected)
		spend = spend || r.projected > 0
		data = append(data, r.line...)
	}
	if !spend {
		usd = nil
	}
	// The projected costs go with the group, so a --resume holds them
	// against the cap until the batch is collected.
	if err := b.appendEntry(batchEntry{T: "group", Group: g.id, IDs: g.ids, USD: usd}, true); err != nil {
		return err
	}
	file, err := b.o.Client.UploadFile(b.ctx, "hermes-pipe-"+g.id+".jsonl", data)
	if err != nil {
		return err
	}
	g.file = file
	b.mu.Lock()
	if err := b.appendEntry(batchEntry{T: "file", Group: g.id, File: file}, true); err != nil {
		b.mu.Unlock()
		return err
	}
	b.groups[g.id] = g
	for _, r := range reqs {
		r.group, r.line = g, nil
	}
	b.mu.Unlock()
	b.create(g)
	return nil
}

// create makes the batch of g, which has an uploaded file: after a failed
// attempt it first looks for a batch already made from that file, so a
// create that reached the server but not back is never repeated.
func (b *batcher) create(g *group) {
	wait := b.o.PollMin
	for first := true; ; first = false {
		if !first {
			if id, ok := b.findBatch(g.file); ok {
				b.noteBatch(g, id)
				return
			}
		}
		bt, err := b.o.Client.CreateBatch(b.ctx, g.file, map[string]string{"hermes_pipe_group": g.id})
		if err == nil {
			b.noteBatch(g, bt.ID)
			return
		}
		b.statusf("batch group %s: create: %v (trying again in %s)", g.id, err, wait)
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, b.o.PollMax)
	}
}

// findBatch looks for a batch made from the input file.
func (b *batcher) findBatch(file string) (string, bool) {
	found := ""
	err := b.o.Client.ListBatches(b.ctx, func(bt llm.Batch) bool {
		if bt.InputFileID == file {
			found = bt.ID
			return false
		}
		return true
	})
	return found, err == nil && found != ""
}

func (b *batcher) noteBatch(g *group, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.appendEntry(batchEntry{T: "batch", Group: g.id, Batch: id}, true); err != nil {
		b.statusf("batch %s: %v", id, err)
	}
	g.batch, g.created = id, true
	select {
	case b.poke <- struct{}{}:
	default:
	}
}

// adopt finishes what a killed run left: groups uploaded whose batch was
// never noted get the batch made from their file, or a new one.
func (b *batcher) adopt() {
	b.mu.Lock()
	var todo []*group
	for _, g := range b.groups {
		if g.file != "" && !g.created {
			todo = append(todo, g)
		}
	}
	b.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	byFile := map[string]string{}
	_ = b.o.Client.ListBatches(b.ctx, func(bt llm.Batch) bool {
		byFile[bt.InputFileID] = bt.ID
		return true
	})
	for _, g := range todo {
		if id, ok := byFile[g.file]; ok {
			b.noteBatch(g, id)
		} else {
			b.create(g)
		}
	}
}

// fail ends reqs with err (local: it counts toward Attempts).
func (b *batcher) fail(reqs []*request, err error) {
	for _, r := range reqs {
		_ = b.settle(llm.BatchResult{CustomID: r.id, Err: err}, true)
	}
}

// poller polls every live batch, with an interval that starts at PollMin
// and doubles while nothing changes, up to PollMax.
func (b *batcher) poller() {
	defer b.wg.Done()
	interval := b.o.PollMin
	for {
		t := time.NewTimer(interval)
		select {
		case <-b.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-b.poke:
			t.Stop()
			interval = b.o.PollMin
			continue
		}
		if b.pollOnce() {
			interval = b.o.PollMin
		} else {
			interval = min(2*interval, b.o.PollMax)
		}
	}
}

// pollOnce reads every live batch once and collects those that ended; it
// reports whether any changed.
func (b *batcher) pollOnce() bool {
	b.mu.Lock()
	var live []*group
	for _, g := range b.groups {
		if g.created {
			live = append(live, g)
		}
	}
	b.mu.Unlock()
	sort.Slice(live, func(i, j int) bool { return live[i].batch < live[j].batch })
	changed := false
	for _, g := range live {
		bt, err := b.o.Client.GetBatch(b.ctx, g.batch)
		if err != nil {
			if b.ctx.Err() == nil {
				b.statusf("batch %s: %v", g.batch, err)
			}
			continue
		}
		counts := [3]int{bt.RequestCounts.Total, bt.RequestCounts.Completed, bt.RequestCounts.Failed}
		if bt.Status != g.status || counts != g.counts {
			changed = true
			g.status, g.counts = bt.Status, counts
			b.statusf("batch %s: %s, %d/%d done, %d failed", g.batch, bt.Status, counts[1], len(g.ids), counts[2])
		}
		if llm.BatchEnded(bt.Status) {
			if err := b.collect(g, bt); err != nil && b.ctx.Err() == nil {
				b.statusf("batch %s: collect: %v", g.batch, err)
			}
		}
	}
	return changed
}

// collect reads the output and error files of an ended batch, journals
// every result, fails the requests it did not answer (expired, cancelled,
// failed batches: they go to a later batch), and journals the end.
func (b *batcher) collect(g *group, bt llm.Batch) error {
	answered := map[string]bool{}
	for _, file := range []string{bt.OutputFileID, bt.ErrorFileID} {
		if file == "" {
			continue
		}
		data, err := b.o.Client.FileContent(b.ctx, file)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			if len(sc.Bytes()) == 0 {
				continue
			}
			res, err := b.o.Client.ParseResult(sc.Bytes())
			if err != nil {
				continue // a line without a custom_id answers nothing
			}
			answered[res.CustomID] = true
			if err := b.settle(res, true); err != nil {
				return err
			}
		}
	}
	// A request the batch never answered goes to a later batch; that
	// counts as a failed attempt only when the batch failed (an expired or
	// cancelled batch says nothing about its requests).
	why := fmt.Errorf("batch %s %s without answering it", bt.ID, bt.Status)
	for _, id := range g.ids {
		if !answered[id] {
			if err := b.settle(llm.BatchResult{CustomID: id, Err: why}, bt.Status == llm.BatchFailed); err != nil {
				return err
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, g.id)
	return b.appendEntry(batchEntry{T: "end", Group: g.id, Err: bt.Status}, true)
}

func (b *batcher) statusf(format string, args ...any) {
	if b.o.Status != nil {
		fmt.Fprintf(b.o.Status, "compress: "+format+"\n", args...)
	}
}

// close stops submitting and polling (batches on the server go on; a
// --resume polls them again), writes the export file and closes the
// journal.
func (b *batcher) close() error {
	b.cancel()
	b.wg.Wait()
	var errs []error
	if b.exportTo != nil {
		tmp := b.exportTo.Name()
		err := b.exportTo.Sync()
		errs = append(errs, err, b.exportTo.Close())
		if err == nil {
			errs = append(errs, os.Rename(tmp, b.o.Export), atomicfile.SyncDir(filepath.Dir(b.o.Export)))
		} else {
			_ = os.Remove(tmp)
		}
		b.exportTo = nil
	}
	errs = append(errs, b.j.Close())
	return errors.Join(errs...)
}

// Exported is how many requests the export file holds.
func (b *batcher) Exported() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exported
}

func newGroupID() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}
