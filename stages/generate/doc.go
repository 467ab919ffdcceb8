// Package generate composes `hermes-pipe generate`: the prompts source, the
// image pre-flight and the rollout stage on the pipeline runtime. It holds no
// loop, pool or writer of its own.
//
// It must not import cmd.
package generate
