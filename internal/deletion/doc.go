// Package deletion is the deletion note: the guard's word to the recorder
// about who asked for a running runner's pod to go and under which rule.
// It holds the note's one shape (New), when a note counts for a death
// (Valid, Began, Left, and the timing they share), and its one writer
// (Notes), which the guard calls after it answered, on its pool of work
// after its answers: a note is written once what it tells of has
// happened, retried for as long as the recorder waits for it.
package deletion
