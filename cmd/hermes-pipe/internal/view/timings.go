package view

import (
	"net/http"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// runTimings is where the wall time of the run's records went, computed once
// per server from its folders (pipeline.Stats of each, merged exactly by
// Statistics.Add): the same figures `stats` prints.
type runTimings struct {
	once sync.Once
	t    *pipeline.TimingStatistics
	err  error
}

// timingsOf returns the timings of dirs, computing them on the first call.
// It reads every record of every folder once (without its conversation).
func (rt *runTimings) timingsOf(dirs []string) (*pipeline.TimingStatistics, error) {
	rt.once.Do(func() {
		all := pipeline.NewStatistics()
		for _, d := range dirs {
			st, err := pipeline.Stats(d)
			if err != nil {
				rt.err = err
				return
			}
			all.Add(st)
		}
		all.Finish()
		rt.t = all.Timings
	})
	return rt.t, rt.err
}

// timings answers GET /api/timings: {"timings": null} when no record
// carries timings, else the parts with their shares and percentiles.
func (s *Server) timings(w http.ResponseWriter, r *http.Request) {
	src, err := s.source(r.Context())
	if err != nil {
		httpError(w, err)
		return
	}
	dirs, _ := src.meta()["dirs"].([]string)
	t, err := s.tim.timingsOf(dirs)
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, map[string]any{"timings": t})
}
