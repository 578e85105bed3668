// Package uistate is the view model a UI renders a session from: the
// UIState reducer over core's events and its JSON wire format
// ("ui_state_v1"). Reduce is a pure function of a state and an event, so
// the same timeline comes from replaying the event log (ReduceAll, on a
// page load) and from following the live bus (UIReducer, which also yields
// the UIUpdate an event caused, for clients that take deltas). States are
// values: nothing here modifies a state it was given or returned, which
// lets the web adapter keep recent states and updates without copying.
// The decisions the architecture leaves open (stable item ids, how tool
// calls group, what a closed question shows) are written at the top of
// uistate.go; uiwire.go documents each item kind's JSON. uistate imports
// core and nothing else of the project.
package uistate
