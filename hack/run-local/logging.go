package main

import (
	"slices"
	"strings"

	"github.com/go-logr/logr"
)

// loggerNames replaces the names of loggers that tell a user of `make run` nothing: envtest logs the
// local control plane's start as "controller-runtime.test-env", a name from the test framework it was
// written for.
var loggerNames = map[string]string{
	"controller-runtime.test-env": "local-control-plane",
}

// renamed returns log with every logger name that loggerNames lists replaced.
func renamed(log logr.Logger) logr.Logger {
	sink := log.GetSink()
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // renamingSink's own frame
	}
	return logr.New(renamingSink{sink: sink})
}

// renamingSink applies a logger's names only when it logs, so that a whole name can be replaced: a
// name is built one WithName at a time ("controller-runtime", then "test-env"), and only the whole
// says which logger it is.
type renamingSink struct {
	sink  logr.LogSink // with the values given, without the names
	names []string
}

var _ logr.CallDepthLogSink = renamingSink{}

// Init does nothing: the wrapped sink is initialized already.
func (renamingSink) Init(logr.RuntimeInfo) {}

func (s renamingSink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s renamingSink) Info(level int, msg string, kv ...any) { s.named().Info(level, msg, kv...) }

func (s renamingSink) Error(err error, msg string, kv ...any) { s.named().Error(err, msg, kv...) }

func (s renamingSink) WithValues(kv ...any) logr.LogSink {
	return renamingSink{sink: s.sink.WithValues(kv...), names: s.names}
}

func (s renamingSink) WithName(name string) logr.LogSink {
	return renamingSink{sink: s.sink, names: append(slices.Clip(s.names), name)}
}

func (s renamingSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.sink.(logr.CallDepthLogSink); ok {
		return renamingSink{sink: cd.WithCallDepth(depth), names: s.names}
	}
	return s
}

// named is the wrapped sink under the logger's names, or under their replacement if loggerNames
// lists their whole.
func (s renamingSink) named() logr.LogSink {
	if replacement, ok := loggerNames[strings.Join(s.names, ".")]; ok {
		return s.sink.WithName(replacement)
	}
	sink := s.sink
	for _, name := range s.names {
		sink = sink.WithName(name)
	}
	return sink
}
