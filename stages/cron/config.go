package cron

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is the operator's settings of every job of a home folder, read
// from <home>/cron/config.yaml (ConfigPath). A missing file is the zero
// Config: nothing changes.
type Config struct {
	// DisabledToolsets are removed from every agent job's toolsets,
	// whatever the job asks for (Hermes' agent.disabled_toolsets, applied
	// last, after the cron policy of NarrowToolsets).
	DisabledToolsets []string `yaml:"disabled_toolsets"`
}

// ConfigPath is the operator's cron settings file of a home folder.
func ConfigPath(home string) string { return filepath.Join(home, "cron", "config.yaml") }

// LoadConfig reads <home>/cron/config.yaml; a missing file is the zero
// Config. An unknown key, a value of the wrong type or a blank toolset
// name is an error naming the file and the line. It costs one small read;
// the scheduler calls it for each agent execution, so an edit applies to
// the next one without a restart.
func LoadConfig(home string) (Config, error) {
	path := ConfigPath(home)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("cron config: %w", err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return Config{}, nil
	} else if err != nil {
		return Config{}, fmt.Errorf("cron config %s: %v", path, err)
	}
	var cfg Config
	dec = yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("cron config %s: %v (known keys: disabled_toolsets)", path, err)
	}
	for i, t := range cfg.DisabledToolsets {
		if strings.TrimSpace(t) == "" {
			return Config{}, fmt.Errorf("cron config %s: line %d: disabled_toolsets[%d] is blank", path, toolsetLine(&doc, i), i)
		}
		cfg.DisabledToolsets[i] = strings.TrimSpace(t)
	}
	return cfg, nil
}

// toolsetLine is the line of disabled_toolsets' i-th item in the document.
func toolsetLine(doc *yaml.Node, i int) int {
	if len(doc.Content) == 0 {
		return 0
	}
	m := doc.Content[0]
	for k := 0; k+1 < len(m.Content); k += 2 {
		if m.Content[k].Value == "disabled_toolsets" {
			if seq := m.Content[k+1]; i < len(seq.Content) {
				return seq.Content[i].Line
			}
			return m.Content[k+1].Line
		}
	}
	return m.Line
}

// JobToolsets is the toolsets an agent execution of j is given: the job's,
// narrowed by the cron policy (NarrowToolsets: terminal when it names
// none), then without the operator's DisabledToolsets. disabled lists
// those removed; toolsets may be empty when every one is disabled (the
// execution then fails, naming them).
func (c Config) JobToolsets(j *Job) (toolsets, disabled []string) {
	allowed, _ := NarrowToolsets(j.EnabledToolsets)
	for _, t := range allowed {
		if slices.Contains(c.DisabledToolsets, t) {
			disabled = append(disabled, t)
			continue
		}
		toolsets = append(toolsets, t)
	}
	return toolsets, disabled
}
