package core

// MaxStateCmd lets the external tests check StateCmd's bound exactly.
const MaxStateCmd = maxStateCmd

// MaxPending lets the external tests fill the bus's reorder buffer exactly.
const MaxPending = maxPending
