// Package cputime reads the CPU time the process has used. Benchmarks
// report it beside wall time: on a shared machine wall time measures the
// neighbours as much as the code, CPU time much less.
package cputime
