// Package schemas holds the record types that flow through hermes-pipe, the
// OpenAI chat message types the agent loop speaks, and the conversion of a
// chat transcript into Hermes' ShareGPT trajectory format.
//
// It performs no I/O and must not import any other package of this repository:
// every other package depends on it, so it stays small and pure.
package schemas
