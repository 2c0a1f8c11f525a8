// Command emclust clusters vectors and images end to end with a neural network trained
// as a mixture model by batch-wise EM (Tissera et al., "Neural Mixture Models with
// Expectation-Maximization for End-to-end Deep Clustering").
package main

import (
	"os"
	"runtime"

	"emclust/command"
)

// libtorch's CPU kernels run on an OpenMP thread team that belongs to the calling OS
// thread, and keeps its thread count per OS thread. A goroutine that moves between OS
// threads (as cgo calls let it) would start a team on each, whose idle spin-waiting
// takes the cores from the working one. Every verb does its libtorch work on the main
// goroutine, locked here to the main OS thread.
func init() { runtime.LockOSThread() }

func main() { os.Exit(command.Main(os.Args, os.Stdout, os.Stderr)) }
