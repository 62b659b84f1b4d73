package haproxy

import (
	"text/template"
	"text/template/parse"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A configuration template may use actions, if/else, with, variables, comparisons and one
// level of range over the backends; nothing else. What is left out could make rendering unbounded: printf's
// width and precision (`printf "%999999999d"` allocates gigabytes), range over a number or a
// function's result (`range 1000000000` spins without writing a byte), nested templates
// (recursion) and calls to functions in the data.

// allowedFuncs are the builtin functions a template may call: each costs at most the size of
// its arguments. printf, slice and call are left out.
var allowedFuncs = sets.New("and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "html", "js", "urlquery", "print", "println")

// checkTemplate walks the parsed template and rejects whatever is outside the restricted
// language, naming it.
func checkTemplate(t *template.Template) error {
	for _, tmpl := range t.Templates() {
		if tmpl.Name() != t.Name() {
			return errors.Errorf("defines template %q: define, block and template are not allowed", tmpl.Name())
		}
	}
	if t.Tree == nil {
		return nil
	}
	return checkNode(t.Root, false)
}

// checkNode checks a node; inRange is true inside a range, where another range would multiply
// the iterations.
func checkNode(n parse.Node, inRange bool) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNode(c, inRange); err != nil {
				return err
			}
		}
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
	case *parse.ActionNode:
		return checkPipe(n.Pipe)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode, inRange)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode, inRange)
	case *parse.RangeNode:
		if !rangesOverBackends(n.Pipe) {
			return errors.Errorf("%s: range may only go over .Backends (or $.Backends)", n.String())
		}
		if inRange {
			return errors.Errorf("%s: a range inside a range is not allowed", n.String())
		}
		return checkBranch(&n.BranchNode, true)
	case *parse.TemplateNode:
		return errors.Errorf("%s: template is not allowed", n.String())
	default:
		return errors.Errorf("%s is not allowed", n.String())
	}
	return nil
}

func checkBranch(b *parse.BranchNode, inRange bool) error {
	if err := checkPipe(b.Pipe); err != nil {
		return err
	}
	if err := checkNode(b.List, inRange); err != nil {
		return err
	}
	return checkNode(b.ElseList, inRange)
}

func checkPipe(p *parse.PipeNode) error {
	if p == nil {
		return nil
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			if err := checkArg(arg); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkArg(arg parse.Node) error {
	switch a := arg.(type) {
	case *parse.IdentifierNode:
		if !allowedFuncs.Has(a.Ident) {
			return errors.Errorf("function %s is not allowed (allowed: %v)", a.Ident, sets.List(allowedFuncs))
		}
	case *parse.PipeNode:
		return checkPipe(a)
	case *parse.ChainNode:
		return checkArg(a.Node)
	}
	return nil
}

// rangesOverBackends is true for `range .Backends` and `range $.Backends`, with or without
// variables declared.
func rangesOverBackends(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return len(a.Ident) == 1 && a.Ident[0] == "Backends"
	case *parse.VariableNode:
		return len(a.Ident) == 2 && a.Ident[0] == "$" && a.Ident[1] == "Backends"
	}
	return false
}
