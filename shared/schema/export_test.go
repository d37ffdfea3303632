package schema

// Walk lists v's problems by the walk alone, without the library's
// verdict first, so that tests can hold the two against each other.
func Walk(s *Schema, v any) []Problem {
	v, _ = plain(v)
	w := walker{s: s}
	w.node(s.root, v, nil)
	return sorted(w.out)
}

// Verdict is the library's answer for v.
func Verdict(s *Schema, v any) error {
	v, _ = plain(v)
	return s.resolved.Validate(v)
}
