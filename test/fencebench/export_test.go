package fencebench

// WaitFor is waitFor, for the tests of the package's watch.
var WaitFor = waitFor
