package pipeline

import (
	"errors"
	"fmt"
)

// ErrRefused marks an output folder that cannot be used as asked (not empty
// without --resume or --overwrite, another run kind or shard format, not a
// hermes-pipe folder). Nothing was changed and no work was done, so the CLI
// reports it as a usage error. Test with errors.Is.
var ErrRefused = errors.New("output folder refused")

// refusal is an ErrRefused error that reads as its own message.
type refusal struct{ msg string }

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Is(target error) bool { return target == ErrRefused }

// refusedf returns an error that matches ErrRefused and reads as the
// formatted message.
func refusedf(format string, a ...any) error { return &refusal{fmt.Sprintf(format, a...)} }
