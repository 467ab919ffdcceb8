package export

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// plan is the selection: what pass 1 decided for every record, by its
// ordinal (its place in the reading order across the sources).
type plan struct {
	opts   *Options
	where  []cond
	splits []split
	// state holds one byte per record read: 0 left out, else its split's
	// index + 1.
	state []uint8
	// rows counts the kept records per split.
	rows []int64
	// keys folds every key read, in order, so pass 2 can tell that it read
	// the same records.
	keys uint64
}

// progressEvery is how many records pass between Progress calls.
const progressEvery = 4096

// stepCounter counts the records that pass each step of pass 1.
type stepCounter struct {
	names []string
	out   []int64
}

func (s *stepCounter) add(name string) int {
	s.names = append(s.names, name)
	s.out = append(s.out, 0)
	return len(s.names) - 1
}

// selector holds pass 1's state across the sources.
type selector struct {
	p      *plan
	man    *Manifest
	steps  stepCounter
	read   int
	conv   int // -1 when the format keeps every record
	where  int // first --where step
	reason int
	tools  int
	dedupe int
	best   int
	seen   map[[16]byte]struct{}
	heaps  map[[16]byte]bestHeap
	seed   string
}

func (p *plan) newSelector(man *Manifest) *selector {
	o := p.opts
	s := &selector{p: p, man: man, conv: -1, reason: -1, tools: -1, dedupe: -1, best: -1, seed: strconv.FormatInt(o.Seed, 10)}
	s.read = s.steps.add("read")
	s.conv = s.steps.add("convertible to " + o.Format)
	s.where = len(s.steps.names)
	for _, c := range p.where {
		s.steps.add("where " + c.text)
	}
	if o.RequireReasoning {
		s.reason = s.steps.add("require reasoning")
	}
	if o.DropUnknownTools {
		s.tools = s.steps.add("drop unknown tools")
	}
	if o.Dedupe != "" {
		s.dedupe = s.steps.add("dedupe " + o.Dedupe)
		s.seen = map[[16]byte]struct{}{}
	}
	if o.BestOf > 0 {
		s.best = s.steps.add("best-of " + strconv.Itoa(o.BestOf))
		s.heaps = map[[16]byte]bestHeap{}
	}
	return s
}

// pass1 reads every source once and decides which records are kept and in
// which split.
func (p *plan) pass1(ctx context.Context, man *Manifest) error {
	s := p.newSelector(man)
	kh := fnv.New64a()
	for i := range p.opts.Sources {
		src := p.opts.Sources[i]
		before := len(p.state)
		each := func(fn func(line []byte) error) error { return eachLine(src, fn) }
		err := pipelined(each, s.read1, func(_ []byte, r *lineFacts) error {
			if len(p.state)%progressEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				if p.opts.Progress != nil {
					p.opts.Progress(1, int64(len(p.state)), 0)
				}
			}
			ord := len(p.state)
			p.state = append(p.state, 0)
			kh.Write([]byte(r.f.key))
			kh.Write([]byte{0})
			return s.record(ord, r)
		})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		man.Sources[i].Records = int64(len(p.state) - before)
	}
	p.keys = kh.Sum64()
	if p.opts.Progress != nil {
		p.opts.Progress(1, int64(len(p.state)), int64(len(p.state)))
	}
	s.finish()
	return nil
}

// lineFacts is what pass 1 reads of one record line on its own (in
// pipelined's workers): its facts, and what the steps ask of its turns.
type lineFacts struct {
	f           facts
	turns       []schemas.Turn
	convertible bool
	unknownTool bool     // it calls a tool its system turn does not offer (--drop-unknown-tools)
	hash        [16]byte // its normalised conversation (--dedupe)
	group       [16]byte // its prompt
}

// read1 fills r from line, for record; it reads only what the selection's
// steps need.
func (s *selector) read1(_ int, line []byte, r *lineFacts) {
	o := s.p.opts
	readFacts(line, &r.f)
	var ok bool
	r.turns, ok = decodeTurns(r.f.conv, r.turns)
	if ok && o.Format == FormatMessages {
		_, _, err := schemas.FromShareGPT(r.turns)
		ok = err == nil
	}
	r.convertible, r.unknownTool, r.hash = ok, false, [16]byte{}
	if !ok {
		return
	}
	if s.tools >= 0 {
		r.unknownTool = callsUnknownTool(r.turns)
	}
	if s.dedupe >= 0 {
		r.hash = conversationHash(r.turns)
	}
	r.group = promptGroup(r.f.id, r.f.conv)
}

