// Package signingkeystest serves a signing key set document the way AWS
// Secrets Manager does (GetSecretValue over its JSON protocol), so that the
// Lambda functions' real Secrets Manager path runs in tests.
package signingkeystest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Server is a fake Secrets Manager holding one secret.
type Server struct {
	// Reads counts the GetSecretValue calls.
	Reads atomic.Int64
	// URL is the endpoint's.
	URL      string
	secretID string
	doc      atomic.Value // string
}

// Start serves doc as the secret named secretID and gives this process
// static AWS credentials for the rest of the test (the test must not be
// parallel); the function under test reads the secret at s.URL (its
// AWS_ENDPOINT_URL_SECRETS_MANAGER).
func Start(t *testing.T, secretID string, doc []byte) *Server {
	t.Helper()
	s, _ := Serve(t, secretID, doc)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	return s
}

// Serve serves doc as the secret named secretID until the test ends and
// returns the endpoint's URL, for a process the test starts (its
// AWS_ENDPOINT_URL_SECRETS_MANAGER).
func Serve(t *testing.T, secretID string, doc []byte) (*Server, string) {
	t.Helper()
	s := New(secretID, doc)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s, ts.URL
}

// New returns a Server of doc as the secret named secretID, to be served
// by the caller (a benchmark outside a test); URL is left empty.
func New(secretID string, doc []byte) *Server {
	s := &Server{secretID: secretID}
	s.doc.Store(string(doc))
	return s
}

// ServeHTTP answers GetSecretValue of the one secret; anything else is
// refused as Secrets Manager refuses it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ SecretId string }
	if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || json.NewDecoder(r.Body).Decode(&in) != nil {
		http.Error(w, `{"__type":"InvalidRequestException","message":"unexpected call"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if in.SecretId != s.secretID {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
		return
	}
	s.Reads.Add(1)
	_ = json.NewEncoder(w).Encode(map[string]any{"ARN": s.secretID, "Name": "signing-keys", "SecretString": s.doc.Load().(string), "VersionId": "v1"})
}

// Set replaces the secret's value (a rotation).
func (s *Server) Set(doc []byte) { s.doc.Store(string(doc)) }
