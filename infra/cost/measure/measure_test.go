package measure_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/workflowchat/service/infra/cost/measure"
)

// TestMeasureCapacity: the tiny workload runs in process, and every kind
// of unit reports the DynamoDB capacity it consumed.
func TestMeasureCapacity(t *testing.T) {
	t.Parallel()
	got, err := measure.MeasureCapacity(context.Background(), measure.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{measure.KindShort, measure.KindLong, measure.KindRun, measure.KindSweep} {
		d, ok := got[kind]
		if !ok || d.ReadUnits <= 0 || d.Calls <= 0 {
			t.Errorf("%s: %+v", kind, d)
		}
		if kind != measure.KindSweep && d.WriteUnits <= 0 {
			t.Errorf("%s writes nothing: %+v", kind, d)
		}
		t.Logf("%s: %+v", kind, d)
	}
}

// TestFunctionNames: LogicalIDs names every function folder, as the dev
// server's stack does, and FunctionURLs are the HTTP functions served by
// their own function URL.
func TestFunctionNames(t *testing.T) {
	t.Parallel()
	mains, err := filepath.Glob("../../../functions/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no functions: %v", err)
	}
	for _, m := range mains {
		if dir := filepath.Base(filepath.Dir(m)); measure.LogicalIDs[dir] == "" {
			t.Errorf("functions/%s: no logical id in measure.LogicalIDs", dir)
		}
	}
	if len(measure.LogicalIDs) != len(mains) {
		t.Errorf("%d logical ids for %d functions", len(measure.LogicalIDs), len(mains))
	}
	p, err := measure.NewInProcess(context.Background(), map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, f := range p.Functions() {
		if measure.LogicalIDs[f.Dir] != f.LogicalID || measure.FunctionURLs[f.Dir] != f.FunctionURL {
			t.Errorf("%s (functions/%s): logical id %q, function URL %v in measure", f.LogicalID, f.Dir, measure.LogicalIDs[f.Dir], measure.FunctionURLs[f.Dir])
		}
	}
}
