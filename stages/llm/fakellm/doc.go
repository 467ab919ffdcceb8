// Package fakellm is a deterministic OpenAI-compatible chat-completions server
// for tests, the demo and benchmarks. Tests start it with httptest
// (httptest.NewServer(fakellm.New(cfg))); cmd/fakellm wraps it as a binary.
// It uses only the standard library and must not import pipeline, stages,
// cmd or any other package of this repository, so any test may start it.
//
// # Routes
//
//	POST /v1/chat/completions   (also /chat/completions) — streaming and not
//	GET  /v1/models             (also /models)
//	GET  /stats                 — JSON counters: requests, in_flight,
//	                              by_status, by_script, faults, batches,
//	                              batch_requests, batch_duplicates
//	POST /v1/files              — multipart upload, purpose=batch
//	GET  /v1/files/{id}         — file object; /content its bytes
//	POST /v1/batches            — create; GET lists (newest first, limit, after)
//	GET  /v1/batches/{id}       — status, request_counts, output/error file ids
//	POST /v1/batches/{id}/cancel
//
// A batch is answered lazily, the first time it is read once
// Config.BatchDelay has passed: each line gets exactly the reply a direct
// call with the same body gets. Config.BatchFail fails single requests
// (error file), Config.BatchExpire expires one batch with half its requests
// answered.
//
// # Determinism
//
// A reply depends only on the request's messages and Config.Seed, never on
// arrival order: ids, generated words, latency jitter and random faults are
// all drawn from a hash of the messages. Random faults (Config.Fail429,
// Fail500, Malformed, Hang) also hash how many identical requests came
// before, so a retry gets a fresh draw, and Config.MaxFaults (default 3)
// caps them so a retrying client eventually succeeds.
//
// # Behaviour
//
// A request whose first user message matches a script's regex replays that
// script: the step is the number of assistant messages already in the
// request. When the steps run out the script's "final" step (or "Done.") is
// sent. A request that matches no script and carries no tools is answered by
// the summariser: Config.SummaryWords deterministic words (one word counts as
// one token), or N words when any message holds the directive [[words=N]];
// if max_tokens (or max_completion_tokens) is smaller, the text is cut to
// that many words and finish_reason is "length". A request with tools and no
// script gets a one-line final answer, unless its first user message holds
// directives: each [[run=COMMAND]], in order, is one assistant step calling
// the terminal tool with {"command": COMMAND} (an agent that leaves files
// behind, for verify commands), and [[answer=X]] makes the final answer
// "Answer: X" (for answer graders: right or wrong as the prompt asks). A
// directive ends at the first "]]".
//
// # Script file
//
// LoadScripts reads {"scripts": [...]} (or a bare array). Every field but
// "match" is optional:
//
//	{
//	  "scripts": [
//	    {
//	      "name": "echo",
//	      "match": "^echo (.*)$",
//	      "steps": [
//	        {
//	          "reasoning": "The user wants {{m1}} printed.",
//	          "reasoning_field": "reasoning_content",
//	          "tool_calls": [
//	            {"name": "terminal", "arguments": {"command": "echo {{m1}}"}}
//	          ]
//	        },
//	        {
//	          "fault": {"kind": "429", "retry_after": "1s", "times": 1},
//	          "content": "The command printed: {{last_tool}}"
//	        }
//	      ],
//	      "final": {"content": "Nothing more to do."}
//	    },
//	    {
//	      "name": "broken-args",
//	      "match": "(?i)broken",
//	      "steps": [
//	        {"tool_calls": [{"name": "terminal", "arguments": "{\"command\": \"ls"}]},
//	        {"content": "<think>\nthat failed\n</think>\nGiving up.", "finish_reason": "stop"}
//	      ]
//	    }
//	  ]
//	}
//
// Step fields: "content"; "reasoning" with "reasoning_field" one of
// "reasoning_content" (default, see Config.ReasoningField), "reasoning" or
// "think" (a leading <think> block in the content); "tool_calls", each with
// "name", optional "id" and "arguments" given as a JSON object (sent
// compacted, key order kept) or as a JSON string sent verbatim (so it may be
// invalid JSON); "finish_reason" (default "tool_calls" with tool calls, else
// "stop"); and "fault".
//
// Fault kinds: "429" (Retry-After in whole seconds plus retry-after-ms;
// "retry_after" as "2s" or seconds), "500", "malformed" (HTTP 200 with a
// truncated JSON body), "empty" (HTTP 200 with no choices), "bad_tool_args"
// (the step's tool-call arguments cut in half), "hang" (no answer for "hang",
// default Config.HangFor, or until the client goes away) and "cut_stream"
// (the body or event stream stops half-way without ending). A fault hits the
// first "times" (default 1; negative = always) identical requests; after that
// the step's reply is sent.
//
// Templates usable in content, reasoning and arguments: {{last_tool}},
// {{last_tool_json}} (JSON-string escaped), {{user}}, {{user_json}},
// {{step}} and {{m1}} … {{m9}} (capture groups of "match").
package fakellm
