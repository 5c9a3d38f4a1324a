package turns

import "github.com/dnsd/dnsd/internal/pacing"

// The names of package pacing.
const (
	Every = pacing.Every
	Pause = pacing.Pause
)

type (
	Pacing = pacing.Pacing
	Pacer  = pacing.Pacer
)

// New is pacing.New.
func New(pg *Pacing) Pacer { return pacing.New(pg) }
