package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/acme/paymentsvc/internal/operators"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticRoot embed.FS

// staticFS holds static/…, served at /console/static/….
var staticFS fs.FS = staticRoot

// pageNames are the templates under templates/, each rendered inside layout.html.
var pageNames = []string{"login", "error", "overview", "payments", "payment", "anomalies", "tenants", "operators"}

// pages are the parsed templates, by name.
type pages struct{ byName map[string]*template.Template }

func loadPages() *pages {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		p.byName[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return p
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	// formKey mints the idempotency key of a form as the page is
	// rendered: the same form sent twice carries the same key.
	"formKey":     func() string { return rand.Text() },
	"major":       major,
	"voidReasons": func() []string { return voidReasons },
	"when":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"whenp": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"str": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	// ago is how long ago t was, to the second (to the minute past an hour).
	"ago": func(t time.Time) string {
		d := time.Since(t)
		if d >= time.Hour {
			return d.Truncate(time.Minute).String()
		}
		return d.Truncate(time.Second).String()
	},
}

// flash is the outcome of an action, shown at the top of the page.
type flash struct {
	OK   bool
	Text string
	// Secret is shown once beside the text (a new tenant's API key).
	Secret string
}

// view is what every page's template gets.
type view struct {
	Title   string
	Nav     string // the navigation entry of the page
	Session *operators.Session
	Flash   *flash
	Data    any
}

// CSRF is the session's token for the page's forms.
func (v view) CSRF() string {
	if v.Session == nil {
		return ""
	}
	return v.Session.CSRF
}

// Can reports whether the signed-in operator has at least role.
func (v view) Can(role string) bool {
	return v.Session != nil && v.Session.Operator.Role.AtLeast(operators.Role(role))
}

// render answers page name with status, for the request's session.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	if sess := sessionOf(r.Context()); sess.Operator.ID != "" {
		v.Session = &sess
	}
	var buf bytes.Buffer
	if err := s.pages.byName[name].Execute(&buf, v); err != nil {
		s.Log.ErrorContext(r.Context(), "console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers an error page with status and a message for the operator.
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", view{Title: http.StatusText(status), Flash: &flash{Text: msg}})
}

// internal answers 500 and logs err (its text is never shown).
func (s *server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.Log.ErrorContext(r.Context(), "console: request failed", "path", r.URL.Path, "err", err)
	s.fail(w, r, http.StatusInternalServerError, "Something went wrong on our side; it is logged. Try again.")
}
