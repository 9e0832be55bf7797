// Package cputime reads the CPU time the process has used, for benchmarks
// and relay bench, which report CPU per operation: on a shared machine it
// holds better than wall-clock time.
package cputime
