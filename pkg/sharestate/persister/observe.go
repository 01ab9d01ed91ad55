package persister

import (
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Observer is told what a persister does, as kgo's hooks are: the binaries turn it into their
// sharestate_persister_* metrics. Its methods are called concurrently from the goroutines that
// answer partitions, so they must be safe for that, quick, and never block. Every string argument
// has a small, fixed set of values.
type Observer interface {
	// Operation is one partition's answer: op is "initialize", "read", "write", "delete" or
	// "read_summary", code the Kafka error code it was answered with.
	Operation(op string, code sharestate.ErrorCode)
	// WriteAnswered is the time from a partition's Write being queued to its answer.
	WriteAnswered(took time.Duration)
	// StatusUpdated is the time of one status update as the persister sees it: encoding, the round
	// trip to the API server and decoding the answer. StatusStored is the estimated size of the status
	// an update stored.
	StatusUpdated(took time.Duration)
	StatusStored(bytes int)
	// WritesCombined is the number of Writes of one partition combined into one status update.
	WritesCombined(n int)
	// APIRequest is a request to the Kubernetes API by verb ("get", "update_status", "create",
	// "patch") and outcome: success, conflict, not_found, already_exists, unavailable or refused.
	APIRequest(verb, outcome string)
	// Conflict is a status update refused because the object had changed (or gone) since it was read.
	Conflict()
}

// nopObserver observes nothing: what Options.Observer defaults to.
type nopObserver struct{}

func (nopObserver) Operation(string, sharestate.ErrorCode) {}
func (nopObserver) WriteAnswered(time.Duration)            {}
func (nopObserver) StatusUpdated(time.Duration)            {}
func (nopObserver) StatusStored(int)                       {}
func (nopObserver) WritesCombined(int)                     {}
func (nopObserver) APIRequest(string, string)              {}
func (nopObserver) Conflict()                              {}

// apiRequest tells the observer of a Kubernetes API request and its outcome.
func (p *Persister) apiRequest(verb string, err error) {
	p.obs.APIRequest(verb, apiOutcome(err))
}

func apiOutcome(err error) string {
	switch classify(err) {
	case classOK:
		return "success"
	case classConflict:
		return "conflict"
	case classNotFound:
		return "not_found"
	case classExists:
		return "already_exists"
	case classRetriable:
		return "unavailable"
	default:
		return "refused"
	}
}
