package loop

import (
	"context"
)

// Step 7 of a turn, for each call before it runs (see run.runTurns): the
// call's permission, decided by authorize in the one order [Permissions]
// documents. The policy's rules are in permission.go, the pre_tool hooks in
// hooks.go, the approver in approval.go.

// authorize decides whether p may run, in the order [Permissions]
// documents: pre_tool hooks, deny rules, the mode, allow rules, the
// approver. A refusal becomes p's result; an approver's Defer makes p
// wait. Only an approver's Cancel or the end of the run returns an error.
func (x *executor) authorize(ctx context.Context, p *execCall) error {
	perms := x.opts.Permissions
	person := ""
	if f := p.tool.def.AskPerson; f != nil {
		person = f(p.parsed.Arguments)
		p.person = person
	}
	if x.hooks == nil && perms == nil && person == "" {
		// No policy: the default mode without rules, as cheap as it
		// was before there were policies.
		if p.tool.def.RequiresApproval {
			return x.approve(ctx, p, nil)
		}
		return nil
	}
	asked, by, why := false, "", ""
	if hs := x.hooks.matching(HookPreTool, p.call.Name); len(hs) > 0 {
		var d HookDecision
		d, by, why = x.preToolHooks(ctx, p, hs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case p.state.Result != nil:
			return nil // refused
		case d == HookAllow && person == "":
			return nil
		case d == HookAsk:
			asked = true
		}
	}
	if person != "" {
		// Deny rules may refuse the call; nothing but a person allows it.
		if d := perms.check(&p.tool.def, p.parsed.Arguments, true); d.Behavior == Deny {
			x.failCall(p, &ToolError{Kind: ToolRefused, Msg: d.Reason, Err: ErrPermission, Permission: &d})
			return nil
		}
		return x.approve(ctx, p, &PermissionDecision{Behavior: Ask, Step: StepApprover, Reason: person})
	}
	d := perms.check(&p.tool.def, p.parsed.Arguments, asked)
	switch d.Behavior {
	case Allow:
		return nil
	case Deny:
		x.failCall(p, &ToolError{Kind: ToolRefused, Msg: d.Reason, Err: ErrPermission, Permission: &d})
		return nil
	}
	if asked {
		d.Step, d.Rule, d.Reason = StepHook, by, firstNonEmpty(why, "a hook asked for approval")
	}
	return x.approve(ctx, p, &d)
}

// runPolicyKey carries the policy of the run whose tool is running, so that
// calls it makes through [Toolset.Invoke] (code mode) are held to it.
type runPolicyKey struct{}

type runPolicy struct {
	perms *Permissions
	hooks *hookSet
	agent string
	depth int
}

// withPolicy returns ctx carrying x's policy, or ctx when it has none.
func (x *executor) withPolicy(ctx context.Context) context.Context {
	if x.hooks == nil && x.opts.Permissions == nil {
		return ctx
	}
	return context.WithValue(ctx, runPolicyKey{}, &runPolicy{perms: x.opts.Permissions, hooks: x.hooks, agent: x.agentName, depth: x.depth})
}
