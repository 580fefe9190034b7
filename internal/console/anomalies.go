package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/attempts"
)

// anomaliesShown bounds the anomalies a page lists.
const anomaliesShown = 200

type anomaliesData struct {
	Resolved bool
	Rows     []attempts.Recorded
}

// anomalyList is /console/anomalies (open ones, with Resolve) and
// /console/anomalies?resolved=true (who resolved them, when, the note).
func (s *server) anomalyList(w http.ResponseWriter, r *http.Request) {
	s.showAnomalies(w, r, r.URL.Query().Get("resolved") == "true", http.StatusOK, nil)
}

func (s *server) showAnomalies(w http.ResponseWriter, r *http.Request, resolved bool, status int, f *flash) {
	d := anomaliesData{Resolved: resolved}
	var err error
	if resolved {
		d.Rows, err = attempts.ResolvedAnomalies(r.Context(), s.Pool, anomaliesShown)
	} else {
		d.Rows, err = attempts.OpenAnomalies(r.Context(), s.Pool, anomaliesShown)
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.render(w, r, status, "anomalies", view{Title: "Anomalies", Nav: "anomalies", Flash: f, Data: d})
}

// maxNote bounds a resolution note.
const maxNote = 2000

// resolveAnomaly is Resolve: the anomaly is resolved once, by the operator,
// with the note; the form sent again finds it resolved and changes nothing.
func (s *server) resolveAnomaly(w http.ResponseWriter, r *http.Request) {
	op := sessionOf(r.Context()).Operator
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "There is no such anomaly.")
		return
	}
	note := strings.TrimSpace(r.PostFormValue("note"))
	if note == "" || len(note) > maxNote {
		s.showAnomalies(w, r, false, http.StatusBadRequest, &flash{Text: fmt.Sprintf("Note must say what was found or done (1 to %d characters).", maxNote)})
		return
	}
	a, resolved, err := attempts.ResolveAnomaly(r.Context(), s.Pool, id, op.Email, note)
	if errors.Is(err, attempts.ErrAnomalyNotFound) {
		s.fail(w, r, http.StatusNotFound, "There is no such anomaly.")
		return
	} else if err != nil {
		s.internal(w, r, err)
		return
	}
	s.Log.InfoContext(r.Context(), "console: resolve anomaly", "operator", op.Email, "anomaly_id", id, "resolved", resolved)
	f := &flash{OK: true, Text: fmt.Sprintf("Anomaly %d (%s) resolved.", a.ID, a.Kind)}
	if !resolved {
		f.Text = fmt.Sprintf("Anomaly %d was resolved already by %s; nothing changed.", a.ID, a.ResolvedBy)
	}
	s.showAnomalies(w, r, false, http.StatusOK, f)
}