// record runs the selection steps on the record at ordinal ord, read by
// read1 into r.
func (s *selector) record(ord int, r *lineFacts) error {
	f := &r.f
	s.steps.out[s.read]++
	if !r.convertible {
		s.man.NotConvertible.add(strings.Clone(f.key))
		return nil
	}
	s.steps.out[s.conv]++
	for i := range s.p.where {
		if !s.p.where[i].match(f) {
			return nil
		}
		s.steps.out[s.where+i]++
	}
	if s.reason >= 0 {
		if !f.hasReasoning {
			return nil
		}
		s.steps.out[s.reason]++
	}
	if s.tools >= 0 {
		if r.unknownTool {
			return nil
		}
		s.steps.out[s.tools]++
	}
	if s.dedupe >= 0 {
		if _, dup := s.seen[r.hash]; dup {
			return nil
		}
		s.seen[r.hash] = struct{}{}
		s.steps.out[s.dedupe]++
	}
	s.p.state[ord] = uint8(s.p.splitOf(s.seed, r.group) + 1)
	if s.best >= 0 {
		s.offer(r.group, ord, f)
	}
	return nil
}

// offer puts the record at ord into its prompt's best-of heap; the worst
// of a full heap is left out. The heaps are slices held in the map by
// value, so a prompt costs its map entry and its candidates only.
func (s *selector) offer(group [16]byte, ord int, f *facts) {
	c := candidate{ord: ord, reward: f.reward, hasReward: f.hasReward,
		completed: f.outcome == string(schemas.OutcomeCompleted), tokens: f.tokens, key: f.key}
	h := s.heaps[group]
	if len(h) == s.p.opts.BestOf {
		if !better(&c, &h[0]) {
			s.p.state[ord] = 0 // no better than the worst kept
			return
		}
		s.p.state[h[0].ord] = 0
		c.key = strings.Clone(f.key)
		h[0] = c
		h.down(0)
		return
	}
	c.key = strings.Clone(f.key)
	h = append(h, c)
	h.up(len(h) - 1)
	s.heaps[group] = h
}

// finish counts the kept records per split and records the steps.
func (s *selector) finish() {
	p := s.p
	p.rows = make([]int64, len(p.splits))
	var kept int64
	for _, st := range p.state {
		if st > 0 {
			p.rows[st-1]++
			kept++
		}
	}
	if s.best >= 0 {
		s.steps.out[s.best] = kept
	}
	in := int64(len(p.state))
	for i, name := range s.steps.names {
		out := s.steps.out[i]
		if i == s.read {
			in = out
		}
		s.man.Steps = append(s.man.Steps, Step{Name: name, In: in, Out: out})
		in = out
	}
	s.man.Steps = append(s.man.Steps, Step{Name: "split " + p.splitText(), In: kept, Out: kept})
}

// splitOf draws the split of a prompt group from the seed: the same prompt
// always lands in the same split, whatever its samples.
func (p *plan) splitOf(seed string, group [16]byte) int {
	h := hash16("split", seed, string(group[:]))
	draw := float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53)
	for i, s := range p.splits {
		if draw < s.upTo {
			return i
		}
	}
	return len(p.splits) - 1
}

// candidate is one record in a prompt's best-of heap.
type candidate struct {
	ord       int
	reward    float64
	hasReward bool
	completed bool
	tokens    int64
	key       string
}

// better reports whether a ranks before b: higher reward (a reward before
// none), then completed, then fewer tokens, then the smaller key.
func better(a, b *candidate) bool {
	if a.hasReward != b.hasReward {
		return a.hasReward
	}
	if a.hasReward && a.reward != b.reward {
		return a.reward > b.reward
	}
	if a.completed != b.completed {
		return a.completed
	}
	if a.tokens != b.tokens {
		return a.tokens < b.tokens
	}
	return a.key < b.key
}

// bestHeap keeps a prompt's best candidates with the worst at the root.
type bestHeap []candidate

// worse reports whether h[i] ranks after h[j].
func (h bestHeap) worse(i, j int) bool { return better(&h[j], &h[i]) }

func (h bestHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.worse(i, parent) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h bestHeap) down(i int) {
	for {
		w, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h.worse(l, w) {
			w = l
		}
		if r < len(h) && h.worse(r, w) {
			w = r
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}
