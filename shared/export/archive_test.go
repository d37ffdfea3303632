package export_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/workflowchat/service/shared/export"
)

// TestArchiveStreamsJSON: an object's members and arrays written element
// by element read back as the JSON they stand for, with no, one and many
// elements, and a failing element stops the file with its error.
func TestArchiveStreamsJSON(t *testing.T) {
	var buf bytes.Buffer
	a := export.NewArchive(&buf)
	type item struct {
		N    int    `json:"n"`
		Text string `json:"text"`
	}
	each := func(n int) func(add func(any) error) error {
		return func(add func(any) error) error {
			for i := range n {
				if err := add(item{N: i, Text: "line\n\"quoted\""}); err != nil {
					return err
				}
			}
			return nil
		}
	}
	err := a.Object("obj.json", func(o *export.Object) error {
		if err := o.Field("head", map[string]string{"a": "b"}); err != nil {
			return err
		}
		for _, n := range []int{0, 1, 3} {
			if err := o.Array(string(rune('a'+n)), each(n)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Object("empty.json", func(*export.Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Array("list.json", each(1000)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := a.Array("broken.json", func(add func(any) error) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing array: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	var obj struct {
		Head    map[string]string
		A, B, D []item
	}
	if err := json.Unmarshal(files["obj.json"], &obj); err != nil {
		t.Fatalf("obj.json: %v\n%s", err, files["obj.json"])
	}
	if obj.Head["a"] != "b" || obj.A == nil || len(obj.A) != 0 || len(obj.B) != 1 || len(obj.D) != 3 || obj.D[2].N != 2 || obj.D[1].Text != "line\n\"quoted\"" {
		t.Errorf("obj.json = %+v\n%s", obj, files["obj.json"])
	}
	var empty map[string]any
	if err := json.Unmarshal(files["empty.json"], &empty); err != nil || len(empty) != 0 {
		t.Errorf("empty.json: %v %s", err, files["empty.json"])
	}
	var list []item
	if err := json.Unmarshal(files["list.json"], &list); err != nil || len(list) != 1000 || list[999].N != 999 {
		t.Errorf("list.json: %v, %d elements", err, len(list))
	}
}
