package cron

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// SkillsDir is where skills live: <home>/skills/<name>/SKILL.md, the layout
// Hermes keeps under its own home (`cron import --skills-dir` links a Hermes
// skills folder there).
func SkillsDir(home string) string { return filepath.Join(home, "skills") }

var safeSkillName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?$`)
})

// LoadSkill reads a skill's SKILL.md: <home>/skills/<name>/SKILL.md, or, as
// Hermes finds skills filed under a category, <home>/skills/<category>/<name>/SKILL.md.
// A missing skill is an error naming it and where it was looked for.
func LoadSkill(home, name string) (string, error) {
	name = strings.TrimSpace(name)
	if !safeSkillName().MatchString(name) || strings.Contains(name, "..") {
		return "", fmt.Errorf("skill %q: not a skill name", name)
	}
	dir := SkillsDir(home)
	direct := filepath.Join(dir, filepath.FromSlash(name), "SKILL.md")
	b, err := os.ReadFile(direct)
	if errors.Is(err, fs.ErrNotExist) && !strings.Contains(name, "/") {
		matches, _ := filepath.Glob(filepath.Join(dir, "*", name, "SKILL.md"))
		sort.Strings(matches)
		if len(matches) > 0 {
			b, err = os.ReadFile(matches[0])
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("skill %q not found (no %s)", name, direct)
	}
	if err != nil {
		return "", fmt.Errorf("skill %q: %v", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// withSkills places loaded skills before the job's prompt the way Hermes'
// scheduler does: one "[IMPORTANT: The user has invoked ...]" block per
// skill with its full SKILL.md, then the assembled prompt as the
// instruction given alongside the skills.
func withSkills(names, contents []string, prompt string) string {
	var parts []string
	for i, name := range names {
		if len(parts) > 0 {
			parts = append(parts, "")
		}
		parts = append(parts,
			fmt.Sprintf(`[IMPORTANT: The user has invoked the "%s" skill, indicating they want you to follow its instructions. The full skill content is loaded below.]`, name),
			"", contents[i])
	}
	if prompt != "" {
		parts = append(parts, "", "The user has provided the following instruction alongside the skill invocation: "+prompt)
	}
	return strings.Join(parts, "\n")
}

// contextFileMaxChars caps each context source, as Hermes does by default.
const contextFileMaxChars = 20_000

// truncateContext keeps the head (70%) and tail (20%) of an over-long
// context file with a marker between, as Hermes does.
func truncateContext(content, name string) string {
	r := []rune(content)
	if len(r) <= contextFileMaxChars {
		return content
	}
	head, tail := contextFileMaxChars*7/10, contextFileMaxChars*2/10
	return string(r[:head]) + fmt.Sprintf("\n\n[...truncated %s: kept %d+%d of %d chars. Use file tools to read the full file.]\n\n", name, head, tail, len(r)) + string(r[len(r)-tail:])
}

// contextFile is one file placed in the system prompt.
type contextFile struct {
	name, text string
}

// projectContext returns the project context files of workdir the way
// Hermes picks them: the first of AGENTS.md, CLAUDE.md, or .cursorrules
// with .cursor/rules/*.mdc (each also in lower case where Hermes accepts
// it) that has content.
func projectContext(workdir string) ([]contextFile, error) {
	if workdir == "" {
		return nil, nil
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(workdir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("context file %s: %v", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	for _, group := range [][]string{{"AGENTS.md", "agents.md"}, {"CLAUDE.md", "claude.md"}} {
		for _, name := range group {
			text, err := read(name)
			if err != nil {
				return nil, err
			}
			if text != "" {
				return []contextFile{{name, text}}, nil
			}
		}
	}
	var out []contextFile
	text, err := read(".cursorrules")
	if err != nil {
		return nil, err
	}
	if text != "" {
		out = append(out, contextFile{".cursorrules", text})
	}
	mdc, _ := filepath.Glob(filepath.Join(workdir, ".cursor", "rules", "*.mdc"))
	sort.Strings(mdc)
	for _, p := range mdc {
		name := ".cursor/rules/" + filepath.Base(p)
		text, err := read(filepath.Join(".cursor", "rules", filepath.Base(p)))
		if err != nil {
			return nil, err
		}
		if text != "" {
			out = append(out, contextFile{name, text})
		}
	}
	return out, nil
}

// soul reads <home>/SOUL.md, the agent's identity in Hermes ("" when absent).
func soul(home string) (string, error) {
	b, err := os.ReadFile(filepath.Join(home, "SOUL.md"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("SOUL.md: %v", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// systemPrompt assembles what Hermes puts in the system prompt from files:
// SOUL.md (the identity) first, then the project context section.
func systemPrompt(soulText string, files []contextFile) string {
	var parts []string
	if soulText != "" {
		parts = append(parts, truncateContext(soulText, "SOUL.md"))
	}
	if len(files) > 0 {
		var b strings.Builder
		b.WriteString("# Project Context\n\nThe following project context files have been loaded and should be followed:\n\n")
		cursor := ""
		for _, f := range files {
			section := "## " + f.name + "\n\n" + f.text
			if f.name == ".cursorrules" || strings.HasPrefix(f.name, ".cursor/") {
				cursor += section + "\n\n"
				continue
			}
			b.WriteString(truncateContext(section, f.name))
		}
		if cursor != "" {
			b.WriteString(truncateContext(cursor, ".cursorrules"))
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "\n\n")
}

// LinkSkills makes the skills of a Hermes skills folder (src, e.g.
// ~/.hermes/skills) available under <home>/skills: the whole folder is
// linked when the home has none yet, otherwise each skill or category
// folder the home lacks is linked one by one (the home's own are kept).
// It returns the names it linked. Links keep following Hermes' copy, so a
// skill edited there is the skill the next execution loads.
func LinkSkills(home, src string) ([]string, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, usagef("--skills-dir %s: %v", src, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, usagef("--skills-dir %s is not a folder", src)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("--skills-dir %s: %w", src, err)
	}
	dst := SkillsDir(home)
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, err
		}
		if err := os.Symlink(abs, dst); err != nil {
			return nil, fmt.Errorf("link skills: %w", err)
		}
		var names []string
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		return names, nil
	}
	if target, err := filepath.EvalSymlinks(dst); err == nil && sameFile(target, abs) {
		return nil, nil // already this folder
	}
	var linked []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dst, e.Name())
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(abs, e.Name()), p); err != nil {
			return linked, fmt.Errorf("link skill %s: %w", e.Name(), err)
		}
		linked = append(linked, e.Name())
	}
	return linked, nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
