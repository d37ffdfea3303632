package auth

import (
	_ "embed"
	"strings"
	"sync"
	"unicode/utf8"
)

// commonPasswordsText is the bundled list of common passwords (see the
// file's header for its source and license).
//
//go:embed common-passwords.txt
var commonPasswordsText string

var commonPasswords = sync.OnceValue(func() map[string]struct{} {
	m := make(map[string]struct{}, 2000)
	for line := range strings.Lines(commonPasswordsText) {
		if line = strings.TrimRight(line, "\n"); line != "" && !strings.HasPrefix(line, "#") {
			m[line] = struct{}{}
		}
	}
	return m
})

// Common reports whether password is too easy to guess to be accepted: one
// of the 1,751 bundled common passwords of 8 characters or more (compared
// without case), or one character repeated ("        ", "aaaaaaaa").
func Common(password string) bool {
	if r, _ := utf8.DecodeRuneInString(password); strings.Trim(password, string(r)) == "" {
		return true
	}
	_, ok := commonPasswords()[strings.ToLower(password)]
	return ok
}
