// Package operators owns the console's people and their sign-ins: the
// operators table (email, role, an argon2id hash of the password), the
// console_sessions table and the console_login_failures table. Nothing else
// runs SQL on them.
//
// A password is generated (crypto/rand), shown once and kept only as an
// argon2id hash (github.com/alexedwards/argon2id: salt, encoding and the
// constant-time compare are the library's). A session id is 130 random bits,
// new at every sign-in; the cookie holds it and the table only its SHA-256,
// so a copy of the table opens no session. A session lives while it is used
// within the idle timeout, and never longer than its lifetime (24 h), both
// judged by the database clock. Failed sign-ins are counted per email, known
// or not, in the database, so the lockout holds across pods; an attempt is
// counted before its password is checked, so attempts racing on several
// pods cannot get more guesses than the limit. docs/console.md explains the
// choices.
package operators
