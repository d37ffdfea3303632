package template_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deployDoc is the deployment guide whose IAM tables restate wantGrants
// and wantBlobGrants for operators.
var deployDoc = filepath.Join("..", "..", "docs", "deploy.md")

// Headers of the two tables of docs/deploy.md, "IAM, per function".
var (
	dynamoTableHeader = []string{"function", "UsersTable", "SessionsTable", "DataTable", "RateLimitsTable", "OAuthTable"}
	blobTableHeader   = []string{"function", "uploads/", "attachments/", "chats/", "runs/", "calls/", "exports/", "knowledge/", "ListBucket"}
)

// TestDeployDocIAMTables holds the IAM tables of docs/deploy.md to the
// reviewed grants the template is checked against, so that the guide
// cannot drift from the template: every function with its DynamoDB
// actions per table and index, and its blob bucket actions per prefix.
// A failure prints the row the guide should have.
func TestDeployDocIAMTables(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(deployDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	t.Run("DynamoDB", func(t *testing.T) {
		rows, err := markdownTable(doc, dynamoTableHeader)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{}
		for fn, grants := range wantGrants {
			want[fn] = dynamoRow(grants)
		}
		compareRows(t, rows, want, dynamoTableHeader)
	})
	t.Run("BlobBucket", func(t *testing.T) {
		rows, err := markdownTable(doc, blobTableHeader)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{}
		for fn, grants := range wantBlobGrants {
			want[fn] = blobRow(grants)
		}
		compareRows(t, rows, want, blobTableHeader)
	})
}

// dynamoRow renders grants (table or "table/index/name" -> actions) as the
// cells of dynamoTableHeader: "GetItem, PutItem; Query on `GSI1`".
func dynamoRow(grants map[string][]string) []string {
	cells := make([]string, len(dynamoTableHeader)-1)
	for i, table := range dynamoTableHeader[1:] {
		var parts []string
		if actions := grants[table]; len(actions) > 0 {
			parts = append(parts, strings.Join(trimPrefixes(actions, "dynamodb:"), ", "))
		}
		for _, key := range sortedKeys(grants) {
			if index, ok := strings.CutPrefix(key, table+"/index/"); ok {
				parts = append(parts, strings.Join(trimPrefixes(grants[key], "dynamodb:"), ", ")+" on `"+index+"`")
			}
		}
		cells[i] = strings.Join(parts, "; ")
	}
	return cells
}

// blobRow renders grants (prefix -> actions, "list" -> prefixes) as the
// cells of blobTableHeader: "Get, Put, Delete".
func blobRow(grants map[string][]string) []string {
	cells := make([]string, len(blobTableHeader)-1)
	for i, col := range blobTableHeader[1:] {
		if col == "ListBucket" {
			var list []string
			for _, p := range grants["list"] {
				if p == wholeBucketList {
					p = "whole bucket"
				} else {
					p = "under " + p
				}
				list = append(list, p)
			}
			cells[i] = strings.Join(list, ", ")
			continue
		}
		var short []string
		for _, a := range grants[col] {
			short = append(short, strings.TrimSuffix(strings.TrimPrefix(a, "s3:"), "Object"))
		}
		cells[i] = strings.Join(short, ", ")
	}
	return cells
}

func trimPrefixes(in []string, prefix string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.TrimPrefix(s, prefix)
	}
	return out
}

// compareRows compares the documented rows with the wanted ones (function
// -> cells after the first), both ways; cells compare as sets of
// comma- and semicolon-separated items, so order does not matter.
func compareRows(t *testing.T, got, want map[string][]string, header []string) {
	t.Helper()
	for _, fn := range sortedKeys(want) {
		row, ok := got[fn]
		if !ok {
			t.Errorf("%s has no row; want | %s | %s |", fn, fn, strings.Join(want[fn], " | "))
			continue
		}
		for i, cell := range want[fn] {
			if !slices.Equal(cellItems(row[i]), cellItems(cell)) {
				t.Errorf("%s, %s: documented %q, want %q", fn, header[i+1], row[i], cell)
			}
		}
	}
	for _, fn := range sortedKeys(got) {
		if _, ok := want[fn]; !ok {
			t.Errorf("row %s: no such function in the reviewed grants", fn)
		}
	}
}

// cellItems splits a cell into its sorted items: "Query on `GSI1`" and
// "GetItem" are items; "GetItem, PutItem; Query on `GSI1`" holds three.
func cellItems(cell string) []string {
	var out []string
	for _, part := range strings.Split(cell, ";") {
		part = strings.TrimSpace(part)
		actions, index, hasIndex := strings.Cut(part, " on ")
		for _, a := range strings.Split(actions, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			if hasIndex {
				a += " on " + strings.TrimSpace(index)
			}
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// markdownTable finds the table of doc whose header row is exactly header
// and returns its rows by their first cell (backquotes removed), each with
// the cells after the first. It fails when there is no such table, when
// two rows name the same function or when a row has another number of
// cells.
func markdownTable(doc string, header []string) (map[string][]string, error) {
	lines := strings.Split(doc, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return slices.Equal(tableCells(l), header) })
	if start < 0 {
		return nil, fmt.Errorf("%s: no table with the header | %s |", deployDoc, strings.Join(header, " | "))
	}
	rows := map[string][]string{}
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(strings.TrimSpace(l), "|") {
			break
		}
		cells := tableCells(l)
		if len(cells) != len(header) {
			return nil, fmt.Errorf("%s: row %q has %d cells, want %d", deployDoc, l, len(cells), len(header))
		}
		fn := strings.Trim(cells[0], "`")
		if _, dup := rows[fn]; dup {
			return nil, fmt.Errorf("%s: two rows for %s", deployDoc, fn)
		}
		rows[fn] = cells[1:]
	}
	return rows, nil
}

// tableCells returns the trimmed cells of a Markdown table row.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}
