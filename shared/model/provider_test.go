package model_test

import (
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

func TestObjectArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"", "{}", true},
		{"  null ", "{}", true},
		{`{ "a" : [1, 2] }`, `{"a":[1,2]}`, true},
		{`[1]`, "", false},
		{`"s"`, "", false},
		{`{"a":`, "", false},
	}
	for _, tt := range tests {
		got, err := model.ObjectArgs([]byte(tt.in))
		if (err == nil) != tt.ok || (tt.ok && string(got) != tt.want) {
			t.Errorf("ObjectArgs(%q) = %s, %v; want %s ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestUnknownModel(t *testing.T) {
	t.Parallel()
	e := model.UnknownModel("op", "x")
	if e.Kind != errs.Invalid || e.CodeOrDefault() != "INVALID_MODEL" || len(e.Details) != 1 || e.Details[0].Field != "modelId" {
		t.Errorf("UnknownModel = %+v", e)
	}
}
