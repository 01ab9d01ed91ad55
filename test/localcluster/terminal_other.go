//go:build !unix

package localcluster

// TakeTerminal does nothing where there are no process groups.
func TakeTerminal() (giveBack func()) { return func() {} }
