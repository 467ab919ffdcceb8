package view

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
)

//go:embed assets
var assets embed.FS

// Server serves the viewer of one run. It is read-only: it opens shard files
// for reading and never writes into the run's folders.
type Server struct {
	ixp   atomic.Pointer[Index] // nil while it is being built (bld)
	bld   *building             // nil: opened with its index
	root  string
	token string // "" = no token (loopback)
	mu    sync.Mutex
	rd    map[string]*pipeline.RecordReader
	swe   *swe.Report
	order map[string][]int32 // cached sort orders by sort key
	orig  originals          // compress: where the originals are (original.go)
	tim   runTimings         // the run's timings (timings.go)
}

// NewServer serves ix; root is the run's folder (where swe's report
// is); token, when not empty, must be given by every request (?token= or the
// cookie set on first use).
func NewServer(ix *Index, root, token string) *Server {
	s := newServer(root, token)
	s.ixp.Store(ix)
	return s
}

// idx is the index, nil while it is being built.
func (s *Server) idx() *Index { return s.ixp.Load() }

func newServer(root, token string) *Server {
	s := &Server{root: root, token: token, rd: map[string]*pipeline.RecordReader{}, order: map[string][]int32{}}
	if r, ok, err := swe.LoadReport(root); ok && err == nil {
		// Without the baseline file only the gate's lists show; one that
		// is not a regular file is not read (see BaselineRegular).
		if r.BaselineRegular(root) {
			_ = r.LoadBaseline(root)
		}
		s.swe = r
	}
	return s
}

// Close stops a build still running (its index is not kept) and releases
// the shard files.
func (s *Server) Close() {
	if s.bld != nil {
		s.bld.stopOnce.Do(func() { close(s.bld.prog.stop) })
		<-s.bld.ready
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rd {
		r.Close()
	}
	s.rd = map[string]*pipeline.RecordReader{}
	s.orig.close()
	if s.bld != nil && s.bld.lines != nil { // the build ended: planned is closed
		s.bld.lines.close()
	}
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServer(http.FS(sub))))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := assets.ReadFile("assets/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
	mux.HandleFunc("GET /api/meta", s.meta)
	mux.HandleFunc("GET /api/timings", s.timings)
	mux.HandleFunc("GET /api/records", s.records)
	mux.HandleFunc("GET /api/record/{i}", s.record)
	mux.HandleFunc("GET /api/record/{i}/original", s.original)
	mux.HandleFunc("GET /api/record/{i}/near", s.near)
	mux.HandleFunc("GET /raw/{i}", s.raw)
	return s.guard(mux)
}

