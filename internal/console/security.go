package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"

	"github.com/acme/paymentsvc/internal/operators"
)

// contentSecurityPolicy lets a page load only the console's own files: no
// inline script or style (so injected markup could not run even if it got
// past the escaping), no framing, forms posting only to the console.
const contentSecurityPolicy = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"

// secureHeaders sets the headers every answer of the console carries.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// crossOrigin is the standard library's CSRF defence (Sec-Fetch-Site, or
// Origin against Host): it refuses a browser's cross-origin POST.
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin answers 403 to a POST from another origin: one a browser marks
// cross-site (net/http's CrossOriginProtection), and one whose Origin header
// names another host than the one asked, whatever Sec-Fetch-Site says.
func (s *server) sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		err := crossOrigin.Check(r)
		if err == nil && !originMatches(r) {
			err = errors.New("Origin names another origin")
		}
		if err != nil {
			s.Log.WarnContext(r.Context(), "console: cross-origin request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "err", err)
			s.fail(w, r, http.StatusForbidden, "This form was sent from another site, so nothing was done.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originMatches reports whether the request's Origin, if it has one, is
// the host it was sent to.
func originMatches(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && u.Host == r.Host
}

type sessionKey struct{}

// sessionOf is the request's live session (set by session).
func sessionOf(ctx context.Context) operators.Session {
	sess, _ := ctx.Value(sessionKey{}).(operators.Session)
	return sess
}

// session lets through only a request of a live session: any other
// answers 303 to the sign-in page. A POST must also carry the session's
// CSRF token (compared in constant time), else 403 and nothing is done.
func (s *server) session(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var token string
		if c, err := r.Cookie(CookieName); err == nil {
			token = c.Value
		}
		sess, err := s.Sessions.Find(r.Context(), token)
		if errors.Is(err, operators.ErrNoSession) {
			http.Redirect(w, r, "/console/login", http.StatusSeeOther)
			return
		}
		if err != nil {
			s.internal(w, r, err)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			sent := r.PostFormValue(csrfField)
			if sent == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(sess.CSRF)) != 1 {
				s.Log.WarnContext(r.Context(), "console: POST without the session's CSRF token refused", "path", r.URL.Path, "operator", sess.Operator.Email)
				s.fail(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)), http.StatusForbidden,
					"This form is not from your session (reload the page and try again), so nothing was done.")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	})
}

// allow lets through only an operator of at least role min: anyone else
// gets 403 and nothing is done.
func (s *server) allow(min operators.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			op := sessionOf(r.Context()).Operator
			if !op.Role.AtLeast(min) {
				s.Log.WarnContext(r.Context(), "console: action refused to role", "path", r.URL.Path, "operator", op.Email, "role", op.Role)
				s.fail(w, r, http.StatusForbidden, "Your role ("+string(op.Role)+") may not do this; nothing was done.")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// The form fields every form carries.
const (
	csrfField = "csrf_token"
	keyField  = "idempotency_key"
)

// maxForm bounds a form's body.
const maxForm = 64 << 10
