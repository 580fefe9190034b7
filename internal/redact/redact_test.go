package redact

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURLMasksEveryCredential(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                       "",
		"nats://127.0.0.1:4222":  "nats://127.0.0.1:4222",
		"nats://u:s3cret@h:4222": "nats://u:***@h:4222",
		"nats://s3cret@h:4222":   "nats://***@h:4222",
		"nats://u:s3cret@h1:4222,nats://s3cret@h2":                               "nats://u:***@h1:4222,nats://***@h2",
		"tls://u:s3cret@h:4222,tls://h2:4222":                                    "tls://u:***@h:4222,tls://h2:4222",
		"http://127.0.0.1:9300":                                                  "http://127.0.0.1:9300",
		"http://u:s3cret@h":                                                      "http://u:***@h",
		"https://s3cret@api.example/v1":                                          "https://***@api.example/v1",
		"https://s3cret:@api.example":                                            "https://***@api.example",
		"http://h/?token=s3cret&x=1":                                             "http://h/?token=***&x=1",
		"http://h/?x=1&Password=s3cret":                                          "http://h/?x=1&Password=***",
		"http://h/?api_key=s3cret&access_token=s3cret&sig=s3cret&mode=a":         "http://h/?api_key=***&access_token=***&sig=***&mode=a",
		"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable":            "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable",
		"postgres://u:s3cret@h1:5432,h2:5432/db?target_session_attrs=read-write": "postgres://u:***@h1:5432,h2:5432/db?target_session_attrs=read-write",
		"postgresql://u:@h/db":                                                   "postgresql://u:***@h/db",
		"host=h user=u password=s3cret dbname=db":                                Unparsed,
		"nats://u:s3cret@h:notaport":                                             Unparsed,
		"127.0.0.1:4222":                                                         Unparsed,
	} {
		got := URL(in)
		require.Equal(t, want, got, in)
		require.NotContains(t, got, "s3cret", in)
	}
}

// Error messages quote the URL they failed on; Text masks it there too.
func TestTextMasksCredentialsInMessages(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"nats://u:s3cret@h:notaport",
		"nats://s3cret@h:4222,nats://u:s3cret@h2:bad",
		"http://u:s3%63ret@h/",
		"http://h/?token=s3cret",
		"https://s3cret@h",
	} {
		_, err := url.Parse(raw)
		if err == nil {
			err = errors.New("GET " + raw + ": connection refused (password s3cret, user s3cret)")
		}
		msg := Text("connect: "+err.Error(), raw)
		require.NotContains(t, msg, "s3cret", raw)
		require.NotContains(t, msg, "s3%63ret", raw)
		require.True(t, strings.HasPrefix(msg, "connect: "), msg)
	}
	require.Equal(t, "nothing to hide", Text("nothing to hide", "nats://127.0.0.1:4222", ""))
}
