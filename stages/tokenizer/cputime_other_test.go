//go:build !unix

package tokenizer

import "time"

var processStart = time.Now()

// processCPU falls back to wall time where getrusage is not available.
func processCPU() time.Duration { return time.Since(processStart) }
