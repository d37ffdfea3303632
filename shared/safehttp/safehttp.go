// Package safehttp builds HTTP clients for requests to URLs that users or
// models choose, guarding against server-side request forgery (SSRF).
//
// A client from NewClient checks every address it connects to, after DNS
// resolution and immediately before the connection is made, so neither a
// hostname that resolves to an internal address nor DNS rebinding between
// a check and the dial can reach loopback, private, link-local (the cloud
// metadata service included) or other non-public destinations. Redirects
// are followed only to http and https URLs, a bounded number of times, and
// each hop is dialed through the same check. Proxies from the environment
// are never used, since a proxy would make the dialed address meaningless.
package safehttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Defaults for Options fields left zero.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 5
)

// ErrScheme is returned, wrapped, for a request or redirect to a URL whose
// scheme is not http or https.
var ErrScheme = errors.New("only http and https URLs are allowed")

// ErrTooManyRedirects is returned, wrapped, when a request is redirected more
// often than Options.MaxRedirects allows.
var ErrTooManyRedirects = errors.New("too many redirects")

// Options configures NewClient.
type Options struct {
	// AllowPrivate turns the address check off, so that loopback, private
	// and link-local destinations can be reached. For local development and
	// tests only; never in a deployment that runs untrusted requests.
	AllowPrivate bool
	// Timeout bounds a whole request, redirects and reading the body
	// included. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed. Zero means
	// DefaultMaxRedirects; a negative value follows none (the redirect
	// response itself is returned).
	MaxRedirects int
	// Check decides whether a resolved address may be dialed, returning an
	// error to refuse it (an error that does not wrap ErrForbiddenAddress
	// is wrapped so that it does). Nil means CheckAddr.
	// A deployment can use it to refuse more (say, its own public
	// ranges). Ignored when AllowPrivate is set.
	Check func(netip.Addr) error
}

// NewClient returns an HTTP client that refuses non-public destinations
// (unless o.AllowPrivate) and non-http(s) URLs, follows at most
// o.MaxRedirects redirects and uses no proxy.
//
// Requests fail with an error wrapping ErrForbiddenAddress when a resolved
// address is refused (see CheckAddr), ErrScheme for another URL scheme and
// ErrTooManyRedirects when redirects exceed the cap. The check runs in the
// dialer's ControlContext, before the connect system call, so no packet is
// sent to a refused address.
func NewClient(o Options) *http.Client {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxRedirects := o.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}

	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
	}
	if !o.AllowPrivate {
		check := o.Check
		if check == nil {
			check = CheckAddr
		}
		dialer.ControlContext = control(check)
	}

	transport := &http.Transport{
		Proxy:                  nil, // never from the environment: the dial check must see the real destination
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}

	return &http.Client{
		Transport: schemeGuard{next: transport},
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: stopped after %d", ErrTooManyRedirects, maxRedirects)
			}
			return checkScheme(req)
		},
	}
}

// schemeGuard refuses requests whose URL scheme is not http or https
// before they reach the transport.
type schemeGuard struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (g schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkScheme(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return g.next.RoundTrip(req)
}

func checkScheme(req *http.Request) error {
	if req.URL == nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		scheme := ""
		if req.URL != nil {
			scheme = req.URL.Scheme
		}
		return fmt.Errorf("%w: got %q", ErrScheme, scheme)
	}
	return nil
}

// control returns the dialer's ControlContext, which applies check to the
// resolved "ip:port" about to be connected to.
func control(check func(netip.Addr) error) func(context.Context, string, string, syscall.RawConn) error {
	return func(_ context.Context, network, address string, _ syscall.RawConn) error {
		switch network {
		case "tcp", "tcp4", "tcp6":
		default:
			return fmt.Errorf("%w: network %q", ErrForbiddenAddress, network)
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: unparsable address %q", ErrForbiddenAddress, address)
		}
		if err := check(ap.Addr()); err != nil {
			if !errors.Is(err, ErrForbiddenAddress) {
				err = fmt.Errorf("%w: %v", ErrForbiddenAddress, err)
			}
			return err
		}
		return nil
	}
}
