// Package apispec embeds the OpenAPI description of the service, served at
// /openapi.yaml and used by the tests that validate real traffic against it.
package apispec

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
