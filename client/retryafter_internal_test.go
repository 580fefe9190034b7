package client

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	year := time.Duration(maxRetryAfterSeconds) * time.Second
	for v, want := range map[string]time.Duration{
		"":                    0,
		"0":                   0,
		"2":                   2 * time.Second,
		"-5":                  0,
		"soon":                0,
		"10000000000":         year, // would overflow: capped, never negative
		"9223372036854775807": year,
		time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat): 0,
	} {
		if got := parseRetryAfter(v); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got := parseRetryAfter(future); got < 58*time.Minute || got > time.Hour {
		t.Errorf("parseRetryAfter(%q) = %v, want about an hour", future, got)
	}
}
