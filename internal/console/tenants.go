package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/tenants"
)

type tenantsData struct{ Rows []tenants.Listed }

// tenantList is /console/tenants; admins also get Create tenant.
func (s *server) tenantList(w http.ResponseWriter, r *http.Request) {
	s.showTenants(w, r, http.StatusOK, nil)
}

func (s *server) showTenants(w http.ResponseWriter, r *http.Request, status int, f *flash) {
	rows, err := tenants.List(r.Context(), s.Pool)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.render(w, r, status, "tenants", view{Title: "Tenants", Nav: "tenants", Flash: f, Data: tenantsData{Rows: rows}})
}

// maxTenantName bounds a tenant's name.
const maxTenantName = 200

// createTenant is Create tenant (admins): the new API key is shown once, in
// the flash; the form sent again makes no second tenant.
func (s *server) createTenant(w http.ResponseWriter, r *http.Request) {
	op := sessionOf(r.Context()).Operator
	name, key := strings.TrimSpace(r.PostFormValue("name")), formKey(r)
	switch {
	case key == "":
		s.showTenants(w, r, http.StatusBadRequest, &flash{Text: "The form has no idempotency key; reload the page and try again."})
		return
	case name == "" || len(name) > maxTenantName:
		s.showTenants(w, r, http.StatusBadRequest, &flash{Text: fmt.Sprintf("Name must be 1 to %d characters.", maxTenantName)})
		return
	}
	c, replayed, err := tenants.CreateOnce(r.Context(), s.Pool, name, key)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.Log.InfoContext(r.Context(), "console: create tenant", "operator", op.Email, "tenant_id", c.ID, "replayed", replayed)
	f := &flash{OK: true, Text: fmt.Sprintf("Tenant %s (%s) created. Its API key, shown this once:", c.Name, c.ID), Secret: c.APIKey}
	if replayed {
		f.Text = fmt.Sprintf("This form had been sent already: tenant %s (%s) exists, and its API key was shown then.", c.Name, c.ID)
	}
	s.showTenants(w, r, http.StatusOK, f)
}

type operatorsData struct{ Rows []operators.Account }

// operatorList is /console/operators (admins).
func (s *server) operatorList(w http.ResponseWriter, r *http.Request) {
	rows, err := operators.List(r.Context(), s.Pool)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "operators", view{Title: "Operators", Nav: "operators", Data: operatorsData{Rows: rows}})
}
