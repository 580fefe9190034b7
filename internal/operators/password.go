package operators

import (
	"context"
	"sync"

	"github.com/alexedwards/argon2id"
)

// params are the argon2id settings of new hashes: OWASP's recommendation
// for argon2id with 19 MiB (m=19456 KiB, t=2, p=1). A hash records its own
// parameters, so raising them later leaves old hashes verifiable.
var params = &argon2id.Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// hashing bounds the hashes computed at once on a pod: each takes 19 MiB and
// a core for tens of milliseconds, so a flood of sign-ins waits here instead
// of exhausting memory.
var hashing = make(chan struct{}, 2)

func hashPassword(ctx context.Context, password string) (string, error) {
	if err := acquire(ctx); err != nil {
		return "", err
	}
	defer release()
	return argon2id.CreateHash(password, params)
}

// checkPassword compares password with hash in constant time. An empty hash
// (an unknown email) is compared with a decoy hash at the same cost, so the
// answer takes as long as for a wrong password; the caller refuses an
// unknown email whatever this returns.
func checkPassword(ctx context.Context, password, hash string) (bool, error) {
	if hash == "" {
		hash = decoy()
	}
	if err := acquire(ctx); err != nil {
		return false, err
	}
	defer release()
	return argon2id.ComparePasswordAndHash(password, hash)
}

// decoy is a hash with the same parameters, for emails without an operator.
var decoy = sync.OnceValue(func() string {
	h, err := argon2id.CreateHash("decoy", params)
	if err != nil {
		panic(err) // only crypto/rand can fail here, and it does not
	}
	return h
})

func acquire(ctx context.Context) error {
	select {
	case hashing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func release() { <-hashing }
