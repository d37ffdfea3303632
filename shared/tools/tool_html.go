package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
)

// maxHTMLMatches caps the elements html_extract returns.
const maxHTMLMatches = 10000

func htmlExtractTool() *Tool {
	return &Tool{
		ID:       "html_extract",
		Name:     "Extract from HTML",
		Category: CategoryWeb,
		Description: "Selects elements of an HTML document with a CSS selector and returns their text or an attribute's values, e.g. to scrape titles, links or prices from a page fetched with http_request. " +
			"Fields: html (the HTML document or fragment), selector (a CSS selector such as \"h1\", \"a.external\", \"#price\", \"ul > li:nth-child(2)\", \"meta[name=description]\"), " +
			"attribute (optional: return this attribute of each element, e.g. \"href\" or \"content\", instead of its text; elements without it are skipped). " +
			"Text is the element's text content with surrounding whitespace trimmed. At most 10000 matches and 1 MiB of text. " +
			`Example: {"html": "<ul><li><a href=\"/a\">A</a></li><li><a href=\"/b\">B</a></li></ul>", "selector": "li a", "attribute": "href"} returns {"matches": ["/a", "/b"]}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "html": {"type": "string", "description": "The HTML to search; a whole page or a fragment.", "examples": ["<h1>Title</h1><p class=\"intro\">Hello</p>"]},
    "selector": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "CSS selector, e.g. \"h1\", \"p.intro\", \"#main a[href]\", \"table tr td:first-child\". Comma-separate several selectors to match any of them.", "examples": ["p.intro", "a[href]"]},
    "attribute": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Optional attribute name, e.g. \"href\", \"src\", \"content\". When set, matches holds this attribute's value for each selected element that has it; otherwise the elements' text."}
  },
  "required": ["html", "selector"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "matches": {"type": "array", "items": {"type": "string"}, "description": "In document order: each selected element's trimmed text, or its attribute's value when attribute is set (elements lacking the attribute are left out). Empty when nothing matches."}
  },
  "required": ["matches"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     10 * time.Second,
		Run:         runHTMLExtract,
	}
}

// runHTMLExtract selects input "selector" in input "html". It fails with
// INVALID_PARAMS for a selector that does not parse, and with an execution
// failure when more than maxHTMLMatches elements match or their text
// exceeds maxTextOutput bytes.
func runHTMLExtract(ctx context.Context, in map[string]any) (map[string]any, error) {
	doc, err := stringArg(in, "html", true, "")
	if err != nil {
		return nil, err
	}
	selector, err := stringArg(in, "selector", true, "")
	if err != nil {
		return nil, err
	}
	attr, err := stringArg(in, "attribute", false, "")
	if err != nil {
		return nil, err
	}
	sel, err := cascadia.Compile(selector)
	if err != nil {
		return nil, invalidField("selector", "invalid CSS selector: %v", err)
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("cannot parse HTML: %v", err)
	}
	found := d.FindMatcher(sel)
	if found.Length() > maxHTMLMatches {
		return nil, fmt.Errorf("%d elements match; at most %d are returned: make the selector more specific", found.Length(), maxHTMLMatches)
	}
	matches := []any{}
	total := 0
	for _, s := range found.EachIter() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var v string
		if attr != "" {
			a, ok := s.Attr(attr)
			if !ok {
				continue
			}
			v = a
		} else {
			v = strings.TrimSpace(s.Text())
		}
		total += len(v)
		if total > maxTextOutput {
			return nil, fmt.Errorf("the selected text exceeds %d bytes: make the selector more specific", maxTextOutput)
		}
		matches = append(matches, v)
	}
	return map[string]any{"matches": matches}, nil
}
