// Package redact hides the credentials that configuration URLs may carry
// (DATABASE_URL, NATS_URL, PROVIDER_URL, SIM_WEBHOOK_URL) wherever one is
// printed: usage text, log lines and error messages.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces every hidden credential.
const Mask = "***"

// Unparsed replaces a whole connection string that is not a URL (a
// PostgreSQL keyword/value string, a malformed URL): its password may be
// anywhere in it.
const Unparsed = "(redacted connection string)"

// placeholder survives url.URL.String unescaped, unlike Mask's '*', and is
// swapped for Mask at the end.
const placeholder = "REDACTEDxREDACTED"

// URL returns raw with its credentials masked: the password of the user
// info; the whole user info when it has no password, since then it is a
// token (nats://token@host, https://key@host), except in a PostgreSQL URL,
// where it is the role name; and the value of every query parameter whose
// name suggests a secret (password, token, secret, key, auth, sig…). A
// comma-separated list of URLs (NATS_URL's servers) is masked item by item.
// A string that does not parse as a URL with a scheme is replaced whole.
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	if parts, ok := list(raw); ok {
		for i, p := range parts {
			parts[i] = URL(p)
		}
		return strings.Join(parts, ",")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return Unparsed
	}
	if u.User != nil {
		name := u.User.Username()
		pass, hasPass := u.User.Password()
		switch {
		case hasPass && (pass != "" || isPostgres(u.Scheme)):
			u.User = url.UserPassword(name, placeholder)
		case !isPostgres(u.Scheme):
			u.User = url.User(placeholder)
		}
	}
	u.RawQuery = maskQuery(u.RawQuery, func(string) string { return placeholder })
	return strings.ReplaceAll(u.String(), placeholder, Mask)
}

// Text returns text with every credential of the URLs raws masked: each URL
// as URL shows it, then any credential still left in another form (percent
// decoded, inside a message that quoted only part of the URL). Error
// messages quote the URL they failed on (url.Parse does), so log them
// through Text.
func Text(text string, raws ...string) string {
	for _, raw := range raws {
		if raw == "" {
			continue
		}
		text = strings.ReplaceAll(text, raw, URL(raw))
		for _, s := range secrets(raw) {
			text = strings.ReplaceAll(text, s, Mask)
		}
	}
	return text
}

// secrets lists the substrings of raw that URL hides, in the forms they may
// take in a message (as written and percent-decoded). An unparsable item is
// its own secret, whole.
func secrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	parts, ok := list(raw)
	if !ok {
		parts = []string{raw}
	}
	for _, p := range parts {
		u, err := url.Parse(p)
		if err != nil || u.Scheme == "" || u.Opaque != "" {
			add(p)
			continue
		}
		if u.User != nil {
			pass, hasPass := u.User.Password()
			if hasPass && pass != "" {
				add(pass)
				add(rawPassword(p))
			} else if !hasPass && !isPostgres(u.Scheme) {
				add(u.User.Username())
			}
		}
		maskQuery(u.RawQuery, func(v string) string { add(v); return v })
	}
	return out
}

// rawPassword is the password of p as written, before percent-decoding.
func rawPassword(p string) string {
	_, rest, ok := strings.Cut(p, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pass, _ := strings.Cut(rest[:at], ":")
	return pass
}

// list splits a comma-separated list of URLs. A comma inside one URL (the
// host list of a multi-host PostgreSQL URL) does not make a list: every item
// must have a scheme of its own.
func list(raw string) ([]string, bool) {
	if !strings.Contains(raw, ",") {
		return nil, false
	}
	parts := strings.Split(raw, ",")
	for _, p := range parts {
		if !strings.Contains(p, "://") {
			return nil, false
		}
	}
	return parts, true
}

// maskQuery returns the raw query with the value of every secret parameter
// replaced by mask(value), keeping the parameters' order and spelling.
func maskQuery(rawQuery string, mask func(string) string) string {
	if rawQuery == "" {
		return ""
	}
	params := strings.Split(rawQuery, "&")
	for i, kv := range params {
		k, v, ok := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if ok && secretName(name) {
			params[i] = k + "=" + mask(v)
		}
	}
	return strings.Join(params, "&")
}

// secretName reports whether a query parameter named name may carry a
// credential. It errs on the side of hiding (sslkey is a path, and hidden).
func secretName(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "pwd", "secret", "token", "key", "auth", "sig", "credential"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

func isPostgres(scheme string) bool {
	return scheme == "postgres" || scheme == "postgresql"
}
