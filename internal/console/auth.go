package console

import (
	"errors"
	"net/http"

	"github.com/acme/paymentsvc/internal/operators"
)

// loginForm is what the sign-in page shows again after a refusal.
type loginForm struct{ Email string }

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Data: loginForm{}})
}

// login signs an operator in: a new session (a new id, never one from
// before), its cookie, and 303 to the overview. A wrong email or password
// answers 401 with the form and no hint which was wrong; a locked-out email
// 429.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	email, password := r.PostFormValue("email"), r.PostFormValue("password")
	log := s.Log.With("operator", operators.NormalizeEmail(email), "remote", r.RemoteAddr)
	sess, err := s.Sessions.SignIn(r.Context(), email, password)
	switch {
	case errors.Is(err, operators.ErrLockedOut):
		log.WarnContext(r.Context(), "console: sign-in refused: locked out")
		s.render(w, r, http.StatusTooManyRequests, "login", view{Title: "Sign in", Data: loginForm{Email: email},
			Flash: &flash{Text: "Too many failed sign-ins for this email. Try again in 15 minutes."}})
		return
	case errors.Is(err, operators.ErrBadCredentials):
		log.WarnContext(r.Context(), "console: sign-in failed")
		s.render(w, r, http.StatusUnauthorized, "login", view{Title: "Sign in", Data: loginForm{Email: email},
			Flash: &flash{Text: "Wrong email or password."}})
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	if old, err := r.Cookie(CookieName); err == nil && old.Value != "" {
		// The browser's session from before, if any, ends: one browser,
		// one session, never the old id again.
		if err := s.Sessions.SignOut(r.Context(), old.Value); err != nil {
			log.WarnContext(r.Context(), "console: ending the session from before the sign-in", "err", err)
		}
	}
	log.InfoContext(r.Context(), "console: signed in", "role", sess.Operator.Role)
	http.SetCookie(w, s.cookie(sess.Token, 0))
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// logout ends the session (Sign out) and forgets its cookie.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Cookie(CookieName) // session let it through: it is there
	if err := s.Sessions.SignOut(r.Context(), c.Value); err != nil {
		s.internal(w, r, err)
		return
	}
	s.Log.InfoContext(r.Context(), "console: signed out", "operator", sessionOf(r.Context()).Operator.Email, "remote", r.RemoteAddr)
	http.SetCookie(w, s.cookie("", -1))
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// cookie is the session cookie holding token (maxAge -1 deletes it; 0 lasts
// as long as the browser runs: the session's expiry is the server's).
func (s *server) cookie(token string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: token, Path: "/console", MaxAge: maxAge,
		HttpOnly: true, Secure: s.SecureCookie, SameSite: http.SameSiteStrictMode,
	}
}
