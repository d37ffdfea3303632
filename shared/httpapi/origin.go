package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Origin is where a request came from, as an event records it.
type Origin struct {
	IP        string
	UserAgent string
}

type originKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginFrom returns the origin ctx carries; empty without one.
func OriginFrom(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// ViewerAddressHeader carries the viewer's address, set by the CloudFront
// distribution in front of the API (which overwrites what a client sends):
// behind it, the connection API Gateway sees is CloudFront's.
const ViewerAddressHeader = "X-Viewer-Address"

// RequestOrigin returns r's origin: the address of ViewerAddressHeader
// when it holds one, else the IP of r.RemoteAddr (API Gateway's source
// address in Lambda, the TCP peer locally), and the User-Agent cut to
// maxUserAgent bytes.
func RequestOrigin(r *http.Request) Origin {
	ip := ""
	if v := strings.TrimSpace(r.Header.Get(ViewerAddressHeader)); v != "" && net.ParseIP(v) != nil {
		ip = v
	} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		ip = host
	} else {
		ip = r.RemoteAddr
	}
	return Origin{IP: ip, UserAgent: cutUTF8(r.UserAgent(), maxUserAgent)}
}

// ClientOrigin puts each request's origin (RequestOrigin) in its
// context, for the audit events its handler records.
func ClientOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(WithOrigin(r.Context(), RequestOrigin(r))))
	})
}

// maxUserAgent bounds the user agent an origin keeps.
const maxUserAgent = 512

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
