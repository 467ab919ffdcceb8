// Package kubernetes_test checks examples/kubernetes/indexed-job.yaml against
// the real Kubernetes API types: it must decode strictly (an unknown or
// misspelt field fails), and the numbers and names that must agree between
// the Job, the hermes-pipe command line and the setup commands in its header
// must agree.
package kubernetes_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const jobFile = "indexed-job.yaml"

// flags reads the --name=value (or --name value) arguments of a container;
// a bare --name maps to "".
func flags(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			value = args[i+1]
			i++
		}
		if _, dup := m[name]; dup {
			t.Errorf("%s: --%s given twice", jobFile, name)
		}
		m[name] = value
	}
	return m
}

func TestIndexedJobExample(t *testing.T) {
	data, err := os.ReadFile(jobFile)
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(data, &job); err != nil {
		t.Fatalf("%s: %v", jobFile, err)
	}
	// The decoding is strict: the same file with one field misspelt fails.
	misspelt := strings.Replace(string(data), "backoffLimitPerIndex:", "backoffLimitPerIndx:", 1)
	if misspelt == string(data) {
		t.Fatalf("%s: no backoffLimitPerIndex to misspell", jobFile)
	}
	if err := yaml.UnmarshalStrict([]byte(misspelt), &batchv1.Job{}); err == nil || !strings.Contains(err.Error(), "backoffLimitPerIndx") {
		t.Fatalf("a misspelt field decoded without an error naming it: %v", err)
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Fatalf("%s: apiVersion %q kind %q, want batch/v1 Job", jobFile, job.APIVersion, job.Kind)
	}
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("%s: spec.completionMode is %v, want Indexed (JOB_COMPLETION_INDEX is the shard index)", jobFile, s.CompletionMode)
	}
	if s.Completions == nil || *s.Completions < 1 {
		t.Fatalf("%s: spec.completions must be set: it is the shard count", jobFile)
	}
	n := int(*s.Completions)
	if s.Parallelism == nil || *s.Parallelism < 1 || int(*s.Parallelism) > n {
		t.Errorf("%s: spec.parallelism %v: want 1..completions (%d)", jobFile, s.Parallelism, n)
	}
	if s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 {
		t.Errorf("%s: spec.backoffLimitPerIndex %v: want at least 1, so a failed index is retried on its own", jobFile, s.BackoffLimitPerIndex)
	}
	if s.MaxFailedIndexes != nil && (*s.MaxFailedIndexes < 0 || int(*s.MaxFailedIndexes) > n) {
		t.Errorf("%s: spec.maxFailedIndexes %d: want 0..completions (%d)", jobFile, *s.MaxFailedIndexes, n)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %q: podFailurePolicy and per-index backoff need Never", jobFile, pod.RestartPolicy)
	}
	if p := s.PodFailurePolicy; p != nil {
		for i, r := range p.Rules {
			if r.Action == batchv1.PodFailurePolicyActionFailIndex && s.BackoffLimitPerIndex == nil {
				t.Errorf("%s: podFailurePolicy.rules[%d]: FailIndex needs backoffLimitPerIndex", jobFile, i)
			}
			if r.OnExitCodes != nil && r.Action == batchv1.PodFailurePolicyActionFailIndex && !slices.Equal(r.OnExitCodes.Values, []int32{2}) {
				t.Errorf("%s: podFailurePolicy.rules[%d]: FailIndex on exit codes %v; hermes-pipe's usage error (the one retrying cannot fix) is 2", jobFile, i, r.OnExitCodes.Values)
			}
		}
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", jobFile, len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Command, []string{"hermes-pipe"}) || len(c.Args) == 0 || c.Args[0] != "generate" {
		t.Fatalf("%s: container runs %q %q, want hermes-pipe generate", jobFile, c.Command, c.Args)
	}
	f := flags(t, c.Args[1:])
	if f["shard-count"] != strconv.Itoa(n) {
		t.Errorf("%s: --shard-count=%s but completions is %d: they must be equal", jobFile, f["shard-count"], n)
	}
	if _, ok := f["shard"]; ok {
		t.Errorf("%s: --shard is set: the index must come from JOB_COMPLETION_INDEX", jobFile)
	}
	if _, ok := f["resume"]; !ok {
		t.Errorf("%s: no --resume: a retried index would refuse its own folder", jobFile)
	}
	for _, name := range []string{"prompts", "out", "base-url", "model"} {
		if f[name] == "" {
			t.Errorf("%s: --%s is missing", jobFile, name)
		}
	}

	// Every path the command reads or writes is a mount of a declared volume.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mountOf := func(path string) *corev1.VolumeMount {
		for i, m := range c.VolumeMounts {
			if path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return &c.VolumeMounts[i]
			}
		}
		return nil
	}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("%s: volumeMount %s names no volume", jobFile, m.Name)
		}
	}
	pm := mountOf(f["prompts"])
	if pm == nil {
		t.Fatalf("%s: --prompts=%s is on no volumeMount", jobFile, f["prompts"])
	}
	if strings.HasPrefix(f["out"], "s3://") {
		if sm := mountOf(f["spool"]); sm == nil || sm.ReadOnly {
			t.Errorf("%s: --out is a URL, so --spool (%q) must be on a writable volumeMount", jobFile, f["spool"])
		}
	}

	// The names the header's setup commands create are the ones the Job uses
	// (a command continued with a backslash is read as one line).
	header := regexp.MustCompile(`\\\s*\n#\s*`).ReplaceAllString(string(data), " ")
	var created []string
	for _, m := range regexp.MustCompile(`kubectl create secret generic (\S+)`).FindAllStringSubmatch(header, -1) {
		created = append(created, m[1])
	}
	var used []string
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			used = append(used, e.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !slices.Contains(used, e.ValueFrom.SecretKeyRef.Name) {
			used = append(used, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	slices.Sort(created)
	slices.Sort(used)
	if len(used) == 0 || !slices.Equal(created, used) {
		t.Errorf("%s: the header creates secrets %v, the container uses %v", jobFile, created, used)
	}
	// The secret meant for the store holds the AWS keys the S3 --out needs.
	if strings.HasPrefix(f["out"], "s3://") && !regexp.MustCompile(`kubectl create secret generic \S+ [^\n]*--from-literal=AWS_ACCESS_KEY_ID=`).MatchString(header) {
		t.Errorf("%s: --out is s3:// but no secret the header creates holds AWS_ACCESS_KEY_ID", jobFile)
	}
	cm := regexp.MustCompile(`kubectl create configmap (\S+) --from-file=(\S+)`).FindStringSubmatch(header)
	if cm == nil {
		t.Fatalf("%s: the header creates no configmap for the prompts", jobFile)
	}
	pv := volumes[pm.Name]
	if pv.ConfigMap == nil || pv.ConfigMap.Name != cm[1] {
		t.Errorf("%s: the prompts volume %s is not the configmap %s the header creates", jobFile, pm.Name, cm[1])
	}
	if want := strings.TrimSuffix(pm.MountPath, "/") + "/" + cm[2]; f["prompts"] != want {
		t.Errorf("%s: --prompts=%s, but the configmap made --from-file=%s is mounted at %s", jobFile, f["prompts"], cm[2], pm.MountPath)
	}
}
