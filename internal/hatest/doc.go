// Package hatest runs the high-availability infrastructure for tests as
// real processes on one machine: a pg_auto_failover formation (a monitor, a
// primary and a synchronous standby, see Postgres) and a JetStream cluster
// (see NATS). Tests switch the database over, crash its nodes and kill
// broker nodes, and read the state back from pg_autoctl and the servers'
// monitoring endpoints instead of sleeping.
//
// Every process is started in its own process group and registered with a
// Guard, a small watchdog process that kills whatever is left when the test
// binary dies without cleaning up (a panic, a -timeout, a SIGKILL). Postgres
// backends leave their parent's process group (they call setsid), so the
// guard and Kill walk the process tree through /proc rather than signal a
// group.
//
// The processes that pg_autoctl refuses to run as root run as the postgres
// user. The Debian package postgresql-15-auto-failover provides pg_autoctl,
// and nats-server provides the broker; see docs/operations.md ("High
// availability") for the settings used.
package hatest
