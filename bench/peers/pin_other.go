//go:build !linux

package main

import "os/exec"

// canPin: no CPU affinity here; nothing is pinned.
const canPin = false

func startOn(cmd *exec.Cmd, _ int) error { return cmd.Start() }
