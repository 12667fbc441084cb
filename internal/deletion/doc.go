// Package deletion is the deletion note: the guard's word to the recorder
// about who asked for a running runner's pod to go and under which rule.
// It holds the note's one shape (New), when a note counts for a death
// (Valid, Began, Left, and the timing they share), and its one writer
// (Notes), which the guard calls as it answers: a note is written in the
// background once what it tells of has happened, or, when every slot is
// busy, given one bounded try before the answer (dropped when it must wait
// for a deletion, which follows the answer).
package deletion
