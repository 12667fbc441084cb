// Package deletion is the deletion note: the guard's word to the recorder
// about who asked for a running runner's pod to go and under which rule.
// It holds the note's one shape (New), when a note counts for a death
// (Valid, Began, Left, and the timing they share), and its one writer
// (Notes), which the guard calls after it has answered.
package deletion
