package tools

import (
	"context"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even where the host has no zoneinfo (Lambda's minimal images)
)

// namedLayouts are the Go layout constants datetime_now accepts by name.
func namedLayouts() map[string]string {
	return map[string]string{
		"RFC3339": time.RFC3339, "RFC3339Nano": time.RFC3339Nano, "RFC1123": time.RFC1123, "RFC1123Z": time.RFC1123Z,
		"RFC822": time.RFC822, "RFC822Z": time.RFC822Z, "RFC850": time.RFC850, "ANSIC": time.ANSIC,
		"UnixDate": time.UnixDate, "Kitchen": time.Kitchen, "DateTime": time.DateTime, "DateOnly": time.DateOnly,
		"TimeOnly": time.TimeOnly, "Stamp": time.Stamp,
	}
}

func datetimeNowTool(now func() time.Time) *Tool {
	return &Tool{
		ID:       "datetime_now",
		Name:     "Current date and time",
		Category: CategoryTime,
		Description: "Returns the current date and time in a time zone, formatted, plus the Unix timestamp. " +
			"Fields: timezone (an IANA zone name such as \"UTC\", \"Europe/Paris\" or \"America/New_York\"; default UTC), " +
			"format (a Go time layout written with the reference time Mon Jan 2 15:04:05 MST 2006, e.g. \"2006-01-02\" for a date or \"15:04\" for hours and minutes, " +
			"or a layout name: RFC3339 (default), RFC3339Nano, RFC1123, RFC1123Z, RFC822, RFC822Z, RFC850, ANSIC, UnixDate, Kitchen, DateTime, DateOnly, TimeOnly, Stamp). " +
			"Outputs: iso (the time formatted with format, ISO 8601 / RFC 3339 by default) and unix (seconds since 1970-01-01 UTC). " +
			`Example: {"timezone": "Europe/Paris"} returns {"iso": "2024-05-01T14:30:00+02:00", "unix": 1714566600}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "timezone": {"type": "string", "default": "UTC", "maxLength": 64, "description": "IANA time zone name, e.g. \"UTC\", \"Europe/Paris\", \"Asia/Tokyo\".", "examples": ["Europe/Paris"]},
    "format": {"type": "string", "default": "2006-01-02T15:04:05Z07:00", "minLength": 1, "maxLength": 200, "description": "Go time layout (reference time Mon Jan 2 15:04:05 MST 2006), e.g. \"2006-01-02 15:04\", or a layout name such as \"RFC1123\" or \"DateOnly\". Default RFC 3339.", "examples": ["2006-01-02", "RFC1123"]}
  },
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "iso": {"type": "string", "description": "The current time in the zone, formatted with format (RFC 3339, e.g. 2024-05-01T14:30:00+02:00, by default)."},
    "unix": {"type": "integer", "description": "The current time as whole seconds since 1970-01-01T00:00:00Z."}
  },
  "required": ["iso", "unix"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Timeout:     5 * time.Second,
		Run: func(_ context.Context, in map[string]any) (map[string]any, error) {
			return runDatetimeNow(now, in)
		},
	}
}

// runDatetimeNow formats now() in input "timezone" with input "format". It
// fails with INVALID_PARAMS for a zone that is not a known IANA name
// ("Local" included: the server's zone is meaningless to a caller).
func runDatetimeNow(now func() time.Time, in map[string]any) (map[string]any, error) {
	zone, err := stringArg(in, "timezone", false, "UTC")
	if err != nil {
		return nil, err
	}
	layout, err := stringArg(in, "format", false, time.RFC3339)
	if err != nil {
		return nil, err
	}
	if zone == "" {
		zone = "UTC"
	}
	if layout == "" {
		layout = time.RFC3339
	}
	if named, ok := namedLayouts()[layout]; ok {
		layout = named
	}
	if strings.EqualFold(zone, "local") {
		return nil, invalidField("timezone", "unknown time zone %q: use an IANA name such as \"Europe/Paris\"", zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, invalidField("timezone", "unknown time zone %q: use an IANA name such as \"Europe/Paris\"", zone)
	}
	t := now().In(loc)
	return map[string]any{"iso": t.Format(layout), "unix": t.Unix()}, nil
}
