// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU per operation: on a shared machine it holds better than
// wall-clock time.
package cputime
