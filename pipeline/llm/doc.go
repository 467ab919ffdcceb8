// Package llm is the OpenAI-compatible chat-completions client every mode uses,
// with per-request timeouts, jittered exponential backoff on 429/5xx/connection
// errors (honouring Retry-After), and one AIMD rate controller shared by all
// workers. It must not import stages or cmd.
package llm
