// Package integration holds strata's end-to-end tests: a NATS server
// started by the test, and each service built and run as its own OS
// process, exactly as an operator runs them. The tests publish jobs and
// events over NATS, then check the containers, WAL and events the services
// produced against references computed in the test.
package integration