// guard adds the security headers, checks the Host (loopback names only,
// unless a token is required: see hostAllowed) and the Origin (see
// sameOrigin), refuses non-GET and checks the token.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if s.token == "" && !hostAllowed(r) {
			http.Error(w, fmt.Sprintf("misdirected request: this viewer answers to 127.0.0.1, localhost and [::1] on its own port, not to Host %q (for other names start view with a non-loopback --addr and --allow-remote)", r.Host), http.StatusMisdirectedRequest)
			return
		}
		if !sameOrigin(r) {
			http.Error(w, "forbidden: a request from another origin", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		if s.token != "" {
			got := r.URL.Query().Get("token")
			if got == "" {
				if c, err := r.Cookie("hp_token"); err == nil {
					got = c.Value
				}
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
				http.Error(w, "a token is required (printed when view started)", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "hp_token", Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether r's Host header names this viewer on
// loopback: 127.0.0.1, localhost or [::1], with the port the request came in
// on when it gives one. A web page whose name an attacker rebinds to
// 127.0.0.1 sends its own name as Host, so it is refused (DNS rebinding).
func hostAllowed(r *http.Request) bool {
	host, port := r.Host, ""
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	switch strings.ToLower(host) {
	case "127.0.0.1", "localhost", "::1":
	default:
		return false
	}
	if port == "" {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true // not served from a listener (a test calling the handler)
	}
	_, lport, err := net.SplitHostPort(local.String())
	return err == nil && lport == port
}

// sameOrigin reports whether r carries no Origin header (a plain navigation
// or a same-origin GET) or one naming the host r was sent to. A request from
// a page of another origin, or from an opaque one ("null"), is refused
// whatever its method.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) meta(w http.ResponseWriter, r *http.Request) {
	src, err := s.source(r.Context())
	if err != nil {
		httpError(w, err)
		return
	}
	m := src.meta()
	m["swe"] = s.swe != nil
	writeJSON(w, m)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Query is one list request: filters, sort and page.
type Query struct {
	Outcome, Compress, Toolset, Tool string
	Failures                         string // "yes", "no" or ""
	TurnsMin, TurnsMax               int64
	TokensMin, TokensMax             int64
	CostMin, CostMax                 float64
	RewardMin, RewardMax             float64 // NaN = no bound
	Grade                            string  // passed, failed, errored, graded (any of those), ungraded; "" = any
	Text                             string
	Sort                             string // key (prompt_index, sample, key), ledger, turns, tokens, cost, duration, failures, ratio, reward; "-" prefix = descending
	Page, Size                       int
}

func parseQuery(r *http.Request) (Query, error) {
	v := r.URL.Query()
	q := Query{Outcome: v.Get("outcome"), Compress: v.Get("compress"), Toolset: v.Get("toolset"), Tool: v.Get("tool"),
		Failures: v.Get("failures"), Text: v.Get("q"), Sort: v.Get("sort"), Grade: v.Get("grade"),
		TurnsMin: -1, TurnsMax: -1, TokensMin: -1, TokensMax: -1, CostMin: math.NaN(), CostMax: math.NaN(),
		RewardMin: math.NaN(), RewardMax: math.NaN(), Size: 50}
	count := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= 0
	}
	number := func(s string) (float64, bool) {
		n, err := strconv.ParseFloat(s, 64)
		return n, err == nil
	}
	var page, size int64 = int64(q.Page), int64(q.Size)
	for _, err := range []error{
		queryParam(v, "turns_min", &q.TurnsMin, count, "a count"), queryParam(v, "turns_max", &q.TurnsMax, count, "a count"),
		queryParam(v, "tokens_min", &q.TokensMin, count, "a count"), queryParam(v, "tokens_max", &q.TokensMax, count, "a count"),
		queryParam(v, "cost_min", &q.CostMin, number, "a number"), queryParam(v, "cost_max", &q.CostMax, number, "a number"),
		queryParam(v, "reward_min", &q.RewardMin, number, "a number"), queryParam(v, "reward_max", &q.RewardMax, number, "a number"),
		checkGrade(q.Grade), queryParam(v, "page", &page, count, "a count"), queryParam(v, "size", &size, count, "a count"),
	} {
		if err != nil {
			return q, err
		}
	}
	q.Page, q.Size = int(min(page, math.MaxInt32)), int(min(size, math.MaxInt32))
	q.Size = min(max(q.Size, 1), 500)
	if err := checkSort(q.Sort); err != nil {
		return q, err
	}
	return q, nil
}

// sortFields are what a list can be sorted by ("" and "key": the default,
// cat's order).
var sortFields = []string{"", "key", "ledger", "turns", "tokens", "cost", "duration", "failures", "ratio", "reward"}

// checkSort refuses a sort key that is none of sortFields (with or without
// "-" for descending), while the index is built as after.
func checkSort(key string) error {
	if slices.Contains(sortFields, strings.TrimPrefix(key, "-")) {
		return nil
	}
	return fmt.Errorf("%w: sort=%q (key, ledger, turns, tokens, cost, duration, failures, ratio, reward; - for descending)", errBadQuery, key)
}

// queryParam sets *dst from the query parameter name when it is given, or
// says why its text is not what (parse's verdict).
func queryParam[T any](v url.Values, name string, dst *T, parse func(string) (T, bool), what string) error {
	s := v.Get(name)
	if s == "" {
		return nil
	}
	n, ok := parse(s)
	if !ok {
		return fmt.Errorf("%w: %s=%q is not %s", errBadQuery, name, s, what)
	}
	*dst = n
	return nil
}

// matcher reports whether record i passes q's index filters (not the text):
// the one filter of the list, also applied to a record read while the index
// is built, as a one-record index (oneRecord). A toolset or tool the index does not know matches nothing; so does an
// unknown outcome or compression (its position is -1).
func (s *Server) matcher(q Query) (func(i int) bool, error) {
	f, ok := newIndexFilter(s.idx(), q)
	if !ok {
		return func(int) bool { return false }, nil
	}
	// match, with its steps inlined here: one call per record.
	return func(i int) bool {
		return f.categories(i) && f.failures(i) && f.turns(i) && f.tokens(i) && f.cost(i) && f.reward(i)
	}, nil
}

// match reports whether record i passes. Each step is small enough to be
// inlined.
func (f *indexFilter) match(i int) bool {
	return f.categories(i) && f.failures(i) && f.turns(i) && f.tokens(i) && f.cost(i) && f.reward(i)
}

// indexFilter is q's filters resolved against ix once per query:
// dictionary positions and bit masks in place of names, so that testing a
// record compares its columns only.
type indexFilter struct {
	ix           *Index
	q            *Query
	oc, co       int    // q.Outcome's and q.Compress's positions; -1 = no such value
	tsBit, tlBit uint64 // q.Toolset's and q.Tool's bits; 0 = not asked for
}

// newIndexFilter resolves q's names against ix's dictionaries; false: q
// names a toolset or a tool ix has no bit for, so no record matches.
func newIndexFilter(ix *Index, q Query) (*indexFilter, bool) {
	f := &indexFilter{ix: ix, q: &q, oc: -1, co: -1}
	if q.Outcome != "" {
		f.oc = slices.Index(ix.Outcomes, q.Outcome)
	}
	if q.Compress != "" {
		f.co = slices.Index(ix.Compresses, q.Compress)
	}
	var ok bool
	if f.tsBit, ok = nameBit(ix.ToolsetBits, q.Toolset); !ok {
		return nil, false
	}
	if f.tlBit, ok = nameBit(ix.ToolBits, q.Tool); !ok {
		return nil, false
	}
	return f, true
}

// nameBit is name's bit among names (0 when name is ""); false: names does
// not hold it.
func nameBit(names []string, name string) (uint64, bool) {
	if name == "" {
		return 0, true
	}
	i := slices.Index(names, name)
	if i < 0 {
		return 0, false
	}
	return 1 << i, true
}

// categories reports whether record i has the outcome, the compression, the
// toolset and the tool q asks for.
func (f *indexFilter) categories(i int) bool {
	ix, q := f.ix, f.q
	if q.Outcome != "" && int(ix.Outcome[i]) != f.oc || q.Compress != "" && int(ix.Compress[i]) != f.co {
		return false
	}
	return !(f.tsBit != 0 && ix.Toolsets[i]&f.tsBit == 0 || f.tlBit != 0 && ix.Tools[i]&f.tlBit == 0)
}

// failures reports whether record i had tool failures when q asks for
// records with ("yes") or without ("no") them.
func (f *indexFilter) failures(i int) bool {
	switch f.q.Failures {
	case "yes":
		return f.ix.Failures[i] != 0
	case "no":
		return f.ix.Failures[i] == 0
	}
	return true
}

// turns reports whether record i's turns are within q's bounds (a
// negative bound is none).
func (f *indexFilter) turns(i int) bool {
	q := f.q
	return q.TurnsMin < 0 && q.TurnsMax < 0 || inBounds(int64(f.ix.Turns[i]), q.TurnsMin, q.TurnsMax)
}

// tokens reports whether record i's tokens are within q's bounds (a
// negative bound is none).
func (f *indexFilter) tokens(i int) bool {
	q := f.q
	return q.TokensMin < 0 && q.TokensMax < 0 || inBounds(int64(f.ix.Tokens[i]), q.TokensMin, q.TokensMax)
}

// inBounds reports whether v is within [lo, hi], a negative bound being none.
func inBounds(v, lo, hi int64) bool {
	return !(lo >= 0 && v < lo || hi >= 0 && v > hi)
}

// cost reports whether record i's cost is within q's bounds (NaN = none); an
// unpriced record is outside any bound.
func (f *indexFilter) cost(i int) bool {
	q := f.q
	if math.IsNaN(q.CostMin) && math.IsNaN(q.CostMax) {
		return true
	}
	c := float64(f.ix.Cost[i])
	return !(math.IsNaN(c) || !math.IsNaN(q.CostMin) && c < q.CostMin || !math.IsNaN(q.CostMax) && c > q.CostMax)
}

// sorted returns the record positions in the order sort names, computed
// once per sort key and kept (4 bytes per record each).
func (s *Server) sorted(key string) ([]int32, error) {
	desc := strings.HasPrefix(key, "-")
	field := strings.TrimPrefix(key, "-")
	if field == "" || field == "key" {
		field = ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.order[field]; ok {
		return orderView(o, desc), nil
	}
	ix := s.idx()
	var c func(a, b int32) int
	switch field {
	case "":
		return orderView(ix.Order, desc), nil
	case "ledger":
		return orderView(nil, desc), nil
	case "turns":
		c = func(a, b int32) int { return cmp.Compare(ix.Turns[a], ix.Turns[b]) }
	case "tokens":
		c = func(a, b int32) int { return cmp.Compare(ix.Tokens[a], ix.Tokens[b]) }
	case "cost":
		c = func(a, b int32) int { return cmp.Compare(ix.Cost[a], ix.Cost[b]) } // NaN first
	case "duration":
		c = func(a, b int32) int { return cmp.Compare(ix.DurationMS[a], ix.DurationMS[b]) }
	case "failures":
		c = func(a, b int32) int { return cmp.Compare(ix.Failures[a], ix.Failures[b]) }
	case "ratio":
		c = func(a, b int32) int { return cmp.Compare(ix.Ratio[a], ix.Ratio[b]) }
	case "reward":
		c = func(a, b int32) int { return cmp.Compare(ix.Reward[a], ix.Reward[b]) } // NaN (no reward) first
	default:
		return nil, checkSort(key)
	}
	o := make([]int32, ix.Len())
	for i := range o {
		o[i] = int32(i)
	}
	slices.SortStableFunc(o, c)
	s.order[field] = o
	return orderView(o, desc), nil
}

// orderView is an order (nil = index order); Find walks it backwards for a
// descending sort.
func orderView(o []int32, _ bool) []int32 { return o }

// Row is one record in the list.
type Row struct {
	I        int      `json:"i"`
	Key      string   `json:"key"`
	ID       string   `json:"id,omitempty"`
	Prompt   string   `json:"prompt,omitempty"` // its first line, cut
	Outcome  string   `json:"outcome"`
	Compress string   `json:"compress,omitempty"`
	Toolsets []string `json:"toolsets"`
	Tools    []string `json:"tools"`
	Failures uint16   `json:"failures"`
	Turns    uint16   `json:"turns"`
	Tokens   uint32   `json:"tokens"`
	Duration uint32   `json:"duration_ms"`
	Cost     *float64 `json:"cost_usd"`
	Ratio    float32  `json:"ratio,omitempty"`
	Reward   *float64 `json:"reward,omitempty"` // absent: ungraded, or the grader failed (grade errored)
	Grade    string   `json:"grade,omitempty"`  // passed, failed, errored; absent: ungraded
}

func bitsNames(b uint64, names []string) []string {
	out := []string{}
	for i, n := range names {
		if b&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

func (s *Server) row(i int) Row {
	ix := s.idx()
	f := ix.fields(i)
	return f.row(i, ix.Key(i))
}

// fields are record i's columns as the list knows a record (what the build
// wrote from fieldsOf).
func (ix *Index) fields(i int) recFields {
	return recFields{ID: ix.ID(i), Prompt: ix.Prompt(i), Outcome: ix.OutcomeName(i), Compress: ix.CompressName(i),
		Toolsets: bitsNames(ix.Toolsets[i], ix.ToolsetBits), Tools: bitsNames(ix.Tools[i], ix.ToolBits),
		Failures: ix.Failures[i], Turns: ix.Turns[i], Tokens: ix.Tokens[i], Duration: ix.DurationMS[i], Cost: ix.Cost[i], Ratio: ix.Ratio[i],
		Reward: ix.Reward[i], Grade: report.Grade(ix.Grade[i])}
}

// searchBudget bounds one text search: it stops reading records after this
// long and says how far it got.
const searchBudget = 1500 * time.Millisecond

func (s *Server) records(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	res, err := s.Find(r.Context(), q)
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, res)
}

// Result is one page of the list.
type Result struct {
	Total    int   `json:"total"`    // records matching (a lower bound when !Complete)
	Complete bool  `json:"complete"` // false: a text search stopped before the end
	Scanned  int   `json:"scanned"`  // records whose text was searched (while indexing: records read)
	Rows     []Row `json:"rows"`
	// Indexing: the index is being built, the page was read from the
	// folder (the streamed records).
	Indexing *Indexing `json:"indexing,omitempty"`
	Order    string    `json:"order,omitempty"` // "ledger": the default order was not available yet
	Note     string    `json:"note,omitempty"`  // why the page is empty though the list may not be
}

// Find returns the page of q from the records the server has now (the
// index, or the folders while it is built). A filter the source knows
// without reading records (the index's columns) costs one pass over them;
// what needs the records read (a text search, a filter while the index is
// built) reads them in order until the page is full or the source's budget
// is spent (scanRule), or the end: Total then counts the matches among the
// records read, a lower bound unless Complete (lower-cased substring match
// on the whole line).
func (s *Server) Find(ctx context.Context, q Query) (Result, error) {
	src, err := s.source(ctx)
	if err != nil {
		return Result{}, err
	}
	w, err := src.walk(q)
	if err != nil {
		return Result{}, err
	}
	defer w.close()
	res := Result{Rows: []Row{}, Complete: true, Indexing: w.in, Order: w.order}
	first := q.Page * q.Size
	if !q.filtered() {
		res.Total = w.n
		for k := first; k < min(first+q.Size, w.n); k++ {
			if err := res.add(w, w.at(k)); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	t, start := newText(q), time.Now()
	for k := 0; k < w.n; k++ {
		i := w.at(k)
		if w.free != nil && !w.free(i) {
			continue
		}
		if w.reads {
			if ctx.Err() != nil || w.rule.stop(start, res.Scanned, res.Total >= first+q.Size) {
				res.Complete = false
				break
			}
			ok, err := w.readPasses(i, t)
			if err != nil {
				return res, err
			}
			res.Scanned++
			if !ok {
				continue
			}
		}
		if res.Total >= first && len(res.Rows) < q.Size {
			if err := res.add(w, i); err != nil {
				return res, err
			}
		}
		res.Total++
	}
	if !res.Complete && len(res.Rows) == 0 && w.in != nil {
		res.Note = fmt.Sprintf("page %d of this list is past the matches among the %d records read so far; it is available once the index is built (indexing %d %%)", q.Page+1, res.Scanned, w.in.Percent)
	}
	return res, nil
}

// add appends record i's row.
func (res *Result) add(w *walk, i int) error {
	r, err := w.row(i)
	if err == nil {
		res.Rows = append(res.Rows, r)
	}
	return err
}

// Line reads record i from its shard.
func (s *Server) Line(i int) ([]byte, error) {
	src, err := s.source(context.Background())
	if err != nil {
		return nil, err
	}
	return src.line(i)
}

// readRef reads the record ref points at in dir.
func (s *Server) readRef(dir string, ref pipeline.RecordRef) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.rd[dir]
	if rd == nil {
		rd = pipeline.NewRecordReader(dir)
		s.rd[dir] = rd
	}
	return rd.Read(ref)
}

// index parses the record number of the request's path.
func (s *Server) index(w http.ResponseWriter, r *http.Request) (int, bool) {
	_, i, ok := s.recordOf(w, r)
	return i, ok
}

// recordOf parses the record number of the request's path and returns it
// with the records it is read from.
func (s *Server) recordOf(w http.ResponseWriter, r *http.Request) (recordSet, int, bool) {
	i, err := strconv.Atoi(r.PathValue("i"))
	src, serr := s.source(r.Context())
	if serr != nil {
		httpError(w, serr)
		return nil, 0, false
	}
	if err != nil || i < 0 || i >= src.len() {
		http.Error(w, "no such record", http.StatusNotFound)
		return nil, 0, false
	}
	return src, i, true
}

// keyOf is record i's folder and key.
func (s *Server) keyOf(ctx context.Context, i int) (dir, key string, err error) {
	src, err := s.source(ctx)
	if err != nil {
		return "", "", err
	}
	return src.where(i)
}

// located is where record i is and what the record page shows of it
// besides its line.
type located struct {
	dir, key, id, kind string
	of                 int
	line               []byte
}

func (s *Server) raw(w http.ResponseWriter, r *http.Request) {
	src, i, ok := s.recordOf(w, r)
	if !ok {
		return
	}
	line, err := src.line(i)
	if err != nil {
		httpError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(line)
}

func (s *Server) record(w http.ResponseWriter, r *http.Request) {
	src, i, ok := s.recordOf(w, r)
	if !ok {
		return
	}
	loc, err := src.locate(i)
	if err != nil {
		httpError(w, err)
		return
	}
	out := map[string]any{"i": i, "key": loc.key, "of": loc.of, "kind": loc.kind, "dir": loc.dir, "record": json.RawMessage(bytes.TrimSpace(loc.line))}
	if in := src.indexing(); in != nil { // building, or the build failed
		out["indexing"] = in
	}
	out["tool_failures"] = toolFailures(loc.line)
	if s.swe != nil {
		id := loc.id
		if id == "" {
			id = loc.key
		}
		if in := s.swe.Instances[id]; in != nil {
			inst := map[string]any{"id": id, "instance": in.Shown()}
			if g := s.swe.Gate; g != nil {
				inst["gate"] = g.Verdict
				inst["baseline"] = g.Baseline
				inst["regressed"] = slices.Contains(g.Regressions, id)
				inst["unjudged"] = slices.Contains(g.Unjudged, id)
				inst["change"] = s.swe.BaselineChange(id)
				inst["reasons"] = g.Reasons
			}
			out["swe"] = inst
		}
	}
	writeJSON(w, out)
}

// Token returns a random access token for a non-loopback address.
func Token() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}
