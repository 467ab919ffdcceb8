package preflight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Checker settles a list of images: it returns the unavailable ones with
// their reason and nothing for usable ones. The docker driver implements it
// (docker.Driver.CheckImages).
type Checker interface {
	CheckImages(ctx context.Context, images []string) map[string]error
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(ctx context.Context, images []string) map[string]error

// CheckImages calls f.
func (f CheckerFunc) CheckImages(ctx context.Context, images []string) map[string]error {
	return f(ctx, images)
}

// Options configures Check and Stage.
type Options struct {
	// Checker inspects and pulls images; required.
	Checker Checker
	// DefaultImage is the image of rows that name none ("" = such rows need
	// no image and always pass).
	DefaultImage string
	// Timeout bounds one Check call as a whole; 0 = no bound beyond ctx.
	Timeout time.Duration
	// RequireImage, for drivers that cannot run a row without an image,
	// makes Stage mark rows that name none (with no DefaultImage) as
	// unavailable instead of passing them.
	RequireImage bool
}

// Result is the outcome of one Check.
type Result struct {
	Images   []string         // distinct images checked, sorted
	Missing  map[string]error // unavailable images and why; empty when all usable
	Duration time.Duration
}

// Err returns the reason image is unavailable, as "image unavailable: ...",
// or nil when it is usable or was not checked.
func (r Result) Err(image string) error {
	if err, ok := r.Missing[image]; ok {
		return unavailable(image, err)
	}
	return nil
}

// unavailable is the error of a row whose image cannot be used; Result.Err
// and Stage.Process share it so the record's error reads the same either way.
func unavailable(image string, reason error) error {
	return fmt.Errorf("image unavailable: %s: %w", image, reason)
}

// errNoImage is the error of a row that names no image when the driver
// needs one and no default is set.
var errNoImage = errors.New("image unavailable: the row names no image and no default image is set (--docker-image)")

// OK reports whether every image is usable.
func (r Result) OK() bool { return len(r.Missing) == 0 }

// Check settles the distinct non-empty images of images (duplicates are
// cheap: each is checked once) and blocks until all are settled or the
// timeout passes; images not settled in time are reported missing with the
// context's error. Stage.Preflight calls it once before the first record;
// `hermes-pipe preflight` calls it alone.
func Check(ctx context.Context, images []string, opts Options) Result {
	start := time.Now()
	seen := make(map[string]bool, 64)
	var distinct []string
	for _, img := range images {
		if img == "" {
			img = opts.DefaultImage
		}
		if img != "" && !seen[img] {
			seen[img] = true
			distinct = append(distinct, img)
		}
	}
	sort.Strings(distinct)
	res := Result{Images: distinct, Missing: map[string]error{}}
	if len(distinct) == 0 {
		return res
	}
	if opts.Checker == nil {
		err := errors.New("no image checker for this sandbox")
		for _, img := range distinct {
			res.Missing[img] = err
		}
		return res
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	for img, err := range opts.Checker.CheckImages(ctx, distinct) {
		if err != nil && seen[img] {
			res.Missing[img] = err
		}
	}
	res.Duration = time.Since(start)
	return res
}

// Stage is the pre-flight as a pipeline stage. Preflight checks the images
// given to New before the first record; Process passes records through and
// marks those whose image is unavailable with outcome sandbox_error and error
// "image unavailable: <image>: <reason>". An image first seen in Process is
// checked then, once, and remembered.
type Stage struct {
	opts   Options
	images []string

	mu      sync.Mutex
	known   map[string]error // settled images: nil = usable
	pending map[string]chan struct{}
}

var (
	_ pipeline.Stage       = (*Stage)(nil)
	_ pipeline.Preflighter = (*Stage)(nil)
)

// New returns a Stage that will check images in Preflight. It does no I/O.
func New(opts Options, images []string) (*Stage, error) {
	if opts.Checker == nil {
		return nil, errors.New("preflight: no image checker")
	}
	return &Stage{opts: opts, images: images, known: map[string]error{}, pending: map[string]chan struct{}{}}, nil
}

// Name returns "preflight".
func (s *Stage) Name() string { return "preflight" }

// Preflight checks every image given to New. Unavailable images are not an
// error here: their rows are marked in Process. It fails only when ctx ends.
func (s *Stage) Preflight(ctx context.Context) error {
	res := Check(ctx, s.images, s.opts)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, img := range res.Images {
		s.known[img] = res.Missing[img]
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	return nil
}

// Missing returns the images found unavailable so far.
func (s *Stage) Missing() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]error{}
	for img, err := range s.known {
		if err != nil {
			out[img] = err
		}
	}
	return out
}

// Process marks rec when its image is unavailable and returns it. It costs
// a map lookup for images already settled.
func (s *Stage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	img := s.opts.DefaultImage
	if rec.Input != nil && rec.Input.Image != "" {
		img = rec.Input.Image
	}
	if img == "" {
		if s.opts.RequireImage {
			rec.Outcome = schemas.OutcomeSandboxError
			rec.Error = errNoImage.Error()
		}
		return []*schemas.Record{rec}, nil
	}
	err, ok := s.lookup(ctx, img)
	if !ok {
		return nil, fmt.Errorf("preflight %s: %w", img, ctx.Err())
	}
	if err != nil {
		rec.Outcome = schemas.OutcomeSandboxError
		rec.Error = unavailable(img, err).Error()
	}
	return []*schemas.Record{rec}, nil
}

// lookup returns img's settled state, checking it once when unknown; ok is
// false when ctx ended first.
func (s *Stage) lookup(ctx context.Context, img string) (error, bool) {
	for {
		s.mu.Lock()
		if err, done := s.known[img]; done {
			s.mu.Unlock()
			return err, true
		}
		wait, busy := s.pending[img]
		if !busy {
			ch := make(chan struct{})
			s.pending[img] = ch
			s.mu.Unlock()
			res := Check(ctx, []string{img}, s.opts)
			s.mu.Lock()
			if ctx.Err() == nil {
				s.known[img] = res.Missing[img]
			}
			delete(s.pending, img)
			close(ch)
			s.mu.Unlock()
			if ctx.Err() != nil {
				return nil, false
			}
			continue
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, false
		}
	}
}
