// Package llm is the OpenAI-compatible chat-completions client every mode uses,
// with per-request timeouts, jittered exponential backoff on 429/5xx/connection
// errors (honouring Retry-After), and one AIMD rate controller shared by all
// workers. It serves the stages (rollout, compress, swe, cron), so it lives under
// stages; it imports only schemas of this module.
package llm
