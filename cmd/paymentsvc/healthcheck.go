package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/acme/paymentsvc/internal/redact"
)

// healthcheckTimeout bounds the whole check, well inside a container
// runtime's own HEALTHCHECK timeout.
const healthcheckTimeout = 3 * time.Second

// healthcheck GETs target, or http://HTTP_ADDR/healthz when target is empty,
// and reports whether it answered 200. It exists because the image is
// distroless: no shell and no curl for a container HEALTHCHECK.
func healthcheck(ctx context.Context, target, httpAddr string, stderr io.Writer) int {
	if target == "" {
		host, port, err := net.SplitHostPort(httpAddr)
		if err != nil || port == "" || port == "0" {
			fmt.Fprintf(stderr, "healthcheck: HTTP_ADDR %q names no port to check\n", httpAddr)
			return 1
		}
		// A wildcard address listens on every interface, loopback included.
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
		target = "http://" + net.JoinHostPort(host, port) + "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %s\n", redact.Text(err.Error(), target))
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s answered %d\n", req.URL.Redacted(), resp.StatusCode)
		return 1
	}
	return 0
}
