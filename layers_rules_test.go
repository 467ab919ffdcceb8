package hermespipe_test

import (
	"reflect"
	"testing"
)

// TestCheckLayersFindsViolations runs the checker on synthetic import graphs,
// so TestLayers is known to fail when the tree breaks a rule.
func TestCheckLayersFindsViolations(t *testing.T) {
	cases := []struct {
		name string
		pkgs map[string]pkgImports
		want []string
	}{
		{
			name: "clean tree",
			pkgs: map[string]pkgImports{
				"cmd/hermes-pipe":           {Imports: []string{"pipeline", "stages/rollout", "sandbox/local", "schemas"}},
				"pipeline":                  {Imports: []string{"pipeline/atomicfile", "schemas"}},
				"stages/rollout":            {Imports: []string{"pipeline/llm", "sandbox", "schemas"}},
				"pipeline/llm":              {Imports: []string{"schemas"}},
				"sandbox/local":             {Imports: []string{"sandbox"}},
				"schemas":                   {Imports: []string{"schemas/pyjson"}, TestImports: []string{"schemas/pyjson/pyjsontest"}},
				"schemas/pyjson":            {},
				"sandbox":                   {},
				"pipeline/atomicfile":       {},
				"schemas/pyjson/pyjsontest": {},
			},
		},
		{
			name: "schemas imports the runtime",
			pkgs: map[string]pkgImports{
				"schemas":        {Imports: []string{"schemas/pyjson", "pipeline"}},
				"pipeline":       {},
				"schemas/pyjson": {},
			},
			want: []string{"schemas imports pipeline: schemas -> pipeline"},
		},
		{
			name: "schemas sub-package imports a leaf outside schemas",
			pkgs: map[string]pkgImports{
				"schemas/pyjson":      {Imports: []string{"pipeline/atomicfile"}},
				"pipeline/atomicfile": {},
			},
			want: []string{"schemas/pyjson imports pipeline/atomicfile: schemas/pyjson -> pipeline/atomicfile"},
		},
		{
			name: "sandbox reaches pipeline through an unruled folder",
			pkgs: map[string]pkgImports{
				"sandbox/docker":    {Imports: []string{"sandbox", "datasets/fixtures"}},
				"sandbox":           {},
				"datasets/fixtures": {Imports: []string{"pipeline/llm"}},
				"pipeline/llm":      {},
			},
			want: []string{"sandbox/docker imports pipeline/llm: sandbox/docker -> datasets/fixtures -> pipeline/llm"},
		},
		{
			name: "pipeline imports stages and cmd",
			pkgs: map[string]pkgImports{
				"pipeline/cluster":        {Imports: []string{"pipeline", "stages/generate/prompts"}},
				"pipeline":                {Imports: []string{"cmd/fakellm"}},
				"stages/generate/prompts": {},
				"cmd/fakellm":             {},
			},
			want: []string{
				"pipeline imports cmd/fakellm: pipeline -> cmd/fakellm",
				"pipeline/cluster imports cmd/fakellm: pipeline/cluster -> pipeline -> cmd/fakellm",
				"pipeline/cluster imports stages/generate/prompts: pipeline/cluster -> stages/generate/prompts",
			},
		},
		{
			name: "a stage imports the CLI in its tests only",
			pkgs: map[string]pkgImports{
				"stages/swe":      {Imports: []string{"schemas"}, TestImports: []string{"cmd/hermes-pipe"}},
				"schemas":         {},
				"cmd/hermes-pipe": {Imports: []string{"stages/swe"}},
			},
			want: []string{"stages/swe imports in its tests cmd/hermes-pipe: stages/swe -> cmd/hermes-pipe"},
		},
		{
			name: "a walk stops at the first forbidden package",
			pkgs: map[string]pkgImports{
				"sandbox/ssh":         {Imports: []string{"pipeline"}},
				"pipeline":            {Imports: []string{"pipeline/atomicfile"}},
				"pipeline/atomicfile": {},
			},
			want: []string{"sandbox/ssh imports pipeline: sandbox/ssh -> pipeline"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range checkLayers(tc.pkgs, layerRules) {
				got = append(got, v.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("violations:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

// TestLayerExceptions checks that an exception covers only its own import and
// that a stale exception is reported.
func TestLayerExceptions(t *testing.T) {
	vs := []layerViolation{
		{from: "pipeline/cluster", to: "stages/generate/prompts", testOnly: true},
		{from: "pipeline/cluster", to: "stages/generate/prompts", testOnly: false},
	}
	exc := []layerException{
		{from: "pipeline/cluster", to: "stages/generate/prompts", testOnly: true, reason: "r"},
		{from: "sandbox", to: "pipeline", reason: "stale"},
	}
	left, unused := applyExceptions(vs, exc)
	if len(left) != 1 || left[0].testOnly {
		t.Errorf("left = %+v, want only the production import", left)
	}
	if len(unused) != 1 || unused[0].from != "sandbox" {
		t.Errorf("unused = %+v, want the sandbox exception", unused)
	}
}
