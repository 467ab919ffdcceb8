package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
)

// Delivery kinds. Silent executions deliver nothing.
const (
	DeliverOutput = "output"
	DeliverAlert  = "alert"
)

// Message is what a target receives for one execution.
type Message struct {
	ExecutionID string    `json:"execution_id"`
	JobID       string    `json:"job_id"`
	JobName     string    `json:"job_name"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Kind        string    `json:"kind"`   // output | alert
	Status      string    `json:"status"` // the execution's terminal state
	Text        string    `json:"text"`
	ExitCode    *int      `json:"exit_code,omitempty"`
	Error       string    `json:"error,omitempty"`
}

var safeID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`) })

// validJobID reports whether id is safe as a folder name.
func validJobID(id string) bool { return safeID().MatchString(id) && !strings.Contains(id, "..") }

// OutputDir is where local delivery writes a job's files.
func OutputDir(home, jobID string) string { return filepath.Join(home, "cron", "output", jobID) }

// ValidateDeliver checks a deliver spec: comma-separated "local" and
// "webhook:http(s)://..." targets. Errors wrap ErrUsage.
func ValidateDeliver(spec string) error {
	for _, t := range strings.Split(spec, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "" || t == "local":
		case strings.HasPrefix(t, "webhook:"):
			u := strings.TrimPrefix(t, "webhook:")
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return usagef("deliver target %q: webhook URL must start with http:// or https://", t)
			}
		default:
			return usagef("deliver target %q: use local or webhook:URL", t)
		}
	}
	return nil
}

type deliverer struct {
	home    string
	client  *http.Client
	backoff func(attempt int) time.Duration
}

// deliver sends m to every target of spec and returns a summary such as
// "local:ok webhook:ok". Targets Hermes knows but hermes-pipe does not
// (telegram, origin...) fall back to local delivery, noted in the summary.
func (d *deliverer) deliver(ctx context.Context, spec string, m Message) string {
	var parts []string
	localDone := false
	doLocal := func(note string) {
		if localDone {
			return
		}
		localDone = true
		if p, err := d.local(m); err != nil {
			parts = append(parts, "local:error: "+err.Error())
		} else {
			parts = append(parts, "local:"+p+note)
		}
	}
	if strings.TrimSpace(spec) == "" {
		spec = "local"
	}
	for _, t := range strings.Split(spec, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "" || t == "local":
			doLocal("")
		case strings.HasPrefix(t, "webhook:"):
			if err := d.webhook(ctx, strings.TrimPrefix(t, "webhook:"), m); err != nil {
				parts = append(parts, "webhook:error: "+err.Error())
			} else {
				parts = append(parts, "webhook:ok")
			}
		default:
			doLocal(" (target " + t + " unsupported, delivered locally)")
		}
	}
	return strings.Join(parts, "; ")
}

// local writes one markdown file per execution under the job's output folder.
func (d *deliverer) local(m Message) (string, error) {
	if !validJobID(m.JobID) {
		return "", fmt.Errorf("job id %q is not a safe folder name", m.JobID)
	}
	dir := OutputDir(d.home, m.JobID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var b strings.Builder
	title := "Cron job"
	if m.Kind == DeliverAlert {
		title = "ALERT: cron job"
	}
	fmt.Fprintf(&b, "# %s %s\n\n", title, m.JobName)
	fmt.Fprintf(&b, "- job: %s\n- execution: %s\n- scheduled: %s\n- status: %s\n", m.JobID, m.ExecutionID, m.ScheduledAt.Format(time.RFC3339), m.Status)
	if m.ExitCode != nil {
		fmt.Fprintf(&b, "- exit code: %d\n", *m.ExitCode)
	}
	if m.Error != "" {
		fmt.Fprintf(&b, "- error: %s\n", m.Error)
	}
	b.WriteString("\n")
	b.WriteString(m.Text)
	if !strings.HasSuffix(m.Text, "\n") {
		b.WriteString("\n")
	}
	name := m.ExecutionID + ".md"
	if err := atomicfile.Write(dir, name, []byte(b.String())); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// webhook POSTs m as JSON with the execution id as Idempotency-Key, retrying
// network errors, 429 and 5xx up to four attempts.
func (d *deliverer) webhook(ctx context.Context, url string, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	client := d.client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	var last error
	for attempt := range 4 {
		if attempt > 0 {
			wait := time.Duration(1<<(attempt-1)) * time.Second
			if d.backoff != nil {
				wait = d.backoff(attempt)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("webhook %s: %w (last: %v)", url, ctx.Err(), last)
			case <-time.After(wait):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("webhook %s: %w", url, err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", m.ExecutionID)
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode < 300:
			return nil
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			last = fmt.Errorf("HTTP %d", resp.StatusCode)
		default:
			return fmt.Errorf("webhook %s: HTTP %d", url, resp.StatusCode)
		}
	}
	return fmt.Errorf("webhook %s: gave up after 4 attempts: %v", url, last)
}
