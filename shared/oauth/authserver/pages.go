package authserver

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

// pageStyle is the pages' only style sheet, inline and allowed by its hash
// in the Content-Security-Policy; the pages have no script at all.
const pageStyle = `body{font:16px/1.5 system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1d1d1f}` +
	`h1{font-size:1.4rem}label{display:block;margin:.8rem 0 .2rem}input[type=email],input[type=password]{width:100%;padding:.5rem;box-sizing:border-box}` +
	`button{margin:1rem .5rem 0 0;padding:.5rem 1.2rem;font-size:1rem}.muted{color:#6e6e73;font-size:.9rem}.error{color:#b00020}` +
	`code{word-break:break-all}ul{padding-left:1.2rem}`

var styleHash = func() string {
	sum := sha256.Sum256([]byte(pageStyle))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer"><title>{{.Title}}</title><style>{{.Style}}</style></head><body>{{end}}
{{define "hidden"}}<input type="hidden" name="csrf" value="{{.CSRF}}">{{range .Params}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}{{end}}

{{define "signin"}}{{template "head" .}}
<h1>Sign in to Workflow Chat</h1>
<p><strong>{{.ClientName}}</strong> wants to use your workflows. Sign in to continue.</p>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">{{template "hidden" .}}
<input type="hidden" name="action" value="sign-in">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="{{.Email}}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p class="muted">Client: <code>{{.ClientID}}</code></p>
</body></html>{{end}}

{{define "consent"}}{{template "head" .}}
<h1>Allow {{.ClientName}}?</h1>
<p>Signed in as <strong>{{.Email}}</strong>.</p>
<p><strong>{{.ClientName}}</strong> asks to:</p>
<ul><li>list the workflows you expose as tools, and run them as you</li></ul>
<p class="muted">Client: <code>{{.ClientID}}</code>{{if not .Verified}} (self-registered: its name is not verified){{end}}<br>
It will be sent back to <code>{{.RedirectURI}}</code>.<br>
You can disconnect it at any time from your connections.</p>
<form method="post" action="{{.Action}}">{{template "hidden" .}}
<button type="submit" name="action" value="approve">Allow</button>
<button type="submit" name="action" value="deny">Deny</button>
</form>
</body></html>{{end}}

{{define "error"}}{{template "head" .}}
<h1>This authorization request cannot continue</h1>
<p class="error" role="alert">{{.Error}}</p>
<p class="muted">Return to the application and try again.</p>
</body></html>{{end}}
`))

// pageParam is one authorization parameter carried through the forms.
type pageParam struct{ Name, Value string }

// pageData is what the pages show.
type pageData struct {
	Title       string
	Style       template.CSS
	Action      string
	CSRF        string
	Params      []pageParam
	ClientName  string
	ClientID    string
	Verified    bool
	RedirectURI string
	Email       string
	Error       string
}

// renderPage writes one of the pages with a strict Content-Security-Policy:
// nothing may load but the inline style (by hash), forms may post only to
// this origin and to formTarget (the client's redirect origin, where the
// consent form's answer goes), and no other site may frame the page.
func renderPage(w http.ResponseWriter, status int, name string, d pageData, formTarget string) {
	d.Style = template.CSS(pageStyle)
	formAction := "'self'"
	if formTarget != "" {
		formAction += " " + formTarget
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src "+styleHash+"; form-action "+formAction+
		"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, name, d)
}

// errorPage answers an authorization request that cannot be sent back to
// its client (unknown client, unregistered redirect URI, a failed CSRF
// check).
func errorPage(w http.ResponseWriter, status int, msg string) {
	renderPage(w, status, "error", pageData{Title: "Authorization error", Error: msg}, "")
}

// formTargetOf returns the CSP source of a redirect URI: its origin for
// http(s), its scheme for a native app's private-use scheme.
func formTargetOf(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil || strings.ContainsAny(redirectURI, " ;,'\"") {
		return ""
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + ":"
}
