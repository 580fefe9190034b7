package client

import (
	"net/url"
	"reflect"
	"strconv"
)

// queryOf encodes the non-zero fields of a params struct by their query
// tags, so that the tag (which the spec test checks) is the only place a
// parameter's name is written.
func queryOf(params any) url.Values {
	q := url.Values{}
	v := reflect.ValueOf(params)
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("query")
		f := v.Field(i)
		if name == "" || f.IsZero() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			q.Set(name, f.String())
		case reflect.Int, reflect.Int64:
			q.Set(name, strconv.FormatInt(f.Int(), 10))
		default:
			panic("client: query parameter " + name + " of kind " + f.Kind().String())
		}
	}
	return q
}
