package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The report is Markdown that people edit too: sections measured by hand,
// paragraphs added after a measured section. The tool owns only the lines
// between the two markers of each of its sections,
//
//	<!-- bench:begin TITLE -->
//	## TITLE
//	...
//	<!-- bench:end TITLE -->
//
// and rewrites nothing else. A marker is a line of its own (HTML comments,
// invisible once rendered); the title is the section's, as -list prints it.
const (
	markerPrefix = "<!-- bench:"
	markerSuffix = " -->"
)

// beginMarker is the line opening the section title.
func beginMarker(title string) string { return markerPrefix + "begin " + title + markerSuffix }

// endMarker is the line closing the section title.
func endMarker(title string) string { return markerPrefix + "end " + title + markerSuffix }

// region is where one generated section lies in a report: its content is
// doc[start:end], the bytes after its begin marker's line up to its end
// marker's line.
type region struct {
	title      string
	line       int // the begin marker's line, from 1
	start, end int
}

// parseRegions finds the marked sections of doc, in order. It fails,
// naming the line, on a line that starts like a marker but is neither
// form, a begin marker inside an open section, an end marker without a
// begin or with another title, a title marked twice, and a section still
// open at the end of doc.
func parseRegions(doc string) ([]region, error) {
	var (
		regions []region
		open    *region
		seen    = map[string]int{}
	)
	pos := 0
	for n, line := range strings.SplitAfter(doc, "\n") {
		lineNo, next := n+1, pos+len(line)
		text := strings.TrimSpace(line)
		if !strings.HasPrefix(text, markerPrefix) {
			pos = next
			continue
		}
		kind, title, ok := parseMarker(text)
		switch {
		case !ok:
			return nil, fmt.Errorf("parseRegions: line %d: %q is not a marker: want %q or %q", lineNo, text, beginMarker("TITLE"), endMarker("TITLE"))
		case kind == "begin" && open != nil:
			return nil, fmt.Errorf("parseRegions: line %d: section %q begins inside section %q (line %d), which has no end marker before it", lineNo, title, open.title, open.line)
		case kind == "begin" && seen[title] != 0:
			return nil, fmt.Errorf("parseRegions: line %d: section %q is marked twice (first at line %d)", lineNo, title, seen[title])
		case kind == "begin":
			seen[title] = lineNo
			open = &region{title: title, line: lineNo, start: next}
		case open == nil:
			return nil, fmt.Errorf("parseRegions: line %d: end marker of section %q without its begin marker", lineNo, title)
		case title != open.title:
			return nil, fmt.Errorf("parseRegions: line %d: end marker of section %q inside section %q (line %d)", lineNo, title, open.title, open.line)
		default:
			open.end = pos
			regions = append(regions, *open)
			open = nil
		}
		pos = next
	}
	if open != nil {
		return nil, fmt.Errorf("parseRegions: section %q (line %d) has no end marker %q", open.title, open.line, endMarker(open.title))
	}
	return regions, nil
}

// parseMarker reads a marker line (trimmed): its kind, begin or end, and
// its title; ok is false for any other line.
func parseMarker(text string) (kind, title string, ok bool) {
	rest, ok := strings.CutPrefix(text, markerPrefix)
	if !ok {
		return "", "", false
	}
	if rest, ok = strings.CutSuffix(rest, markerSuffix); !ok {
		return "", "", false
	}
	kind, title, ok = strings.Cut(rest, " ")
	title = strings.TrimSpace(title)
	if !ok || (kind != "begin" && kind != "end") || title == "" || strings.Contains(title, "-->") {
		return "", "", false
	}
	return kind, title, true
}

// splice returns doc with each section of fresh (title to its text, from
// its heading on, without markers) put between that section's markers, and
// everything outside them as doc has it, byte for byte. A section that is
// not in fresh keeps its content, unless its markers hold nothing: then
// they get a line saying how to measure it. known are the titles of the
// sections the tool generates.
//
// splice fails, and doc is not to be written, when its markers do not
// parse (parseRegions), when a marker names a title not in known (a
// section renamed or removed), when a known title has no markers in doc (a
// new section: its markers go where it belongs), or when fresh holds a
// title not in known. splice(doc, known, nil) checks doc.
func splice(doc string, known []string, fresh map[string]string) (string, error) {
	regions, err := parseRegions(doc)
	if err != nil {
		return "", fmt.Errorf("splice: %w", err)
	}
	isKnown := map[string]bool{}
	for _, t := range known {
		isKnown[t] = true
	}
	marked := map[string]bool{}
	for _, r := range regions {
		if !isKnown[r.title] {
			return "", fmt.Errorf("splice: line %d: markers of section %q, which infra/bench does not have (renamed or removed? -list shows its sections): rename the markers or remove them", r.line, r.title)
		}
		marked[r.title] = true
	}
	for _, t := range known {
		if !marked[t] {
			return "", fmt.Errorf("splice: section %q has no markers: add the lines %q and %q where it belongs", t, beginMarker(t), endMarker(t))
		}
	}
	for t := range fresh {
		if !isKnown[t] {
			return "", fmt.Errorf("splice: measured section %q is not one of infra/bench's", t)
		}
	}
	var out strings.Builder
	out.Grow(len(doc))
	pos := 0
	for _, r := range regions {
		out.WriteString(doc[pos:r.start])
		text, ok := fresh[r.title]
		switch {
		case ok:
			out.WriteString(strings.Trim(text, "\n") + "\n")
		case strings.TrimSpace(doc[r.start:r.end]) == "":
			fmt.Fprintf(&out, "## %s\n\nNot measured yet: `go run ./infra/bench -only '%s'`.\n", r.title, regexp.QuoteMeta(r.title))
		default:
			out.WriteString(doc[r.start:r.end])
		}
		pos = r.end
	}
	out.WriteString(doc[pos:])
	return out.String(), nil
}
