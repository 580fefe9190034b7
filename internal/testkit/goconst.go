package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// GoConst is a string constant declared in a Go source file.
type GoConst struct {
	Name  string
	Type  string // the declared type's name; "" when untyped
	Value string
}

// GoStringConsts returns the string constants the Go file at path
// declares, in order, so that a test can check code against a document
// (error codes) or run exactly the query a generated file holds.
func GoStringConsts(t testing.TB, path string) []GoConst {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatalf("testkit: parse %s: %v", path, err)
	}
	var out []GoConst
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			typ := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("testkit: %s: const %s: %v", path, name.Name, err)
				}
				out = append(out, GoConst{Name: name.Name, Type: typ, Value: v})
			}
		}
	}
	return out
}
