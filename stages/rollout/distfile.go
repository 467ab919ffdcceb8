package rollout

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadDistributions reads a --distribution-file in Hermes' form: an object
// (JSON or YAML) mapping each distribution's name to {"description": ...,
// "toolsets": {toolset: probability}}, where a probability is a percentage
// from 0 to 100 as in Hermes' toolset_distributions (a bare {toolset:
// probability} object is taken as the toolsets). Toolsets must be among
// known (built-in and configured MCP toolsets). Errors name the file, the
// line and the field. The result is added to the named distributions by
// the caller; a name in the file replaces a built-in one.
func LoadDistributions(path string, known []string) (map[string]Distribution, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("distribution file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON or YAML: %v", path, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want an object of distributions by name", path)
	}
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	errf := func(n *yaml.Node, field, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", path, n.Line, field, fmt.Sprintf(format, a...))
	}
	root := doc.Content[0]
	out := map[string]Distribution{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		name, v := root.Content[i].Value, root.Content[i+1]
		if v.Kind != yaml.MappingNode {
			return nil, errf(v, name, "must be an object with toolsets")
		}
		sets := v
		hasDesc := false
		for j := 0; j+1 < len(v.Content); j += 2 {
			switch v.Content[j].Value {
			case "toolsets":
				sets = v.Content[j+1]
			case "description":
				hasDesc = true
			}
		}
		field := name
		if sets != v {
			field += ".toolsets"
		} else if hasDesc {
			return nil, errf(v, name, "has a description but no toolsets")
		}
		if sets.Kind != yaml.MappingNode || len(sets.Content) == 0 {
			return nil, errf(sets, field, "must be a non-empty object of toolset: probability (0-100)")
		}
		d := Distribution{}
		for j := 0; j+1 < len(sets.Content); j += 2 {
			ts, pv := sets.Content[j].Value, sets.Content[j+1]
			if sets == v && ts == "description" {
				continue
			}
			if !isKnown[ts] {
				return nil, errf(sets.Content[j], field+"."+ts, "unknown toolset (known: %s)", strings.Join(known, ", "))
			}
			p, err := strconv.ParseFloat(pv.Value, 64)
			if err != nil || pv.Kind != yaml.ScalarNode || pv.Tag == "!!str" || p < 0 || p > 100 {
				return nil, errf(pv, field+"."+ts, "%q: want a probability in percent, 0 to 100", pv.Value)
			}
			d[ts] = p / 100
		}
		out[name] = d
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no distribution defined", path)
	}
	return out, nil
}
