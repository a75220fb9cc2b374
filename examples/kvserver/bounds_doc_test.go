//go:build unix

package main

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The answer past each bound on a request is the one docs/operating.md's
// table of bounds gives it: a request too large is 400 (bad_request), or
// 431 for a header, which net/http answers; a bound on the work in flight
// is 503, which TestServeBoundsWorkInFlight checks against a server.
func TestBoundsAnswerAsDocumented(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{}), "-max-prompt-tokens", "600", "-max-body-bytes", "64", "-max-header-bytes", "4096")
	answers := map[string]int{
		"-max-requests":         http.StatusServiceUnavailable,
		"-max-tokens-in-flight": http.StatusServiceUnavailable,
	}
	code, _, msg := answer(t, s.base, "prefill", `{"prompt":"b","tokens":601}`)
	answers["-max-prompt-tokens"] = code
	assert.Equal(t, http.StatusBadRequest, code, msg)
	code, _, msg = answer(t, s.base, "prefill", `{"prompt":"`+strings.Repeat("b", 64)+`"}`)
	answers["-max-body-bytes"] = code
	assert.Equal(t, http.StatusBadRequest, code, msg)
	assert.Equal(t, 2.0, metric(t, s.base, `kvserver_steps_total{outcome="bad_request",step="prefill"}`))

	req, err := http.NewRequest(http.MethodPost, s.base+"/prefill", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("h", 16384))
	resp, err := scrapes.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	answers["-max-header-bytes"] = resp.StatusCode
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	doc, err := os.ReadFile("../../docs/operating.md")
	require.NoError(t, err)
	rows := map[string]string{}
	for line := range strings.Lines(string(doc)) {
		if cells := strings.Split(line, "|"); len(cells) > 4 && strings.HasPrefix(line, "| `-max-") {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = cells[4]
		}
	}
	for flag, code := range answers {
		if assert.Contains(t, rows, flag, "docs/operating.md has no row for %s", flag) {
			assert.Contains(t, rows[flag], "`"+strconv.Itoa(code)+"`", "docs/operating.md: the answer past %s", flag)
		}
	}
}
