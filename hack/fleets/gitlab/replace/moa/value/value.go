// Package value stands in for moa's values (see package moa). A job input's
// value cannot be decoded in this build: UnmarshalJSON refuses, so a job
// with inputs fails before it runs rather than running with wrong values.
package value

import (
	"errors"
	"fmt"
)

// Kind is a value's type.
type Kind int

// The kinds of value.
const (
	NullKind Kind = iota
	StringKind
	NumberKind
	BoolKind
	ArrayKind
	ObjectKind
)

func (k Kind) String() string {
	return [...]string{"null", "string", "number", "bool", "array", "object"}[k]
}

// Errors of lookups.
var (
	ErrAttributeNotFound = errors.New("attribute not found")
	ErrInvalidKey        = errors.New("invalid key")
)

// Mapper is an object's contents.
type Mapper interface{ Len() int }

// Value is a string, null or object here (the only kinds GitLab Runner
// makes itself).
type Value struct {
	kind  Kind
	s     string
	marks uint16
}

// String makes a string value.
func String(s string) Value { return Value{kind: StringKind, s: s} }

// Null makes the null value.
func Null() Value { return Value{} }

// Object makes an object value.
func Object(Mapper) Value { return Value{kind: ObjectKind} }

// Kind is the value's kind.
func (v Value) Kind() Kind { return v.kind }

// String is the value as text.
func (v Value) String() string {
	if v.kind == StringKind {
		return v.s
	}
	return fmt.Sprint(v.kind)
}

// WithMarks adds marks.
func (v Value) WithMarks(m uint16) Value { v.marks |= m; return v }

// HasMarks tells whether all of m are set.
func (v Value) HasMarks(m uint16) bool { return v.marks&m == m }

// UnmarshalJSON refuses: job inputs are not in this build.
func (v *Value) UnmarshalJSON([]byte) error {
	return errors.New("job inputs are not in this build of gitlab-runner")
}
