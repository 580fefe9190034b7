package delivery

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
)

// Limits of an endpoint.
const (
	// MaxEndpoints is how many endpoints (not deleted) a tenant may have.
	MaxEndpoints = 16
	// MaxURLLen and MaxDescriptionLen bound what a tenant stores.
	MaxURLLen         = 2048
	MaxDescriptionLen = 1000
	// SecretOverlap is how long a rotated-out secret keeps signing beside
	// the new one.
	SecretOverlap = 24 * time.Hour
)

// StatusEnabled is the status of every endpoint the API shows.
const StatusEnabled = "enabled"

// NewEndpointID returns a fresh endpoint id.
func NewEndpointID() string { return ids.New("we_", 12) }

// New is an endpoint to create, as a tenant asks for it.
type New struct {
	TenantID    string
	URL         string
	EventTypes  []string // nil: every type
	Description *string
}

// Validate reports, in words a client may read, why n cannot be created: a
// URL that is not absolute https:// (or http:// with allowHTTP), an unknown
// or repeated event type, an empty event type list (leave it out for every
// type), a description too long or holding NUL. Only the syntax of the URL
// is checked: the address it leads to is checked on every connection.
func (n New) Validate(allowHTTP bool) error {
	if err := ValidateURL(n.URL, allowHTTP); err != nil {
		return err
	}
	if n.EventTypes != nil && len(n.EventTypes) == 0 {
		return fmt.Errorf("event_types must name at least one event type; leave it out to receive every type")
	}
	for i, t := range n.EventTypes {
		if !KnownEventType(t) {
			return fmt.Errorf("event_types[%d] %q is not an event type (one of %s)", i, t, strings.Join(EventTypes, ", "))
		}
		if slices.Index(n.EventTypes, t) < i {
			return fmt.Errorf("event_types[%d] %q is named twice", i, t)
		}
	}
	if d := n.Description; d != nil {
		switch {
		case utf8.RuneCountInString(*d) > MaxDescriptionLen:
			return fmt.Errorf("description must be at most %d characters", MaxDescriptionLen)
		case strings.IndexByte(*d, 0) >= 0:
			return fmt.Errorf("description must not contain NUL characters (\\u0000)")
		}
	}
	return nil
}

// ValidateURL reports why raw cannot be an endpoint's URL.
func ValidateURL(raw string, allowHTTP bool) error {
	want := "https://"
	if allowHTTP {
		want = "https:// (or http://)"
	}
	if len(raw) > MaxURLLen {
		return fmt.Errorf("url must be at most %d characters", MaxURLLen)
	}
	if strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Errorf("url must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" {
		return fmt.Errorf("url must be an absolute %s URL with a host", want)
	}
	switch {
	case u.Scheme == "https", u.Scheme == "http" && allowHTTP:
	default:
		return fmt.Errorf("url must be an absolute %s URL, not %s://", want, u.Scheme)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Errorf("url must not have a fragment (#…)")
	}
	if p := u.Port(); p != "" && !validPort(p) {
		return fmt.Errorf("url has an invalid port %q", p)
	}
	return nil
}

func validPort(p string) bool {
	if len(p) > 5 || strings.Trim(p, "0123456789") != "" {
		return false
	}
	n := 0
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// Endpoint is a merchant's webhook endpoint as the API shows it: never its
// secret, which only the answers of a create and a rotation carry.
type Endpoint struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	EventTypes  []string  `json:"event_types"` // null: every type
	Description *string   `json:"description"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// WithSecret is the answer of a create or of a rotation: the endpoint and
// its (new) signing secret, shown this once.
type WithSecret struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	EventTypes  []string  `json:"event_types"`
	Description *string   `json:"description"`
	Status      string    `json:"status"`
	Secret      string    `json:"secret"`
	CreatedAt   time.Time `json:"created_at"`
}

func endpointOf(r db.WebhookEndpoint) Endpoint {
	return Endpoint{
		ID: r.ID, URL: r.Url, EventTypes: r.EventTypes, Description: r.Description,
		Status: StatusEnabled, CreatedAt: r.CreatedAt.UTC().Truncate(time.Second),
	}
}

func withSecret(r db.WebhookEndpoint) WithSecret {
	e := endpointOf(r)
	ws := WithSecret{ID: e.ID, URL: e.URL, EventTypes: e.EventTypes, Description: e.Description, Status: e.Status, CreatedAt: e.CreatedAt}
	if r.Secret != nil {
		ws.Secret = *r.Secret
	}
	return ws
}
