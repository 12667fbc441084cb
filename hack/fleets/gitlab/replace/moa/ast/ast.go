// Package ast stands in for moa's syntax tree (see package moa: never built).
package ast

// Expr is a parsed expression.
type Expr interface {
	Walk(Visitor) (Expr, error)
}

// Visitor walks an Expr.
type Visitor interface {
	Enter(Expr) (Visitor, error)
	Exit(Expr) (Expr, error)
}

// Template is an interpolation.
type Template struct{}

// Walk visits only the template itself.
func (t *Template) Walk(v Visitor) (Expr, error) {
	if _, err := v.Enter(t); err != nil {
		return nil, err
	}
	return v.Exit(t)
}
